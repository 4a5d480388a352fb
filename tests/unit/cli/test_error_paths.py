"""The error paths a newcomer meets first: each names its cause and the flag or page that fixes it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from support.commands import ROOT


def invoke(*args: str, netns: bool = False) -> subprocess.CompletedProcess:
    cmd = ["invoke", *args]
    if netns:  # a host with no network at all: the air-gapped site, without sending anything anywhere
        cmd = ["unshare", "--net", *cmd]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare for a network namespace")
def test_scan_without_a_db_on_an_air_gapped_host_names_the_cause_and_the_air_gap_flags(tmp_path):
    cache, tar = tmp_path / "cache", tmp_path / "image.tar"
    tar.write_bytes(b"")   # trivy sets up its DB before it reads the image
    run = invoke("scan", "--tar", str(tar), "--cache-dir", str(cache),
                 "--out", str(tmp_path / "out"), netns=True)
    assert run.returncode == 2, run.stderr
    assert f"no vulnerability DB in {cache / 'db'}" in run.stderr and "could not download one" in run.stderr
    assert "--cache-dir" in run.stderr and "--skip-db-update" in run.stderr and "docs/scan.md" in run.stderr
    assert "lookup" not in run.stderr.split("fix:")[0].split("(")[0]   # trivy's words only as the detail
    assert "Traceback" not in run.stderr


def test_release_with_a_missing_key_blames_key_not_public_key(tmp_path):
    missing = tmp_path / "missing.key"
    run = invoke("release", "--variant", "cpu-debian12", "--registry", "127.0.0.1:9/staging", "--key", str(missing))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"error: --key: {missing}" in run.stderr and "--public-key" not in run.stderr.split("fix:")[0]


def test_the_arch_default_is_the_arches_built_for_the_variant_else_this_machines(tmp_path):
    # one rule for build, gates, scan, release, push and export (they said: this machine's; every
    # arch of the variant; every arch in the engine)
    from rapidship.cli.options import arches_flag
    from rapidship.config.matrix import Arch, load_matrix
    from rapidship.imagebuild.base import host_arch
    from rapidship.records import Workspace

    v, ws = load_matrix(ROOT / "variants.yaml").get("cpu-debian12"), Workspace(tmp_path)
    assert set(v.arches) == {Arch.amd64, Arch.arm64}
    assert arches_flag(v, None, ws) == [Arch(host_arch())]          # nothing built yet: this machine's
    other = Arch.arm64 if host_arch() == "amd64" else Arch.amd64
    ws.build(v.id, other.value).parent.mkdir(parents=True)
    ws.build(v.id, other.value).write_text("{}")
    assert arches_flag(v, None, ws) == [other]                        # built: those arches, not this machine's
    assert arches_flag(v, "all", ws) == list(v.arches) and arches_flag(v, "arm64", ws) == [Arch.arm64]


def test_push_without_arch_when_only_amd64_is_built_pushes_amd64_not_an_arm64_build(tmp_path):
    from support.gated_records import write_gated
    from support.signed_discs import LOCK, VARIANT, load_image, unique_name
    from support.tiny_matrix import VARIANTS_YAML

    name = unique_name()
    (tmp_path / "variants.yaml").write_text(VARIANTS_YAML.format(image=name))
    ref = f"{name}:26.10-cpu-debian12-py3.11-amd64"
    image = load_image(ref, "amd64", os.urandom(64))
    try:
        write_gated(tmp_path / "build", VARIANT, {"amd64": (ref, image)}, lock=LOCK)
        run = subprocess.run(["invoke", "push", "--variant", VARIANT, "--variants-file", str(tmp_path / "variants.yaml"),
                              "--build-dir", str(tmp_path / "build"), "--registry", "127.0.0.1:9/staging", "--no-sign"],
                             cwd=ROOT, capture_output=True, text=True, check=False,
                             env={**os.environ, "RAPIDSHIP_RETRY_ATTEMPTS": "1"})
    finally:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
    assert "the index of cpu-debian12 lists only amd64" in run.stderr and "pushing cpu-debian12 amd64" in run.stderr
    assert "arm64" not in run.stderr and "Traceback" not in run.stderr   # nothing to push there: a loopback port


def test_keys_generate_and_registry_up_print_json_only_with_json(tmp_path):
    env = {**os.environ, "RAPIDSHIP_SIGNING_PASSWORD": "json-only"}
    plain = subprocess.run(["invoke", "keys.generate", "--out", str(tmp_path / "a")], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=False)
    assert plain.returncode == 0 and plain.stdout == "" and "public key" in plain.stderr
    asked = subprocess.run(["invoke", "keys.generate", "--out", str(tmp_path / "b"), "--json"], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=False)
    assert __import__("json").loads(asked.stdout)["public_key"] == str(tmp_path / "b" / "cosign.pub")
    if not shutil.which("docker-registry"):
        pytest.skip("docker-registry is not installed")
    for flags in ([], ["--json"]):
        folder = tmp_path / f"registry{len(flags)}"
        up = invoke("registry.up", "--dir", str(folder), *flags)
        try:
            assert up.returncode == 0 and "registry on https://127.0.0.1:" in up.stderr, up.stderr
            assert (__import__("json").loads(up.stdout)["env"] == str(folder / "env.sh")) if flags else up.stdout == ""
        finally:
            invoke("registry.down", "--dir", str(folder))
