"""The doctor's verdicts in the real cpu-debian12 image under the real engine (cgroup v1 here):
each case of doctor round 2 that a container can set up, run as an operator would run it."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

MiB = 2**20
V1_MEMORY = Path("/sys/fs/cgroup/memory")


def run(image: str, *docker_args: str, command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", *docker_args, image, *command], capture_output=True, text=True,
                          timeout=300)


def doctor_json(image: str, *docker_args: str, after: list[str] | None = None) -> dict:
    proc = run(image, "--entrypoint", "rapids-doctor", *docker_args, command=["--json", "--", *(after or [])])
    return json.loads(proc.stdout)


@pytest.fixture
def parent_cgroup():
    """A cgroup v1 parent limited to 768 MiB, as a site's job slice would be (removed after)."""
    if not (V1_MEMORY / "memory.limit_in_bytes").is_file():
        pytest.fail("this test needs the engine on cgroup v1 (as CI's dockerd is): /sys/fs/cgroup/memory is absent")
    name = f"rapidship-test-{uuid.uuid4().hex[:8]}"
    path = V1_MEMORY / name
    path.mkdir()
    (path / "memory.limit_in_bytes").write_text(str(768 * MiB))
    yield name
    for child in path.iterdir():
        if child.is_dir():
            child.rmdir()
    path.rmdir()


def test_a_parents_lower_limit_sizes_the_workers(cpu_image, parent_cgroup):
    """--cgroup-parent P --memory 2g under P at 768 MiB: the worker was OOM-killed at 805 MB while
    the doctor derived 1.74 GB. Now the budget is the parent's."""
    report = doctor_json(cpu_image.ref, "--cgroup-parent", f"/{parent_cgroup}", "--memory", "2g",
                         "--memory-swap", "2g")
    assert report["derived"]["memory_budget"] == 768 * MiB
    assert report["derived"]["worker_memory_limit"] < 768 * MiB


def test_a_tmpfs_spill_dir_is_refused_where_disk_spill_is_needed(cpu_image):
    args = ["--memory", "1g", "--memory-swap", "1g", "--tmpfs", "/spill:uid=1001,gid=0,mode=0700"]
    worker = run(cpu_image.ref, *args, command=["dask", "worker", "tcp://127.0.0.1:1", "--memory-limit", "512MiB"])
    assert worker.returncode == 3 and "FATAL: spill dir /spill is on tmpfs" in worker.stderr, worker.stderr
    smoke = run(cpu_image.ref, *args, command=["rapids-smoke", "spill", "--mode", "cpu"])
    assert smoke.returncode != 0 and "is on tmpfs" in smoke.stdout + smoke.stderr
    job = run(cpu_image.ref, *args, command=["python", "-c", "print('ran')"])
    assert job.returncode == 0 and "ran" in job.stdout  # no worker: a WARNING, not a stop


def test_a_small_container_runs_what_needs_no_worker(cpu_image):
    proc = run(cpu_image.ref, "--memory", "512m", "--memory-swap", "512m", command=["python", "-c", "print(1)"])
    assert proc.returncode == 0 and proc.stdout.strip() == "1", proc.stderr


def test_thresholds_above_the_limit_from_the_environment_are_refused(cpu_image):
    env = ["--env", "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=1.5", "--env", "DASK_DISTRIBUTED__WORKER__MEMORY__SPILL=1.6",
           "--env", "DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE=False",
           "--env", "DASK_DISTRIBUTED__WORKER__MEMORY__TERMINATE=False"]
    proc = run(cpu_image.ref, "--memory", "1g", "--memory-swap", "1g", *env,
               command=["dask", "worker", "tcp://127.0.0.1:1", "--memory-limit", "512MiB"])
    assert proc.returncode == 3 and "target 1.5, spill 1.6" in proc.stderr, proc.stderr


def test_a_uid_outside_group_0_is_told_the_fix(cpu_image, tmp_path):
    """--user 12345:12345 with a spill dir it owns: workers could not start (chdir into the 0770 home
    failed, "Nanny failed to start") while the doctor was silent."""
    import os

    spill = tmp_path / "spill"
    spill.mkdir()
    os.chown(spill, 12345, 12345)
    spill.chmod(0o700)
    proc = run(cpu_image.ref, "--user", "12345:12345", "--memory", "1g", "--memory-swap", "1g",
               "-v", f"{spill}:/spill", command=["dask", "worker", "tcp://127.0.0.1:1"])
    assert proc.returncode == 3 and "cannot be entered by uid 12345" in proc.stderr and "--user UID:0" in proc.stderr


