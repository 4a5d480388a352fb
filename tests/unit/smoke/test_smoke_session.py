"""The spill smoke's cluster lifecycle with fake clusters (no dask, no GPU): a report is always
written, a close that raises or hangs is a note, no worker fails fast, exit never hangs, and a
memory limit above the container's budget is refused before anything starts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rapidship.runtime import session, smoke, smoke_modes
from rapidship.runtime.cgroup_view import CgroupMemory
from rapidship.runtime.gpu_view import Gpu, GpuView
from rapidship.runtime.session import NoWorker, cluster_session, wait_for_workers
from rapidship.runtime.smoke_verdict import Stage, Tier
from rapidship.runtime.spill_view import SpillConfig, SpillDir
from rapidship.runtime.views import Facts

GiB = 2**30
SRC = Path(__file__).resolve().parents[3] / "src"
SHUTDOWN_ERROR = "Worker process still alive after 4.0 seconds"   # dask-cuda 26.10 on the H200


class FakeCluster:
    def __init__(self, workers: int = 1, close_error: BaseException | None = None,
                 close_blocks: threading.Event | None = None):
        self.workers, self.close_error, self.close_blocks = workers, close_error, close_blocks
        self.closed = 0

    def close(self, timeout=None):
        self.closed += 1
        if self.close_blocks is not None:
            self.close_blocks.wait()
        if self.close_error is not None:
            raise self.close_error


class FakeClient:
    def __init__(self, cluster: FakeCluster, timeout=None):
        self.cluster, self.closed = cluster, 0

    def scheduler_info(self):
        return {"workers": {f"tcp://127.0.0.1:{4000 + i}": {} for i in range(self.cluster.workers)}}

    def close(self, timeout=None):
        self.closed += 1


@pytest.fixture
def release():
    """Set at teardown: lets every fake that blocks a daemon thread finish."""
    event = threading.Event()
    yield event
    event.set()


# ---- the session ----

def test_a_close_that_raises_becomes_a_note():
    notes: list[str] = []
    cluster = FakeCluster(close_error=TimeoutError(SHUTDOWN_ERROR))
    with cluster_session(lambda: cluster, 1, 5, 1, notes, make_client=FakeClient) as client:
        assert len(client.scheduler_info()["workers"]) == 1
    assert client.closed == 1 and cluster.closed == 1
    assert notes == [f"shutdown: closing the cluster failed: TimeoutError: {SHUTDOWN_ERROR}"]


def test_workers_that_never_drain_are_a_note_and_still_closed():
    class Holding(FakeClient):
        def run(self, fn):
            return {"tcp://127.0.0.1:4000": 150}

    notes: list[str] = []
    cluster = FakeCluster()
    session.shutdown(Holding(cluster), cluster, 0.3, notes)
    assert len(notes) == 1 and notes[0].startswith("shutdown: 150 key(s) still held after 0.") and cluster.closed == 1
    assert "(--drain-timeout 0.3)" in notes[0]


def test_the_body_error_propagates_and_the_cluster_is_still_closed():
    notes: list[str] = []
    cluster = FakeCluster(close_error=TimeoutError(SHUTDOWN_ERROR))
    with pytest.raises(KeyError):
        with cluster_session(lambda: cluster, 1, 5, 1, notes, make_client=FakeClient):
            raise KeyError("boom")
    assert cluster.closed == 1 and len(notes) == 1


def test_no_worker_fails_fast_with_the_reason_and_closes():
    notes: list[str] = []
    cluster = FakeCluster(workers=0)
    t0 = time.monotonic()
    with pytest.raises(NoWorker, match=r"no worker started within 0.5 s \(--worker-timeout\): 0 of 1 worker\(s\) "
                                       "joined the scheduler"):
        with cluster_session(lambda: cluster, 1, 0.5, 1, notes, make_client=FakeClient):
            pytest.fail("the body must not run without a worker")
    assert time.monotonic() - t0 < 3 and cluster.closed == 1 and notes == []


def test_a_cluster_that_never_finishes_starting_is_no_worker_and_is_closed_when_it_does(release):
    late = FakeCluster()

    def starting():
        release.wait()
        return late

    t0 = time.monotonic()
    with pytest.raises(NoWorker, match="no worker started within 0.3 s .*still starting its worker"):
        with cluster_session(starting, 1, 0.3, 1, [], make_client=FakeClient):
            pytest.fail("unreachable")
    assert time.monotonic() - t0 < 3 and "starting the cluster" in session.ABANDONED
    release.set()
    for _ in range(100):
        if late.closed:
            break
        time.sleep(0.02)
    assert late.closed == 1                                   # the late cluster is not leaked
    session.ABANDONED.clear()


def _dies_at_once() -> None:
    import os

    os._exit(3)


@pytest.mark.parametrize("then", ["waits", "raises"])
def test_a_worker_process_that_dies_at_once_is_said_at_once_not_after_the_worker_timeout(release, then):
    """A real worker process exits (code 3) while the cluster starts: the stage says the worker died,
    at once, whether the start then waits for it (the report used to say "still starting its worker"
    after --worker-timeout) or raises as distributed's LocalCluster does ("Nanny failed to start.")."""
    import multiprocessing

    late = FakeCluster()

    def starting():
        worker = multiprocessing.get_context("spawn").Process(target=_dies_at_once)
        worker.start()
        if then == "raises":
            worker.join()
            raise RuntimeError("Nanny failed to start.")
        release.wait()
        return late

    t0 = time.monotonic()
    with pytest.raises(session.WorkerDiedAtStart) as err:
        with cluster_session(starting, 1, 30, 1, [], make_client=FakeClient):
            pytest.fail("unreachable")
    assert time.monotonic() - t0 < 10
    said = session.describe(err.value, 60)
    assert said.startswith("WorkerDied: a worker process exited with code 3 ") and "still starting" not in said, said
    assert "at once" in said
    release.set()
    for _ in range(100):
        if then == "raises" or late.closed:
            break
        time.sleep(0.02)
    assert then == "raises" or late.closed == 1                   # the late cluster is not leaked
    session.ABANDONED.clear()


