"""`invoke release` refuses bad flags before any stage runs: one error naming the flag, exit 2."""

from __future__ import annotations

import os
import subprocess

import pytest

from support.commands import ROOT

PASSWORD = "release-task-test"


def release(tmp_path, *flags: str, registry: str | None = "127.0.0.1:5000") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAPIDSHIP_REGISTRY", "RAPIDSHIP_SIGNING"))}
    env.update(RAPIDSHIP_SIGNING_PASSWORD=PASSWORD, **({"RAPIDSHIP_REGISTRY": registry} if registry else {}))
    return subprocess.run(["invoke", "release", "--variant", "cpu-debian12", *flags], cwd=ROOT, env=env,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    made = {}
    for name in ("ours", "other"):
        out = tmp_path_factory.mktemp(name)
        subprocess.run(["invoke", "keys.generate", "--out", str(out)], cwd=ROOT, capture_output=True, check=True,
                       env=dict(os.environ, RAPIDSHIP_SIGNING_PASSWORD=PASSWORD))
        made[name] = out
    return made


def error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "release 1/" not in proc.stderr  # no stage started
    return proc.stderr[proc.stderr.index("error:"):]


def test_no_registry(tmp_path, keys):
    err = error(release(tmp_path, "--key", str(keys["ours"] / "cosign.key"), registry=None))
    assert err.startswith("error: --registry: no registry to push to")


def test_a_public_key_of_another_key(tmp_path, keys):
    err = error(release(tmp_path, "--key", str(keys["ours"] / "cosign.key"), "--public-key",
                        str(keys["other"] / "cosign.pub")))
    assert err.startswith("error: --public-key:") and "is not the public half of" in err


def test_a_policy_that_is_not_there(tmp_path, keys):
    err = error(release(tmp_path, "--key", str(keys["ours"] / "cosign.key"), "--policy", str(tmp_path / "nope.yaml")))
    assert "nope.yaml" in err


def test_a_since_that_is_not_there(tmp_path, keys):
    err = error(release(tmp_path, "--key", str(keys["ours"] / "cosign.key"), "--since", str(tmp_path / "old")))
    assert err.startswith("error: --since:")


def test_a_network_that_build_would_refuse(tmp_path, keys):
    err = error(release(tmp_path, "--key", str(keys["ours"] / "cosign.key"), "--network", "bridge0"))
    assert err.startswith("error: --network: 'bridge0' is not one of")


def test_the_build_inputs_reach_the_build_stage_and_the_gates(monkeypatch):
    """A conda variant's channel mirror and the RUN steps' network pass through release to build; the
    mirrors and the CA bundle to the gates, whose secrets gate looks for them in the image."""
    from rapidship.release import run
    from rapidship.release.current import Release

    seen, gated = {}, {}
    monkeypatch.setattr(run.stages_build, "build", lambda *a, **kw: seen.update(kw))
    monkeypatch.setattr(run.stages_build, "gates", lambda *a, **kw: gated.update(kw))
    monkeypatch.setattr(run, "_sizes", lambda *paths: None)
    monkeypatch.setattr(run, "_image_bytes", lambda rel: 0)
    inputs = {"ca_bundle": None, "pip_index": None, "conda_channel": ["http://127.0.0.1:1/wheels"], "network": "host"}
    from rapidship.records import Workspace

    rel = Release(variant=type("V", (), {"id": "x"})(), arch_flag="amd64", arches=("amd64",), ws=Workspace(),
                  registry="r", key="k", public_key="p", policy="policy/trivy.yaml", build_inputs=inputs)
    run._build(rel)
    run._gates(rel)
    assert {k: seen[k] for k in inputs} == inputs
    assert {k: gated[k] for k in ("ca_bundle", "pip_index", "conda_channel")} == {
        "ca_bundle": None, "pip_index": None, "conda_channel": ["http://127.0.0.1:1/wheels"]} and "network" not in gated


def test_a_stage_that_fails_early_is_named_with_its_own_words(tmp_path, keys):
    """A chain stopped at build (no lock in this project) says what build said, and the page it redraws
    for the stop does not hide that behind a missing record of its own."""
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "build", "locks"):
            (tmp_path / entry.name).symlink_to(entry)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAPIDSHIP_REGISTRY", "RAPIDSHIP_SIGNING"))}
    proc = subprocess.run(["invoke", "release", "--variant", "cpu-debian12", "--arch", "amd64", "--registry",
                           "127.0.0.1:5000/x", "--key", str(keys["ours"] / "cosign.key")], cwd=tmp_path,
                          env=dict(env, RAPIDSHIP_SIGNING_PASSWORD=PASSWORD), capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    error = proc.stderr[proc.stderr.index("error:"):]
    assert error.startswith("error: release cpu-debian12: stage build: said no") and "requirements.txt does not exist" in error, error
    assert "not released" in (tmp_path / "build/report/index.html").read_text()
