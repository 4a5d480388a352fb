"""A registry that stops answering (SIGSTOP: the kernel still accepts connections, nothing answers):
every wait of push has a deadline, and push ends with one message naming what it waited for, how
many attempts it made and how long they took in all; no index is pushed and no record written."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from support.commands import ROOT
from support.gated_records import engine_id, write_gated
from support.registry_fixtures import RegistryServer
from support.tiny_matrix import build_tiny, remove, tiny_ref

pytestmark = pytest.mark.docker
VARIANT = "cpu-debian12"
TIMEOUT = 3  # RAPIDSHIP_RETRY_TIMEOUT: each wait's deadline here


@pytest.fixture
def site(engine, tmp_path):
    """A registry of its own (the test stops it), and the tiny two-arch variant gated for it."""
    (tmp_path / "registry").mkdir()
    server = RegistryServer(tmp_path / "registry").start()
    (tmp_path / "tiny").mkdir()
    variants, name, refs = build_tiny(tmp_path / "tiny", "tiny", "FROM scratch\nARG TARGETARCH\nCOPY ${TARGETARCH}.txt /a\n")
    for arch in ("amd64", "arm64"):
        write_gated(tmp_path / "build", VARIANT, {arch: (tiny_ref(name, arch), engine_id(refs[arch]))}, lock="5e" * 32)
    yield server, variants
    os.kill(server.proc.pid, signal.SIGCONT)
    server.stop()
    remove(refs)


def start_push(server, variants, tmp_path) -> subprocess.Popen:
    env = dict(os.environ, RAPIDSHIP_REGISTRY_USER=server.user, RAPIDSHIP_REGISTRY_PASSWORD=server.password,
               RAPIDSHIP_REGISTRY_CA=str(server.ca), RAPIDSHIP_RETRY_ATTEMPTS="2", RAPIDSHIP_RETRY_BASE_DELAY="0.05",
               RAPIDSHIP_RETRY_TIMEOUT=str(TIMEOUT), DOCKER_CONFIG=str(tmp_path))
    return subprocess.Popen(["invoke", "push", "--variant", VARIANT, "--registry", f"{server.host}/staging",
                             "--no-sign", "--build-dir", str(tmp_path / "build"), "--variants-file", str(variants)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def ends_clearly(proc: subprocess.Popen, server, tmp_path, started: float) -> None:
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"push still waited after 120 s:\n{proc.communicate()[1]}")
    took = time.monotonic() - started
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in err, err
    message = errors[0]
    assert f"no answer from {server.host} within {TIMEOUT} s" in message, message
    m = re.search(r"after 2 attempt(?:s|\(s\)) in (\d+) s", message)
    assert m and int(m.group(1)) <= took + 1, message
    assert took < 60, (took, err)
    assert not (tmp_path / "build" / VARIANT / "push.json").exists()


def test_push_to_a_frozen_registry_gives_up_in_bounded_time_saying_what_it_waited_for(site, tmp_path):
    server, variants = site
    os.kill(server.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    ends_clearly(start_push(server, variants, tmp_path), server, tmp_path, started)


def test_a_registry_frozen_mid_push_is_given_up_on_as_well(site, tmp_path):
    """Frozen once the first upload reached it: skopeo holds a connection the registry never answers
    again (its HTTP client has no deadline of its own there)."""
    server, variants = site
    uploads = server.directory / "data" / "docker" / "registry" / "v2" / "repositories"
    started = time.monotonic()
    proc = start_push(server, variants, tmp_path)
    while not uploads.exists():
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.001)
    os.kill(server.proc.pid, signal.SIGSTOP)
    ends_clearly(proc, server, tmp_path, started)