def test_a_close_that_hangs_is_bounded(monkeypatch, release):
    monkeypatch.setattr(session, "CLOSE_SLACK", 0.1)
    notes: list[str] = []
    t0 = time.monotonic()
    with cluster_session(lambda: FakeCluster(close_blocks=release), 1, 5, 0.2, notes, make_client=FakeClient):
        pass
    assert time.monotonic() - t0 < 3
    assert notes == ["shutdown: closing the cluster did not finish within 0.3 s (--close-timeout); its worker "
                     "processes are stopped before exit"]
    assert session.ABANDONED == ["closing the cluster"]
    session.ABANDONED.clear()


def test_wait_for_workers_polls_until_the_deadline():
    now = [0.0]
    client = FakeClient(FakeCluster(workers=0))

    def sleep(dt):
        now[0] += dt
        if now[0] >= 1.0:
            client.cluster.workers = 2

    assert wait_for_workers(client, 2, deadline=5.0, clock=lambda: now[0], sleep=sleep) == 2
    client.cluster.workers, now[0] = 0, 0.0
    with pytest.raises(NoWorker, match="0 of 1 worker"):
        wait_for_workers(client, 1, deadline=0.5, clock=lambda: now[0], sleep=lambda dt: now.__setitem__(0, now[0] + dt))


# ---- main(): the report is always written ----

def big_host(**over) -> Facts:
    base = Facts(uid=1001, gid=0, groups=[0], cgroup=CgroupMemory(2, None), host_total=128 * GiB,
                 host_available=120 * GiB, shm_bytes=GiB, memlock_soft=None, cpus=16,
                 gpu=GpuView(False, "pynvml (nvidia-ml-py) is not installed"),
                 spill_dir=SpillDir("/spill", True, True, False, 0o700, 1001, 0, "ext4", "/spill", 500 * GiB),
                 spill_config=SpillConfig(True, None, None, None, None, "/spill"))
    return replace(base, **over)


def passing_stage(client, name, xp_name, data_bytes, chunk_bytes, limits, spill_dir, tier_fn, timeout) -> Stage:
    """The workload, faked: held on three tiers, spilled, read back right."""
    assert len(client.scheduler_info()["workers"]) == 1
    return Stage(name, data_bytes, limits, tiers=[Tier("device", 7, 10**9), Tier("host", 7, 10**9),
                                                  Tier("disk", 16, 2 * 10**9)],
                 spill_files=16, spill_file_bytes=2 * 10**9, expected=10, got=10)


def smoke_main(tmp_path, monkeypatch, capsys, *flags: str, facts: Facts | None = None):
    monkeypatch.setattr(smoke, "collect", lambda spill_path=None: facts or big_host())
    spill = tmp_path / "spill"
    spill.mkdir(exist_ok=True)
    out = tmp_path / "report.json"
    code = smoke.main(["spill", "--spill-dir", str(spill), "--out", str(out), *flags])
    printed = capsys.readouterr()
    report = json.loads(out.read_text())
    assert json.loads(printed.out) == report                   # printed and written, the same
    assert list(spill.iterdir()) == []                          # its own folder is removed
    return code, report, printed.err


GPU = ["--mode", "gpu", "--device-memory-limit", "1GB", "--memory-limit", "1GB"]