@pytest.mark.parametrize("wrapper", [["nice", "-n", "5"], ["timeout", "1d"], ["env", "A=1"]])
def test_a_wrapped_worker_is_still_checked(cpu_image, wrapper):
    """In a 1 GiB, 2-CPU container two 640 MiB workers do not fit, behind any wrapper or count."""
    proc = run(cpu_image.ref, "--memory", "1g", "--memory-swap", "1g", "--cpus", "2", command=[
        *wrapper, "dask", "worker", "tcp://127.0.0.1:1", "--nworkers", "-1", "--memory-limit", "640MiB"])
    assert proc.returncode == 3 and "x 2 workers" in proc.stderr, proc.stderr


def test_unlimited_swap_is_said_in_the_table(cpu_image):
    report = doctor_json(cpu_image.ref, "--memory", "1g", "--memory-swap", "-1")
    swap = report["facts"]["cgroup"]
    if not Path("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists():
        pytest.fail("the host has no swap accounting (memory.memsw.*): --memory-swap -1 cannot be told apart")
    assert swap["swap_unlimited"] is True
    assert any("swap is unlimited" in f["message"] for f in report["findings"])


def test_the_gpu_guard_holds_without_the_entrypoint(cpu_image, tmp_path):
    """docker run --entrypoint python (as Kubernetes `command:` or GitLab's `entrypoint: [""]` do)
    skips the preflight; the env's .pth still checks the device code at the first CUDA import. The
    GPU is a stand-in NVML reporting an H200 (cc 9.0); the package a stand-in `cupy`."""
    from unit.runtime.test_gpu_guard import FAKE_NVML

    (tmp_path / "pynvml.py").write_text(FAKE_NVML)
    (tmp_path / "cupy.py").write_text("print('cupy imported')\n")
    tmp_path.chmod(0o755)
    for keep, imported in (([80], False), ([80, 90], True)):
        (tmp_path / "prune.json").write_text(json.dumps({"keep": keep}))
        for f in tmp_path.iterdir():
            f.chmod(0o644)
        proc = run(cpu_image.ref, "--entrypoint", "python", "-v", f"{tmp_path}:/fake:ro", "-e", "PYTHONPATH=/fake",
                   "-e", "RAPIDSHIP_PRUNE_RECORD=/fake/prune.json", command=["-c", "import cupy"])
        if imported:
            assert proc.returncode == 0 and "cupy imported" in proc.stdout, proc.stderr
        else:
            assert proc.returncode == 1 and "rapids GPU guard: GPU 0 NVIDIA H200 has compute capability 9.0" \
                in proc.stderr and "cupy imported" not in proc.stdout, proc.stderr


@pytest.mark.parametrize("how", ["entrypoint", "by hand"])
def test_an_uncovered_gpu_stops_the_preflight_with_one_fatal_line(cpu_image, tmp_path, how):
    """A prune record of [80] on an sm_90 GPU (a stand-in NVML: an H200) with cuDF installed (a
    stand-in package): the doctor's probe for cuDF met the env's GPU guard in the doctor's own
    interpreter and the entrypoint printed a traceback and exited 1. It must be the doctor's one
    FATAL line and exit 3, through the entrypoint and through rapids-doctor run by hand."""
    from unit.runtime.test_gpu_guard import FAKE_NVML

    (tmp_path / "pynvml.py").write_text(FAKE_NVML)
    (tmp_path / "cudf").mkdir()
    (tmp_path / "cudf" / "__init__.py").write_text("print('cudf imported')\n")
    (tmp_path / "prune.json").write_text(json.dumps({"keep": [80]}))
    for path in [tmp_path, *tmp_path.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    mounts = ["-v", f"{tmp_path}:/fake:ro", "-e", "PYTHONPATH=/fake", "-e", "RAPIDSHIP_PRUNE_RECORD=/fake/prune.json"]
    if how == "entrypoint":
        proc = run(cpu_image.ref, *mounts, command=["python", "-c", "print('ran')"])
    else:
        proc = run(cpu_image.ref, "--entrypoint", "rapids-doctor", *mounts, command=["--preflight"])
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr and "ran" not in proc.stdout
    fatal = [line for line in proc.stderr.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and "compute capability 9.0" in fatal[0] and "sm_80" in fatal[0], proc.stderr


def test_caches_on_a_read_only_path_are_warned_and_the_hardened_profile_gives_them_tmp(cpu_image):
    """The image keeps every cache a library writes at run time under /tmp (CuPy's kernel cache,
    numba's, XDG's, matplotlib's): the hardened profile's tmpfs. Without a writable /tmp the doctor
    says where each would land."""
    hardened = ["--read-only", "--user", "123456:0", "--memory", "1g", "--memory-swap", "1g"]
    bare = doctor_json(cpu_image.ref, *hardened)
    warned = [f["message"] for f in bare["findings"] if f["topic"] == "cache"]
    assert {m.split(" (")[0] for m in warned} == {"CuPy's kernel cache", "numba's cache", "the XDG cache",
                                                 "matplotlib's config and cache"}, bare["findings"]
    assert all("uid 123456 cannot write" in m and "tmpfs at /tmp" in m for m in warned)
    with_tmp = doctor_json(cpu_image.ref, *hardened, "--tmpfs", "/tmp")
    assert not [f for f in with_tmp["findings"] if f["topic"] == "cache"]
    env = run(cpu_image.ref, "--entrypoint", "env", command=[])
    assert "CUPY_CACHE_DIR=/tmp/.cache/cupy" in env.stdout and "NUMBA_CACHE_DIR=/tmp/.cache/numba" in env.stdout


@pytest.mark.parametrize("how", ["the OS python", "a fresh venv"])
def test_the_gpu_guard_holds_for_interpreters_that_reach_the_env_through_pythonpath(cpu_image, tmp_path, how):
    """No .pth is read from PYTHONPATH: /usr/bin/python3.11 (the interpreter the env's venv is made
    from) or a new venv, pointed at the env's site-packages, skipped the guard. The env's
    sitecustomize now installs it there too."""
    from unit.runtime.test_gpu_guard import FAKE_NVML

    (tmp_path / "pynvml.py").write_text(FAKE_NVML)
    (tmp_path / "cupy.py").write_text("print('cupy imported')\n")
    (tmp_path / "prune.json").write_text(json.dumps({"keep": [80]}))
    for f in [tmp_path, *tmp_path.iterdir()]:
        f.chmod(0o755 if f.is_dir() else 0o644)
    site = "/opt/rapids/lib/python3.11/site-packages"
    script = ("/usr/bin/python3.11 -c 'import cupy'" if how == "the OS python" else
              "/usr/bin/python3.11 -m venv --without-pip /tmp/v && /tmp/v/bin/python -c 'import cupy'")
    proc = run(cpu_image.ref, "--entrypoint", "sh", "--tmpfs", "/tmp", "-v", f"{tmp_path}:/fake:ro",
               "-e", f"PYTHONPATH={site}:/fake", "-e", "RAPIDSHIP_PRUNE_RECORD=/fake/prune.json",
               command=["-c", script])
    assert proc.returncode == 1 and "cupy imported" not in proc.stdout, proc.stdout + proc.stderr
    assert "rapids GPU guard: GPU 0 NVIDIA H200 has compute capability 9.0" in proc.stderr


def test_the_runtime_package_ships_compiled(cpu_image):
    """Keyed by source hash, as the env is: a timestamp .pyc (the .pth's import at build time left two)
    would make two builds of the same sources differ by their mtimes."""
    code = ("import glob, json; print(json.dumps({p.rsplit('/', 1)[1].split('.')[0]: open(p, 'rb').read(8)[4] "
            "for p in glob.glob('/opt/rapidship/rapids_runtime/__pycache__/*.pyc')}))")
    proc = run(cpu_image.ref, "--entrypoint", "python", command=["-c", code])
    flags = json.loads(proc.stdout)
    assert {"__init__", "gpu_guard", "doctor", "rules", "views"} <= set(flags), proc.stdout
    assert set(flags.values()) == {1}, flags   # 1: hash-based, unchecked (0 would be a timestamp)
