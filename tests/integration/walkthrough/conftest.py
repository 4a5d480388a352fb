"""docs/quickstart.md run as written, once for this folder: steps 1-6 in a scratch copy of the
checkout, then the pages that start where it ends (its registry still up, the image pushed and
imported again: tests/integration/walkthrough/test_after_quickstart.py), then its step 7. The page
uses the image names it prints (no run identity), so suites sharing one engine take turns here;
the shared cpu-debian12 image (removed and re-imported by step 5) is put back whatever happens."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.commands import ROOT
from support.doc_pages import page_names_lock, run_page, runnable, scratch_checkout, user_env

QUICKSTART = "docs/quickstart.md"
PAGE_REF = "rapidship/dask:26.10-cpu-debian12-py3.11-amd64"   # the name the quickstart prints


def image_id(ref: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


@dataclass
class Walk:
    work: Path               # the scratch checkout
    output: str              # what steps 1-6 printed (stdout and stderr, as a terminal shows them)
    returncode: int
    imported_id: str | None  # the page's image id right after step 5's import

    def require(self) -> None:
        if self.returncode != 0:
            pytest.fail(f"{QUICKSTART} failed before this page could start:\n{self.output[-4000:]}")


def restore_shared_image(cpu_image) -> None:
    """The shared image under the name the other tests know it by."""
    if image_id(cpu_image.ref) == cpu_image.image_id:
        return
    if image_id(cpu_image.image_id):
        subprocess.run(["docker", "tag", cpu_image.image_id, cpu_image.ref], check=True)
    else:
        subprocess.run(["invoke", "build", "--variant", "cpu-debian12", "--arch", "amd64"], cwd=ROOT,
                       capture_output=True)


@pytest.fixture(scope="package")
def quickstart(cpu_image, tmp_path_factory, engine):
    *steps, cleanup = runnable(QUICKSTART)
    assert len(steps) == 6 and "registry.down" in "\n".join(cleanup.body), "the quickstart's last block cleans up"
    # a clone, as a new user has: the build takes its SOURCE_DATE_EPOCH from the commit (a copy
    # without git history is refused unless SOURCE_DATE_EPOCH is given: tests/unit/imagebuild)
    work = scratch_checkout(tmp_path_factory.mktemp("quickstart") / "checkout", git=True)
    with page_names_lock():
        try:
            proc = run_page(steps, work, user_env(), timeout=1500)
            yield Walk(work, proc.stdout, proc.returncode, image_id(PAGE_REF))
            done = run_page([cleanup], work, user_env(), timeout=120)
            assert done.returncode == 0, f"{QUICKSTART}'s clean-up failed:\n{done.stdout[-2000:]}"
        finally:
            subprocess.run(["invoke", "registry.down"], cwd=work, capture_output=True)
            restore_shared_image(cpu_image)