def test_a_cluster_close_that_raises_still_gives_the_report(tmp_path, monkeypatch, capsys):
    clusters: list[FakeCluster] = []

    def cuda_cluster(args, device_limit, host_limit, pre_import):
        clusters.append(FakeCluster(close_error=TimeoutError(SHUTDOWN_ERROR)))
        return clusters[-1]

    monkeypatch.setattr(smoke_modes, "_cuda_cluster", cuda_cluster)
    monkeypatch.setattr(session, "_client_for", FakeClient)
    monkeypatch.setattr(smoke_modes, "_array_stage", passing_stage)
    code, report, err = smoke_main(tmp_path, monkeypatch, capsys, *GPU)
    assert code == 0 and report["verdict"] == "PASS" and report["problems"] == []
    assert report["notes"] == [f"shutdown: closing the cluster failed: TimeoutError: {SHUTDOWN_ERROR}"]
    assert clusters[0].closed == 1 and report["stages"][0]["got"] == 10
    assert f"note: shutdown: closing the cluster failed: TimeoutError: {SHUTDOWN_ERROR}" in err


def test_no_worker_fails_the_run_fast_with_a_written_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(smoke_modes, "_cuda_cluster", lambda *a: FakeCluster(workers=0))
    monkeypatch.setattr(session, "_client_for", FakeClient)
    monkeypatch.setattr(smoke_modes, "_array_stage", lambda *a: pytest.fail("no workload without a worker"))
    t0 = time.monotonic()
    code, report, _ = smoke_main(tmp_path, monkeypatch, capsys, *GPU, "--worker-timeout", "0.3")
    assert time.monotonic() - t0 < 5
    assert code == smoke.FAIL_EXIT and report["verdict"] == "FAIL"
    assert report["problems"] == ["gpu-cupy: the workload failed: NoWorker: no worker started within 0.3 s "
                                  "(--worker-timeout): 0 of 1 worker(s) joined the scheduler"]
    assert report["stages"][0]["name"] == "gpu-cupy" and report["stages"][0]["data_bytes"] == 4 * 10**9


def test_the_worker_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(smoke.WORKER_TIMEOUT_ENV, "7.5")
    assert smoke._parser().parse_args(["spill"]).worker_timeout == 7.5
    monkeypatch.delenv(smoke.WORKER_TIMEOUT_ENV)
    assert smoke._parser().parse_args(["spill"]).worker_timeout == session.DEFAULT_WORKER_TIMEOUT


def test_a_mode_that_crashes_still_gives_the_report(tmp_path, monkeypatch, capsys):
    def crash(args, limits, notes):
        raise RuntimeError("CUDA driver went away")

    monkeypatch.setitem(smoke_modes.MODES, "cpu", crash)
    code, report, err = smoke_main(tmp_path, monkeypatch, capsys, "--memory-limit", "1GB")
    assert code == smoke.FAIL_EXIT and report["stages"] == []
    assert report["problems"] == ["the smoke itself failed: RuntimeError: CUDA driver went away"]
    assert "Traceback" in err


def no_run(args, limits, notes):
    pytest.fail("nothing may start with a memory limit above the container's budget")


@pytest.mark.parametrize("mode", [["--mode", "cpu"], ["--mode", "gpu", "--device-memory-limit", "1GB"]])
def test_a_memory_limit_above_a_1gib_cap_is_refused_before_starting(tmp_path, monkeypatch, capsys, mode):
    monkeypatch.setitem(smoke_modes.MODES, mode[1], no_run)
    capped = big_host(cgroup=CgroupMemory(1, GiB, None, GiB), host_total=24 * GiB)
    code, report, err = smoke_main(tmp_path, monkeypatch, capsys, *mode, "--memory-limit", "2GB", facts=capped)
    assert code == smoke.FAIL_EXIT and report["verdict"] == "FAIL" and report["stages"] == []
    (problem,) = report["problems"]
    assert problem.startswith("refused before starting: worker memory limit above the container's memory budget: "
                              "--memory-limit 2000000000 B (1.86 GiB) > 1073741824 B (1.00 GiB, cgroup v1 limit)")
    assert "FAIL: refused before starting" in err


