"""The generated child pipeline for cpu-debian12, run for real under gitlab-ci-local.

A copy of the checkout becomes a git repository with a remote named origin (gitlab-ci-local
needs one); `invoke ci.generate --profile local` writes the pipeline into it; gitlab-ci-local runs
every job with the shell executor (`--shell-isolation`) against this machine's dockerd and a
loopback registry. The GPU smoke has no runner here: it must be listed as skipped (when: never)
with its reason. Takes a few minutes: marker `gitlab_local` (see README), run by CI.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rapidship.matrix import load_matrix

pytestmark = [pytest.mark.docker, pytest.mark.gitlab_local]
ROOT = Path(__file__).resolve().parents[2]
VARIANT = "cpu-debian12"
GCL = shutil.which("gitlab-ci-local")
PIPELINE = ".gitlab-ci-local-pipeline.yml"
# Jobs the local run must pass, in the order the DAG allows.
EXPECTED = ["render", "build", "gates", "scan", "push", "promote", "export"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_registry(tmp_path: Path, user: str | None = None, password: str | None = None):
    """A real OCI registry (CNCF distribution) on 127.0.0.1 over plain HTTP (the engine trusts
    loopback registries without TLS), optionally with htpasswd auth. Returns (host, process)."""
    exe = shutil.which("docker-registry")
    if not exe:
        pytest.fail("docker-registry is not installed: scripts/setup installs it")
    port = _free_port()
    auth = ""
    if user:
        import bcrypt

        (tmp_path / "htpasswd").write_bytes(user.encode() + b":" + bcrypt.hashpw(password.encode(), bcrypt.gensalt(5)))
        auth = f"auth:\n  htpasswd:\n    realm: rapidship-test\n    path: {tmp_path / 'htpasswd'}\n"
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'registry'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n{auth}")
    log = open(tmp_path / "registry.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
            return f"127.0.0.1:{port}", proc
        except urllib.error.HTTPError:
            return f"127.0.0.1:{port}", proc  # 401: up, asking for credentials
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    pytest.fail(f"registry did not start: {(tmp_path / 'registry.log').read_text()}")


@pytest.fixture
def loopback_registry(tmp_path):
    host, proc = serve_registry(tmp_path)
    yield host
    proc.terminate()
    proc.wait(timeout=10)


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


def _gcl(repo: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([GCL, "--file", PIPELINE, *args], cwd=repo, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_cpu_pipeline_runs_green_under_gitlab_ci_local(engine, loopback_registry, tmp_path):
    if not GCL:
        pytest.fail("gitlab-ci-local is not installed: npm install -g gitlab-ci-local@4.62.0 (scripts/setup)")
    repo = _checkout_copy(tmp_path / "repo")
    subprocess.run(["invoke", "ci.generate", "--profile", "local", "--variant", VARIANT,
                    "--registry", loopback_registry, "--out", PIPELINE], cwd=repo, check=True, capture_output=True)

    listed = _gcl(repo, "--list-all", timeout=120)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    smoke = rows[f"smoke:{VARIANT}:amd64"]
    assert re.search(r"\bnever\b", smoke), smoke                     # skipped by its rules ...
    assert "no runner tagged gpu" in smoke                            # ... and says why

    # A tag pipeline: promote and export run only on tags.
    run = _gcl(repo, "--shell-isolation", "--variable", "CI_COMMIT_TAG=v0.0.0-local",
               "--variable", f"RAPIDSHIP_REGISTRY={loopback_registry}")
    results = {job: result for result, job in re.findall(r"^\s*(PASS|FAIL|WARN)\s+(\S+)", run.stdout, re.M)}
    logs = repo / ".gitlab-ci-local" / "output"
    failed = {j: (logs / f"{j}.log").read_text()[-3000:] if (logs / f"{j}.log").is_file() else "" for j, r in
              results.items() if r != "PASS"}
    assert run.returncode == 0 and not failed, f"{run.stdout[-4000:]}\n{run.stderr[-2000:]}\n{failed}"
    want = [f"{stage}:{VARIANT}" + (":amd64" if stage in ("build", "gates", "scan") else "") for stage in EXPECTED]
    assert {j: results.get(j) for j in want} == {j: "PASS" for j in want}
    assert f"smoke:{VARIANT}:amd64" not in results

    # What the jobs left behind is real: the manifest list in the loopback registry.
    tag = load_matrix(repo / "variants.yaml").variants[VARIANT].tag()
    image = load_matrix(repo / "variants.yaml").variants[VARIANT].image
    req = urllib.request.Request(f"http://{loopback_registry}/v2/{image}/manifests/{tag}",
                                 headers={"Accept": "application/vnd.docker.distribution.manifest.list.v2+json, "
                                                    "application/vnd.oci.image.index.v1+json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert "manifest.list" in resp.headers["Content-Type"] or "image.index" in resp.headers["Content-Type"]
