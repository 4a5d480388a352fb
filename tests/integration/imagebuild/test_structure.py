"""Structure tests of the built cpu-debian12 image with docker-py, under hardened run profiles.

A container whose log has WARNING or ERROR lines fails the test unless the line is expected and
named in ALLOWED_LOG_LINES (jupyter/docker-stacks practice).
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.docker

ALLOWED_LOG_LINES: dict[str, re.Pattern] = {}
HARDENED = dict(cap_drop=["ALL"], security_opt=["no-new-privileges"])


def run(engine, image, command, **kwargs) -> str:
    """Run to completion; return the log; fail on a non-zero exit or unexpected WARNING/ERROR lines."""
    container = engine.containers.run(image, command, detach=True, **kwargs)
    try:
        status = container.wait(timeout=300)
        log = container.logs(stdout=True, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    assert status["StatusCode"] == 0, f"exit {status['StatusCode']}:\n{log}"
    bad = [line for line in log.splitlines() if re.search(r"\b(WARNING|ERROR|Traceback)\b", line)
           and not any(p.search(line) for p in ALLOWED_LOG_LINES.values())]
    assert not bad, f"unexpected warning/error lines: {bad}"
    return log


def test_user_path_env_and_labels(engine, cpu_image):
    image = engine.images.get(cpu_image.ref)
    config = image.attrs["Config"]
    assert config["User"] == "1001:0"
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["PATH"].startswith("/opt/rapids/bin:")
    assert env["RAPIDS_SPILL_DIR"] == "/spill" and env["HOME"] == "/home/rapids"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "NVIDIA_VISIBLE_DEVICES" not in env  # a CPU image asks for no GPU
    assert config["Entrypoint"] == ["/usr/local/bin/rapids-entrypoint"]
    assert config["Labels"]["io.rapidship.variant"] == "cpu-debian12"
    out = run(engine, cpu_image.ref, ["sh", "-c", "id -u; id -g; command -v python; echo $HOME"])
    assert out.split() == ["1001", "0", "/opt/rapids/bin/python", "/home/rapids"]


def test_imports_dask_and_distributed(engine, cpu_image):
    out = run(engine, cpu_image.ref, ["python", "-c", "import dask, distributed; print(dask.__version__, distributed.__version__)"])
    assert out.split() == ["2026.8.0", "2026.8.0"]


def test_no_compilers_no_conda_no_package_caches(engine, cpu_image):
    script = ("for t in gcc cc g++ conda mamba pip; do command -v $t && exit 1; done; "
              "test -z \"$(ls -A /var/lib/apt/lists 2>/dev/null)\" && test ! -d /root/.cache/pip && echo clean")
    assert run(engine, cpu_image.ref, ["sh", "-c", script]).strip() == "clean"


def test_read_only_root_with_tmpfs_and_spill_volume(engine, cpu_image, unique_name):
    volume = engine.volumes.create(unique_name)
    try:
        out = run(engine, cpu_image.ref,
                  ["sh", "-c", "touch /tmp/x && touch /spill/x && ! touch /opt/rapids/x 2>/dev/null && echo ok"],
                  read_only=True, tmpfs={"/tmp": "rw,size=64m"}, volumes={unique_name: {"bind": "/spill", "mode": "rw"}},
                  **HARDENED)
        assert out.strip() == "ok"
    finally:
        volume.remove(force=True)


def test_hardened_profile_and_python_work(engine, cpu_image):
    out = run(engine, cpu_image.ref,
              ["python", "-c", "import os, dask.array as da; print(os.getuid(), int(da.ones(1000, chunks=100).sum().compute()))"],
              **HARDENED)
    assert out.split() == ["1001", "1000"]


def test_random_uid_writes_home_and_spill(engine, cpu_image):
    out = run(engine, cpu_image.ref,
              ["sh", "-c", "id -u && touch $HOME/w $RAPIDS_SPILL_DIR/w && echo wrote"], user="918273:0", **HARDENED)
    assert out.split() == ["918273", "wrote"]


def _run_read_only(engine, ref, command):
    container = engine.containers.run(ref, command, detach=True, read_only=True, **HARDENED)
    try:
        status = container.wait(timeout=120)
        log = container.logs().decode()
    finally:
        container.remove(force=True)
    return status["StatusCode"], log


def test_entrypoint_stops_a_dask_worker_that_cannot_spill(engine, cpu_image):
    """Read-only root and no spill mount: a dask worker needs the disk tier, so the preflight
    refuses it with one clear line before the worker starts."""
    code, log = _run_read_only(engine, cpu_image.ref, ["dask", "worker", "tcp://127.0.0.1:8786"])
    assert code == 3
    assert "spill dir /spill is on a read-only filesystem" in log and "mount a host directory" in log
    assert "Traceback" not in log


def test_entrypoint_lets_a_read_only_job_run_with_a_warning(engine, cpu_image):
    """The usual hardened run of a job that needs no disk tier (--read-only, no spill mount) runs,
    with the spill-dir problem as one warning."""
    code, log = _run_read_only(engine, cpu_image.ref, ["python", "-c", "print('job ran')"])
    assert code == 0 and "job ran" in log
    assert "WARNING" in log and "read-only" in log and "FATAL" not in log
