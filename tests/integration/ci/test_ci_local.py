"""docs/ci.md's local pipeline, run as written: the generated child pipeline for cpu-debian12
under gitlab-ci-local, in a copy of the checkout made a git repository (gitlab-ci-local reads the
repository; the page adds the origin remote it wants). The page's block starts a loopback registry
(`invoke registry.up`), makes a throwaway key pair and runs a tag pipeline with every job on the
shell executor against this machine's dockerd. The suite's run identity reaches the jobs as a
project variable (.gitlab-ci-local-variables.yml; gitlab-ci-local numbers pipelines from 1 in every
copy), so two suites on one engine keep their images apart. The GPU smoke has no runner here: it
must be listed as skipped (when: never) with its reason; without a signing key, sign and verify
are listed as skipped with theirs. Takes a few minutes: marker `gitlab_local` (see README), run by CI.
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
from rapidship.publish.oci import Credentials, Registry
from rapidship.sign.formats import tag_for
from rapidship.sign.keys import fingerprint, load_public

pytestmark = [pytest.mark.docker, pytest.mark.gitlab_local]
from support.doc_pages import run_page, runnable, scratch_checkout, user_env  # noqa: E402

PAGE = "docs/ci.md"
VARIANT = "cpu-debian12"
GCL = shutil.which("gitlab-ci-local")
PIPELINE = ".gitlab-ci-local-pipeline.yml"


def _job_file(root: Path, job: str, suffix: str) -> Path:
    """gitlab-ci-local names a job's log and artifact folder after the job, ':' written 'Og'."""
    return root / (job.replace(":", "Og") + suffix)


def _gcl(repo: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([GCL, "--file", PIPELINE, *args], cwd=repo, capture_output=True, text=True,
                          timeout=timeout, check=False)


def env_sh(repo: Path) -> dict[str, str]:
    """What registry.up wrote for the page's shell: the registry, its CA and the robot."""
    return dict(re.findall(r"^export (\w+)=(\S+)$", (repo / "build/registry/env.sh").read_text(), re.M))


def test_the_ci_pages_local_pipeline_runs_green_as_written(engine, tmp_path):
    if not GCL:
        pytest.fail("gitlab-ci-local is not installed: npm install -g gitlab-ci-local@4.62.0 (scripts/setup)")
    repo = scratch_checkout(tmp_path / "repo", git=True)
    (repo / ".gitlab-ci-local-variables.yml").write_text(f"RAPIDSHIP_RUN_ID: {os.environ['RAPIDSHIP_RUN_ID']}-gcl\n")
    blocks = runnable(PAGE)
    assert len(blocks) == 1 and "gitlab-ci-local" in "\n".join(blocks[0].body)
    all_arches = os.environ.get("RAPIDSHIP_CI_LOCAL_ARCHES", "amd64") == "all"
    if all_arches:   # by hand: every arch of the variant, arm64 under qemu
        blocks[0].body = [line.replace(" --arch amd64", "") for line in blocks[0].body]
    v = load_matrix(repo / "variants.yaml").variants[VARIANT]
    tmp = tmp_path / "tmp"   # the page's mktemp -d: where its key pair lands
    tmp.mkdir()
    try:
        run = run_page(blocks, repo, user_env(run_scoped=True, TMPDIR=str(tmp)), timeout=1500)
        results = {job: result for result, job in re.findall(r"^\s*(PASS|FAIL|WARN)\s+(\S+)", run.stdout, re.M)}
        logs = repo / ".gitlab-ci-local" / "output"
        failed = {j: _job_file(logs, j, ".log").read_text()[-3000:] if _job_file(logs, j, ".log").is_file() else ""
                  for j, r in results.items() if r != "PASS"}
        assert run.returncode == 0 and not failed, f"{PAGE} failed as written:\n{run.stdout[-6000:]}\n{failed}"
        registry = env_sh(repo)
        reg = Registry(registry["RAPIDSHIP_REGISTRY"], Credentials(registry["RAPIDSHIP_REGISTRY_USER"],
                                                                   registry["RAPIDSHIP_REGISTRY_PASSWORD"], "test"),
                       registry["RAPIDSHIP_REGISTRY_CA"])
        stored = {project: reg.head_manifest(f"{project}/{v.image}", v.tag()) for project in ("staging", "release")}
        signatures = {project: m and reg.head_manifest(f"{project}/{v.image}", tag_for(m.digest, "sig"))
                      for project, m in stored.items()}
        listed = _gcl(repo, "--list-all", timeout=120)   # as a pipeline without the key's variables sees it
    finally:
        subprocess.run(["invoke", "registry.down"], cwd=repo, capture_output=True)

    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    smoke = rows[f"smoke:{VARIANT}:amd64"]
    assert re.search(r"\bnever\b", smoke), smoke                     # skipped by its rules ...
    assert "no runner tagged gpu" in smoke                            # ... and says why
    for job in (f"sign:{VARIANT}", f"verify:{VARIANT}"):              # no key given: left out, loudly
        assert re.search(r"\bnever\b", rows[job]) and "UNSIGNED" in rows[job], rows[job]

    arches = ["amd64", "arm64"] if all_arches else ["amd64"]
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
    (private,) = tmp.glob("*/cosign.key")   # the page's throwaway pair
    signed = json.loads(_job_file(artifacts, f"sign:{VARIANT}", f"/build/{VARIANT}/sign.json").read_text())
    assert signed["key_fingerprint"] == fingerprint(load_public(private.with_name("cosign.pub")))
    assert set(signed["arches"]) == set(arches) and signed["index"]["digest"] == push["index_digest"]
    for project in ("staging", "release"):
        assert stored[project] is not None, f"no {project}/{v.image}:{v.tag()}"
        assert stored[project].digest == push["index_digest"]
        assert signatures[project], f"{project}: no signature"
    assert push["tag"] == v.tag() and set(push["arches"]) == set(arches)
    assert promoted
    # the robot's and the key's passwords reached the jobs as variables, and no job log shows them
    password = re.search(r"RAPIDSHIP_SIGNING_PASSWORD=(\S+)", "\n".join(blocks[0].body)).group(1)
    for log in logs.glob("*.log"):
        text = log.read_text()
        assert registry["RAPIDSHIP_REGISTRY_PASSWORD"] not in text and password not in text, log.name