def test_cpu_workers_share_the_budget(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(smoke_modes.MODES, "cpu", no_run)
    capped = big_host(cgroup=CgroupMemory(1, GiB, None, GiB), host_total=24 * GiB)
    _, report, _ = smoke_main(tmp_path, monkeypatch, capsys, "--workers", "2", "--memory-limit", "600MB", facts=capped)
    assert "x 2 workers = 1200000000 B" in report["problems"][0]


# ---- exit never hangs ----

EXIT_SCRIPT = textwrap.dedent("""
    import multiprocessing, sys, threading, time
    sys.path.insert(0, {src!r})
    from rapidship.runtime import session, smoke, smoke_modes

    class Cluster:
        def close(self, timeout=None):
            pass

    class Client:
        def __init__(self, cluster, timeout=None):
            pass
        def scheduler_info(self):
            return {{"workers": {{}}}}
        def close(self, timeout=None):
            pass

    def cuda_cluster(args, device_limit, host_limit, pre_import):
        # what a cluster whose worker never joins leaves behind: a thread and a process nobody ends
        threading.Thread(target=threading.Event().wait, name="stuck", daemon=False).start()
        multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,), daemon=False).start()
        return Cluster()

    smoke_modes._cuda_cluster = cuda_cluster
    session._client_for = Client
    if __name__ == "__main__":
        smoke.run(sys.argv[1:])
""")


def test_exit_does_not_hang_on_what_a_failed_cluster_left(tmp_path):
    script = tmp_path / "stuck.py"
    script.write_text(EXIT_SCRIPT.format(src=str(SRC)))
    (tmp_path / "spill").mkdir()
    out = tmp_path / "report.json"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(script), "spill", *GPU, "--spill-dir", str(tmp_path / "spill"),
                           "--out", str(out), "--worker-timeout", "0.5", "--close-timeout", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert time.monotonic() - t0 < 30, proc.stderr
    assert proc.returncode == smoke.FAIL_EXIT, proc.stderr
    report = json.loads(out.read_text())
    assert "no worker started within 0.5 s" in report["problems"][0]
    assert any(n.startswith("shutdown: stopped 1 worker process(es) left running") for n in report["notes"])
    assert "forcing it" in proc.stderr            # the non-daemon thread would have held exit forever


# ---- doctor round 2: refused before anything starts ------------------------------------------------

def _never(*_a, **_k):
    pytest.fail("nothing may start for a run that is refused")


@pytest.mark.parametrize("facts, flags, words", [
    (big_host(spill_dir=SpillDir("/spill", True, True, False, 0o700, 1001, 0, "tmpfs", "/spill", 500 * GiB)),
     ["--mode", "cpu", "--memory-limit", "1GB"], "is on tmpfs"),
    (big_host(spill_dir=SpillDir("/spill", True, True, False, 0o700, 1001, 0, "ext4", "/spill", 2**20)),
     ["--mode", "cpu", "--memory-limit", "1GB"], "ENOSPC"),
    (big_host(gpu=GpuView(True, "", "580", "13.0", [Gpu(0, "H200", 140 * GiB, 139 * GiB, cc_major=9, cc_minor=0)])),
     ["--mode", "gpu", "--device-memory-limit", "400GB", "--memory-limit", "1GB"], "above what GPU 0 H200 has"),
])
def test_a_run_that_would_prove_nothing_is_refused_before_it_starts(tmp_path, monkeypatch, capsys, facts, flags,
                                                                     words):
    monkeypatch.setattr(smoke_modes, "_cuda_cluster", _never)
    monkeypatch.setattr(smoke_modes, "_local_cluster", _never)
    code, report, _ = smoke_main(tmp_path, monkeypatch, capsys, *flags, facts=facts)
    assert code == smoke.FAIL_EXIT and report["verdict"] == "FAIL" and not report["stages"]
    assert any(words in p and p.startswith("refused before starting") for p in report["problems"]), report["problems"]


def test_jit_unspill_is_refused_with_its_reason(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DASK_JIT_UNSPILL", "True")
    monkeypatch.setattr(smoke_modes, "_cuda_cluster", _never)
    code, report, _ = smoke_main(tmp_path, monkeypatch, capsys, *GPU)
    assert code == smoke.FAIL_EXIT and any("JIT-unspill" in p for p in report["problems"])


def test_a_spill_dir_that_fills_up_fails_the_wait_at_once(tmp_path, monkeypatch):
    """dask keeps data in memory on ENOSPC and pauses: the wait used to hang until its timeout."""
    class Client:
        def __init__(self, workers):
            self.workers = workers

        def scheduler_info(self):
            return {"workers": dict.fromkeys(self.workers)}

    watch = session.watcher(Client(["w1"]), {"w1"}, str(tmp_path))
    watch()  # room enough: nothing
    monkeypatch.setattr(session, "spill_room", lambda path: 1024)
    with pytest.raises(session.SpillDiskFull, match=r"is full \(1,024 bytes free\)"):
        watch()
    with pytest.raises(session.WorkerDied, match="w1 died"):
        session.watcher(Client([]), {"w1"}, str(tmp_path))()
    assert session.describe(session.SpillDiskFull("x"), 1).startswith("ENOSPC")
