"""The generated child pipeline for cpu-debian12, run for real under gitlab-ci-local.

A copy of the checkout becomes a git repository with a remote named origin (gitlab-ci-local
needs one); `invoke ci.generate --profile local` writes the pipeline into it; gitlab-ci-local runs
every job with the shell executor (`--shell-isolation`) against this machine's dockerd and a
loopback registry. The GPU smoke has no runner here: it must be listed as skipped (when: never)
with its reason. Without a signing key, sign and verify are listed as skipped with theirs; the run
itself signs with a throwaway key pair, handed to the jobs as CI variables the way GitLab does.
Takes a few minutes: marker `gitlab_local` (see README), run by CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rapidship.config.matrix import load_matrix

pytestmark = [pytest.mark.docker, pytest.mark.gitlab_local]
from support.commands import ROOT  # noqa: E402
VARIANT = "cpu-debian12"
GCL = shutil.which("gitlab-ci-local")
PIPELINE = ".gitlab-ci-local-pipeline.yml"


def _checkout_copy(dest: Path) -> Path:
    """The checkout's tracked and unignored files, as a fresh repository with an origin remote."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    git = ["git", "-c", "user.name=rapidship-test", "-c", "user.email=test@rapidship.invalid"]
    for cmd in (["init", "-q", "-b", "main"], ["remote", "add", "origin", "https://gitlab.example.internal/rapidship.git"],
                ["add", "-A"], ["commit", "-q", "-m", "snapshot for gitlab-ci-local"]):
        subprocess.run(git + cmd, cwd=dest, check=True, capture_output=True)
    return dest


def _job_file(root: Path, job: str, suffix: str) -> Path:
    """gitlab-ci-local names a job's log and artifact folder after the job, ':' written 'Og'."""
    return root / (job.replace(":", "Og") + suffix)


