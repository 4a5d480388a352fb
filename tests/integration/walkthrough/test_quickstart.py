"""docs/quickstart.md runs as written: its shell blocks, in order, in one shell, in a scratch copy
of the checkout (its own build/), on loopback only. A failing step fails the test (bash -x names
it). This folder sorts last among the integration tests: the walkthrough removes and re-imports
the shared cpu-debian12 image, and puts it back whatever happens."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess

import pytest

from support.commands import ROOT

pytestmark = pytest.mark.docker

BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
LOCK = "/tmp/rapidship-quickstart.lock"  # one walkthrough at a time on a machine: it uses the page's fixed names


def image_id(ref: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def test_the_quickstart_runs_as_written(cpu_image, tmp_path):
    blocks = BLOCK.findall((ROOT / "docs" / "quickstart.md").read_text())
    assert len(blocks) == 6
    work = tmp_path / "checkout"
    shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns("build", ".git", "__pycache__", ".whl", ".hypothesis",
                                                              ".gitlab-ci-local"))
    # a new user's shell: no registry or signing variables, and no run identity, so the images take
    # the names the page writes; suites sharing one engine therefore take turns here (a lock)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RAPIDSHIP_REGISTRY", "RAPIDSHIP_SIGNING")) and k != "RAPIDSHIP_RUN_ID"}
    lock = open(LOCK, "a")  # noqa: SIM115 - held for the walkthrough, closed below
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        proc = subprocess.run(["bash", "-c", "set -eux\n" + "\n".join(blocks)], cwd=work, env=env,
                              capture_output=True, text=True, timeout=1500)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        subprocess.run(["invoke", "registry.down"], cwd=work, capture_output=True)
        if image_id(cpu_image.ref) != cpu_image.image_id:  # the shared image as the other tests know it
            if image_id(cpu_image.image_id):
                subprocess.run(["docker", "tag", cpu_image.image_id, cpu_image.ref], check=True)
            else:
                subprocess.run(["invoke", "build", "--variant", "cpu-debian12", "--arch", "amd64"], cwd=ROOT,
                               capture_output=True)
    assert proc.returncode == 0, proc.stderr[-5000:]
    build = work / "build" / "cpu-debian12"
    pushed = json.loads((build / "push.json").read_text())
    assert set(pushed["arches"]) == {"amd64"} and not pushed["gates_skipped"]
    assert json.loads((build / "sign.json").read_text())["index"]["digest"] == pushed["index_digest"]
    promoted = json.loads((build / "promote.json").read_text())
    assert promoted["digest"] == pushed["index_digest"] and promoted["verified_with"].startswith("sha256:")
    built = json.loads((build / "build-amd64.json").read_text())
    reports = [json.loads(m.group(0)) for m in re.finditer(r'^\{\n  "export_id".*?^\}', proc.stdout, re.S | re.M)]
    verified, imported = reports[-2], reports[-1]
    assert verified["verification"] == "signatures" and [x["image_id"] for x in verified["verified"]] == [built["image_id"]]
    assert imported["verification"] == "signatures" and [x["image_id"] for x in imported["loaded"]] == [built["image_id"]]
    assert proc.stdout.count('"passed": true') >= 2  # both verifies (the imported id: checked by import itself)
