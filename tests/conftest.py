"""Shared fixtures. Integration tests use the real engine, registry, trivy and hadolint.

`cpu_image` builds the cpu-debian12 image once per session through the same code path users run
(`invoke base` + `invoke build`), so every integration test examines a real image.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from support.commands import CPU_VARIANT, ROOT, invoke

# This run's identity: every image the suite builds carries it in its engine name (`invoke build`
# and the tasks after it read it), so two suites sharing one engine never retag or remove each
# other's images (docs/ci.md, shared engines).
os.environ.setdefault("RAPIDSHIP_RUN_ID", f"t{uuid.uuid4().hex[:10]}")


def docker_available() -> bool:
    return shutil.which("docker") is not None and subprocess.run(
        ["docker", "info"], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="session", autouse=True)
def _this_runs_images():
    """At the end, the engine's names this run gave (they end in its identity) are removed again:
    only ever this run's own (another run's carry another identity)."""
    yield
    run = os.environ.get("RAPIDSHIP_RUN_ID", "")
    if not run or not docker_available():  # an empty identity (RAPIDSHIP_RUN_ID=) keeps the images
        return
    listed = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                            text=True, check=False).stdout.split()
    ours = [ref for ref in listed if ref.endswith((f"-{run}", f"-{run}-gcl", f"-{run}-reproduce"))]
    if ours:
        subprocess.run(["docker", "rmi", *ours], capture_output=True, check=False)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def engine():
    """A running Docker engine, or a loud failure: integration tests never skip silently in CI."""
    if not docker_available():
        if os.environ.get("CI"):
            pytest.fail("no Docker engine: .ci/run must start dockerd before the tests")
        pytest.skip("no Docker engine here (CI starts one); start dockerd to run integration tests")
    import docker

    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(scope="session")
def cpu_image(engine):
    """The real cpu-debian12 amd64 image, built once: a BuiltImage record."""
    from rapidship.imagebuild.buildkit import read_record
    from rapidship.records import Workspace

    invoke("base", "--os", "debian12")
    invoke("build", "--variant", CPU_VARIANT, "--arch", "amd64")
    return read_record(Workspace(ROOT / "build"), CPU_VARIANT, "amd64")


@pytest.fixture
def unique_name() -> str:
    """A name no parallel test run will collide with (images, containers, volumes)."""
    return f"rapidship-test-{uuid.uuid4().hex[:10]}"
