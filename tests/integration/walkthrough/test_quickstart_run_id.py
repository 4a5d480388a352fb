"""docs/quickstart.md run as written with RAPIDSHIP_RUN_ID set, as the page advises on a shared
engine (conftest.py runs it without one): the run removes only the name its own build gave, keeps
its site state in build/site, and §6's chain is what the page says for that case (build runs
again from its cache to the same image id, the rest is skipped or runs as without a run id)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support.doc_pages import page_names_lock, run_page, runnable, scratch_checkout, user_env

from .conftest import PAGE_REF, QUICKSTART, image_id

pytestmark = pytest.mark.docker
SITE_RELEASES = Path.home() / ".local" / "state" / "rapidship" / "releases"


def state(path: Path) -> tuple | None:
    return (path.stat().st_size, path.stat().st_mtime_ns) if path.exists() else None


def test_the_quickstart_under_a_run_id_touches_only_its_own_names(engine, tmp_path):
    run = os.environ["RAPIDSHIP_RUN_ID"]   # the suite's own identity: its images are removed at its end
    *steps, cleanup = runnable(QUICKSTART)
    work = scratch_checkout(tmp_path / "checkout", git=True)
    env = user_env(run_scoped=True)
    with page_names_lock():   # the import adds the page's signed name: one run at a time, put back after
        held, site_before = image_id(PAGE_REF), state(SITE_RELEASES)
        try:
            proc = run_page(steps, work, env, timeout=1500)
            assert run_page([cleanup], work, env, timeout=120).returncode == 0
        finally:
            subprocess.run(["invoke", "registry.down"], cwd=work, capture_output=True)
            imported = image_id(PAGE_REF)
            if held:
                subprocess.run(["docker", "tag", held, PAGE_REF], capture_output=True)
            else:
                subprocess.run(["docker", "rmi", PAGE_REF], capture_output=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    out, build = proc.stdout, work / "build" / "cpu-debian12"
    built = json.loads((build / "build-amd64.json").read_text())
    assert built["ref"] == f"{PAGE_REF}-{run}"
    removed = [line for line in out.splitlines() if line.startswith("+ docker rmi")]
    assert removed == [f"+ docker rmi {PAGE_REF}-{run}"], removed   # only the name this run made
    assert imported == built["image_id"]   # back under its signed name, the same id
    assert (work / "build" / "site" / "releases").is_file() and state(SITE_RELEASES) == site_before
    chain = json.loads((build / "release.json").read_text())
    assert {s["name"]: s["verdict"] for s in chain["stages"]} == {
        "build": "pass", **dict.fromkeys(("gates", "scan", "push", "sign"), "skipped"),
        **dict.fromkeys(("smoke", "export", "export-verify", "report"), "pass")}
    assert json.loads((build / "build-amd64.json").read_text())["image_id"] == built["image_id"]
    assert "release cpu-debian12 (amd64): released" in out