def _gcl(repo: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([GCL, "--file", PIPELINE, *args], cwd=repo, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture
def staging_registry(tmp_path):
    """The loopback stand-in for Harbor: TLS from a throwaway CA and htpasswd, like the real one."""
    from support.registry_fixtures import RegistryServer

    directory = tmp_path / "registry"
    directory.mkdir()
    server = RegistryServer(directory).start()
    yield server
    server.stop()


def _single_arch(repo: Path, arch: str) -> None:
    """Build cpu-debian12 for one arch only in this copy: the second arch runs under qemu and
    adds minutes (RAPIDSHIP_CI_LOCAL_ARCHES=all keeps both)."""
    path = repo / "variants.yaml"
    text = path.read_text()
    marker = "  cpu-debian12:\n"
    assert marker in text
    path.write_text(text.replace(marker, f"{marker}    arches: [{arch}]\n", 1))


def test_cpu_pipeline_runs_green_under_gitlab_ci_local(engine, staging_registry, tmp_path, monkeypatch):
    if not GCL:
        pytest.fail("gitlab-ci-local is not installed: npm install -g gitlab-ci-local@4.62.0 (scripts/setup)")
    repo = _checkout_copy(tmp_path / "repo")
    if os.environ.get("RAPIDSHIP_CI_LOCAL_ARCHES", "amd64") != "all":
        _single_arch(repo, "amd64")
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@rapidship.invalid", "commit", "-qam",
                        "one arch"], cwd=repo, check=True)
    registry = f"{staging_registry.host}/staging"
    subprocess.run(["invoke", "ci.generate", "--profile", "local", "--variant", VARIANT,
                    "--registry", registry, "--out", PIPELINE], cwd=repo, check=True, capture_output=True)

    listed = _gcl(repo, "--list-all", timeout=120)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    smoke = rows[f"smoke:{VARIANT}:amd64"]
    assert re.search(r"\bnever\b", smoke), smoke                     # skipped by its rules ...
    assert "no runner tagged gpu" in smoke                            # ... and says why
    for job in (f"sign:{VARIANT}", f"verify:{VARIANT}"):              # no key given: left out, loudly
        assert re.search(r"\bnever\b", rows[job]) and "UNSIGNED" in rows[job], rows[job]

    from rapidship.sign.keys import fingerprint, generate, load_public

    keys, password = tmp_path / "keys", "throwaway-signing-password"
    monkeypatch.setenv("RAPIDSHIP_SIGNING_PASSWORD", password)
    private, public = generate(keys)  # outside the checkout copy: never an artifact
    monkeypatch.delenv("RAPIDSHIP_SIGNING_PASSWORD")

    # A tag pipeline (promote and export run on tags only), with the registry's robot and CA as
    # CI variables, the way GitLab hands them to jobs.
    # gitlab-ci-local numbers pipelines from 1 in every fresh copy: the suite's run identity instead
    # of ci$CI_PIPELINE_ID keeps two suites' pipelines on one engine apart
    run = _gcl(repo, "--shell-isolation", "--variable", "CI_COMMIT_TAG=v0.0.0-local",
               "--variable", f"RAPIDSHIP_RUN_ID={os.environ['RAPIDSHIP_RUN_ID']}-gcl",
               "--variable", f"RAPIDSHIP_REGISTRY_USER={staging_registry.user}",
               "--variable", f"RAPIDSHIP_REGISTRY_PASSWORD={staging_registry.password}",
               "--variable", f"RAPIDSHIP_REGISTRY_CA={staging_registry.ca}",
               "--variable", f"RAPIDSHIP_SIGNING_KEY={private}", "--variable", f"RAPIDSHIP_SIGNING_PASSWORD={password}",
               "--variable", f"RAPIDSHIP_SIGNING_PUBLIC_KEY={public}")
    results = {job: result for result, job in re.findall(r"^\s*(PASS|FAIL|WARN)\s+(\S+)", run.stdout, re.M)}
    logs = repo / ".gitlab-ci-local" / "output"
    failed = {j: _job_file(logs, j, ".log").read_text()[-3000:] if _job_file(logs, j, ".log").is_file() else ""
              for j, r in results.items() if r != "PASS"}
    assert run.returncode == 0 and not failed, f"{run.stdout[-4000:]}\n{run.stderr[-2000:]}\n{failed}"
    arches = ["amd64"] if os.environ.get("RAPIDSHIP_CI_LOCAL_ARCHES", "amd64") != "all" else ["amd64", "arm64"]
    want = [f"{stage}:{VARIANT}" for stage in ("render", "push", "sign", "verify", "promote", "export")]
    want += [f"{stage}:{VARIANT}:{a}" for stage in ("build", "gates", "scan") for a in arches]
    assert {j: results.get(j) for j in want} == {j: "PASS" for j in want}
    assert not any(j.startswith("smoke:") for j in results)

    # What the jobs left is real: reports where GitLab picks them up, volumes, the release index.
    artifacts = repo / ".gitlab-ci-local" / "artifacts"
    scan_dir = _job_file(artifacts, f"scan:{VARIANT}:amd64", f"/build/{VARIANT}/scan-amd64")
    assert json.loads((scan_dir / "gl-container-scanning-report.json").read_text())["scan"]["type"] == "container_scanning"
    assert json.loads((scan_dir / "sbom.cdx.json").read_text())["bomFormat"] == "CycloneDX"
    push = json.loads(_job_file(artifacts, f"push:{VARIANT}", f"/build/{VARIANT}/push.json").read_text())
    promoted = json.loads(_job_file(artifacts, f"promote:{VARIANT}", f"/build/{VARIANT}/promote.json").read_text())
    volumes = list(_job_file(artifacts, f"export:{VARIANT}", f"/export/{VARIANT}").glob("rapidship-*.iso"))
    assert volumes, "export left no ISO volume"
    from rapidship.publish.oci import Credentials, Registry

    reg = Registry(staging_registry.host, Credentials(staging_registry.user, staging_registry.password, "test"),
                   str(staging_registry.ca))
    v = load_matrix(repo / "variants.yaml").variants[VARIANT]
    from rapidship.sign.formats import tag_for

    signed = json.loads(_job_file(artifacts, f"sign:{VARIANT}", f"/build/{VARIANT}/sign.json").read_text())
    assert signed["key_fingerprint"] == fingerprint(load_public(public)) and set(signed["arches"]) == set(arches)
    assert signed["index"]["digest"] == push["index_digest"]
    for project in ("staging", "release"):
        stored = reg.head_manifest(f"{project}/{v.image}", v.tag())
        assert stored is not None, f"no {project}/{v.image}:{v.tag()}"
        assert stored.digest == push["index_digest"]
        assert reg.head_manifest(f"{project}/{v.image}", tag_for(stored.digest, "sig")), f"{project}: no signature"
    assert push["tag"] == v.tag() and set(push["arches"]) == set(arches)
    assert promoted
    # the robot's and the key's passwords reached the jobs as variables, and no job log shows them
    for log in logs.glob("*.log"):
        text = log.read_text()
        assert staging_registry.password not in text and password not in text, log.name
