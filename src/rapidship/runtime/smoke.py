"""rapids-smoke spill: prove that data larger than the limits leaves memory instead of killing us.

Modes
  cpu   a distributed LocalCluster worker under the container's memory cap holds a dataset larger
        than the cap: it must spill host -> disk, read it back and give the right sum.
  gpu   a dask-cuda LocalCUDACluster worker with device and host limits holds a CuPy dataset of at
        least 2 x (device limit + host limit): device -> host -> disk, right sum.
  cudf  cuDF's own spilling under an RMM limit (with its spill statistics), then dask-cudf
        partitions through LocalCUDACluster; workers must pre-import dask_cudf (RAPIDS_PRE_IMPORT
        or --pre-import), or cuDF frames have no sizeof and never leave the device.

The report (JSON on stdout; logs on stderr) gives bytes per tier, spill files and bytes, peak
memory, durations, the result check and a verdict. Data that exceeded the limits but never left
the device / memory tier is a FAILURE, however "successful" the job looked.

The result check is exact at any size: each chunk (array chunk, dataframe partition, cuDF frame)
is summed where it lives and the chunk sums are added as Python ints (see `exact_chunk_len`).
Every cluster is bounded at both ends: no worker within --worker-timeout seconds fails the stage
at once; closing is bounded by --close-timeout and what goes wrong there is a note in the report,
which is always written. Leftover worker processes are stopped and exit never waits on them.

Standard library at import time; dask, numpy, cupy and cudf are imported by the mode that needs them.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import doctor

FAIL_EXIT = 1
MiB = 2**20
INT64_MAX = 2**63 - 1

WORKER_TIMEOUT_ENV = "RAPIDS_SMOKE_WORKER_TIMEOUT"
DEFAULT_WORKER_TIMEOUT = 60.0     # seconds a cluster may take to have its workers (CUDA context, imports)
DEFAULT_CLOSE_TIMEOUT = 15.0      # seconds closing the client, and then the cluster, may take each
# seconds the workers may take to free what they held before the close: a 20 GB GPU run (14 GB on disk)
# took 23 and 25 s on the H200, during which a worker answers nothing
DEFAULT_DRAIN_TIMEOUT = 60.0
CLOSE_SLACK = 5.0                 # on top of the timeout handed to close(): its own last kill and join


# ---- records and the pure verdict ----

@dataclass
class Tier:
    name: str           # device, host (memory), disk
    keys: int
    bytes: int


@dataclass
class Stage:
    """One workload: what it held, where it ended up, and whether the answer was right."""

    name: str
    data_bytes: int
    limits: dict                    # tier name -> bytes it may hold
    tiers: list[Tier] = field(default_factory=list)
    spill_files: int = 0
    spill_file_bytes: int = 0
    result_ok: bool = False
    expected: int | None = None
    got: int | None = None
    seconds: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    error: str | None = None
    spill_tier: str = "disk"        # the tier data must reach: disk, or host for cuDF's own spilling
    expect_spill: bool = True       # False for a negative probe that documents no-spill behaviour
    problems: list[str] = field(default_factory=list)


def judge(stage: Stage) -> list[str]:
    """Pure: why this stage fails (empty = pass).

    The dataset must exceed what the in-memory tiers may hold (else the test proves nothing),
    data must have reached the stage's spill tier (disk: files really written under the spill
    dir; cuDF's own spilling has no disk tier and must reach host memory), and the answer read
    back must be right.
    """
    problems = []
    if stage.error:
        return [f"{stage.name}: the workload failed: {stage.error}"]
    in_memory = sum(v for k, v in stage.limits.items() if k != stage.spill_tier)
    if stage.data_bytes <= in_memory:
        problems.append(f"{stage.name}: dataset {stage.data_bytes} B fits the limits ({in_memory} B): "
                        "it proves nothing; make it larger")
    tiers = {t.name: t for t in stage.tiers}
    reached = tiers.get(stage.spill_tier)
    files_ok = stage.spill_tier != "disk" or (stage.spill_files > 0 and stage.spill_file_bytes > 0)
    if not reached or reached.keys == 0 or reached.bytes == 0 or not files_ok:
        held = max(stage.tiers, key=lambda t: t.bytes).name if stage.tiers else "first"
        problems.append(f"{stage.name}: NO SPILL: {stage.data_bytes} B exceeded the limits ({in_memory} B) but "
                        f"nothing reached the {stage.spill_tier} tier ({stage.spill_files} spill files, "
                        f"{stage.spill_file_bytes} B); the data stayed in the {held} tier")
    stage.result_ok = stage.expected is not None and stage.got == stage.expected
    if not stage.result_ok:
        problems.append(f"{stage.name}: WRONG RESULT: expected {stage.expected}, got {stage.got}")
    return problems


def verdict(stages: list[Stage]) -> tuple[str, list[str]]:
    problems: list[str] = []
    for s in stages:
        s.problems = judge(s)
        if s.expect_spill:
            problems += s.problems
    return ("PASS" if stages and not problems else "FAIL"), problems or ([] if stages else ["no workload ran"])


dir_usage = doctor.dir_usage    # views: spill files under a directory (the metrics count the same)
parse_bytes = doctor.parse_bytes   # the runtime's one size syntax (k/m/g binary, kb/mb/gb decimal)


def _log(msg: str) -> None:
    print(f"rapids-smoke: {msg}", file=sys.stderr, flush=True)


# ---- the exact result check (pure) ----
#
# The data are the integers 0 .. n-1 (int64) and the check is their sum, n(n-1)/2. One int64 sum
# over all of them overflows once n(n-1)/2 > 2**63 - 1, that is above n = 4.29e9 values (34 GB of
# data), and then reads as WRONG RESULT though the data came back intact. So no int64 sum ever
# spans more than one chunk: each chunk (array chunk, dataframe partition, cuDF frame) is summed
# where it lives and the chunk sums are added as Python ints, which do not overflow. A chunk holds
# at most INT64_MAX // (n - 1) values (`exact_chunk_len`); all values are >= 0 and below n, so the
# chunk's sum, and every partial sum inside whatever reduction order the library picks, stays at
# or below INT64_MAX. The expected value is the closed form, in Python ints. Exact at any size.

def arange_sum(start: int, stop: int) -> int:
    """Pure: the exact sum of start .. stop-1."""
    n = stop - start
    return (start + stop - 1) * n // 2 if n > 0 else 0


def exact_chunk_len(total: int, want: int) -> int:
    """Pure: the longest chunk (at most `want` values) of 0 .. total-1 whose int64 sum cannot overflow."""
    return max(1, min(want, INT64_MAX // (total - 1))) if total > 1 else max(1, want)


def exact_partition_rows(parts: int, want: int) -> int:
    """Pure: rows per partition (at most `want`) so that `parts` partitions of 0 .. parts*rows-1 each sum exactly."""
    # rows * (parts * rows - 1) < parts * rows**2 <= INT64_MAX
    return max(1, min(want, math.isqrt(INT64_MAX // max(1, parts))))


def chunk_bounds(total: int, chunk_len: int) -> list[tuple[int, int]]:
    """Pure: [start, stop) of each chunk of 0 .. total-1."""
    return [(start, min(start + chunk_len, total)) for start in range(0, total, chunk_len)]


def combine(chunk_sums) -> int:
    """Pure: the total of per-chunk sums, as a Python int (numpy / CuPy scalars are converted first)."""
    return sum(int(v) for v in chunk_sums)


# ---- workloads (run inside worker processes: module-level, picklable) ----

def _int_chunk(chunk_elems: int, total: int, xp_name: str, block_info=None):
    """One chunk of arange(total) made where it lives (never shipped from the client)."""
    import importlib

    xp = importlib.import_module(xp_name)
    start = block_info[None]["array-location"][0][0]
    stop = min(start + chunk_elems, total)
    return xp.arange(start, stop, dtype="int64")


def _piece_sum(piece, column: str | None = None) -> int:
    """On the worker: one chunk's (or one partition column's) sum as a Python int. The library sums
    in int64; exact because a piece is at most `exact_chunk_len` values long."""
    data = piece if column is None else piece[column]
    return int(data.sum())


def _cudf_part(i: int, rows: int):
    import cudf
    import cupy

    a = cupy.arange(i * rows, (i + 1) * rows, dtype="int64")
    return cudf.DataFrame({"a": a, "b": a % 7})


def peak_rss() -> int:
    """This process's own high-water RSS (VmHWM). getrusage's ru_maxrss survives fork and exec,
    so a spawned worker would report its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _host_tiers(dask_worker) -> dict:
    """Inside a distributed worker: keys and bytes in memory and on disk (SpillBuffer)."""
    from dask.sizeof import sizeof

    data = dask_worker.data
    fast = getattr(data, "fast", data)
    out = {"memory": [len(fast), int(sum(sizeof(v) for v in fast.values()))], "disk": [0, 0],
           "rss_peak": peak_rss()}
    if hasattr(data, "spilled_total"):
        out["disk"] = [len(data.slow), int(data.spilled_total.disk)]
    return out


def _device_tiers(dask_worker) -> dict:
    """Inside a dask-cuda worker: keys and bytes on device, host and disk (DeviceHostFile)."""
    from dask.sizeof import sizeof

    data = dask_worker.data
    device = getattr(data, "device", {}) or {}
    host = getattr(data, "host", {}) or {}
    disk = getattr(data, "disk", None) or {}
    disk_bytes = dir_usage(data.disk_func_path, only_storage=False)[1] if getattr(data, "disk_func_path", "") else 0
    return {"device": [len(device), int(sum(sizeof(v) for v in device.values()))],
            "host": [len(host), int(sum(sizeof(v) for v in host.values()))],
            "disk": [len(disk), int(disk_bytes)],
            "data_class": type(data).__name__,
            "rss_peak": peak_rss()}


def _has_dask_cudf(dask_worker=None) -> bool:
    return "dask_cudf" in sys.modules


# ---- modes ----

def _sum_pieces(client, pieces, timeout: float, column: str | None = None) -> list[int]:
    """Read every piece back: one task per chunk or partition, each returning its sum as a Python int."""
    import dask
    from distributed import wait

    futures = client.compute([dask.delayed(_piece_sum)(piece, column) for piece in pieces])
    wait(futures, timeout=timeout)
    return [f.result() for f in futures]


def _array_stage(client, name: str, xp_name: str, data_bytes: int, chunk_bytes: int, limits: dict,
                 spill_dir: str, tier_fn, timeout: float) -> Stage:
    import dask.array as da

    total = data_bytes // 8
    chunk_elems = exact_chunk_len(total, max(1, chunk_bytes // 8))
    chunks = tuple(stop - start for start, stop in chunk_bounds(total, chunk_elems))
    stage = Stage(name, total * 8, limits, expected=arange_sum(0, total))
    meta = __import__(xp_name).empty((0,), dtype="int64")
    x = da.map_blocks(_int_chunk, chunk_elems, total, xp_name, chunks=(chunks,), dtype="int64", meta=meta)
    t0 = time.monotonic()
    try:
        x = x.persist()
        _held(x, timeout, spill_dir)
        stage.seconds["persist"] = round(time.monotonic() - t0, 2)
        _observe(client, stage, spill_dir, tier_fn)
        t1 = time.monotonic()
        stage.got = combine(_sum_pieces(client, x.to_delayed().ravel().tolist(), timeout))
        stage.seconds["read_back"] = round(time.monotonic() - t1, 2)
        stage.result_ok = stage.got == stage.expected
    except Exception as err:  # noqa: BLE001 - reported in the JSON, judged as a failure
        stage.error = _describe(err, timeout)
    stage.seconds["total"] = round(time.monotonic() - t0, 2)
    del x
    return stage


class WorkerDied(RuntimeError):
    pass


class NoWorker(RuntimeError):
    """No worker joined the cluster within --worker-timeout."""


class Unfinished(RuntimeError):
    """A bounded call was still running at its deadline; it is left to a daemon thread."""


# What was left running in a daemon thread (a start or close that did not return in time):
# then exit must not wait for the interpreter's shutdown, which could wait on it forever.
_ABANDONED: list[str] = []


def bounded(fn, timeout: float, what: str, on_late=None):
    """fn() in a daemon thread, waited for at most `timeout` seconds: its value, or its exception
    re-raised, or Unfinished. A value that arrives after the deadline goes to on_late (to close it)."""
    box: dict = {}
    lock = threading.Lock()

    def target():
        try:
            value = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            with lock:
                box["error"] = err
            return
        with lock:
            late = box.get("late", False)
            box["value"] = value
        if late and on_late is not None:
            try:
                on_late(value)
            except Exception:  # noqa: BLE001 - nobody is waiting any more
                pass

    thread = threading.Thread(target=target, name=f"rapids-smoke: {what}", daemon=True)
    thread.start()
    thread.join(timeout)
    with lock:
        done = "value" in box or "error" in box
        if not done:
            box["late"] = True
    if not done:
        _ABANDONED.append(what)
        raise Unfinished(f"{what} did not finish within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def wait_for_workers(client, n_workers: int, deadline: float, clock=time.monotonic, sleep=time.sleep) -> int:
    """Poll the scheduler until n_workers have joined; NoWorker at the deadline."""
    while True:
        have = len(client.scheduler_info()["workers"])
        if have >= n_workers:
            return have
        if clock() >= deadline:
            raise NoWorker(f"{have} of {n_workers} worker(s) joined the scheduler")
        sleep(0.2)


def _client_for(cluster, timeout: float):
    from distributed import Client

    return Client(cluster, timeout=timeout)


def _close_quietly(obj, timeout: float) -> None:
    try:
        obj.close(timeout=timeout)
    except Exception:  # noqa: BLE001 - a late cluster nobody waits for
        pass


def _held_keys(dask_worker) -> int:
    return len(dask_worker.data)


def drain(client, timeout: float, poll: float = 0.2) -> tuple[int, float]:
    """Wait, bounded, until no worker holds data any more: (keys still held, seconds waited).

    The stages released their collections; the workers then free device memory and delete spill
    files while they are alive. Closing before that is done made the nanny kill a worker still
    busy tearing down gigabytes ("Worker process still alive after 4.0 seconds") and every GPU run
    ended with "closing the cluster failed: TimeoutError"."""
    import gc

    gc.collect()  # a released collection caught in a reference cycle keeps its futures until the GC runs
    t0 = time.monotonic()
    held, said = -1, 0.0
    while time.monotonic() - t0 < timeout:
        asked = time.monotonic()
        try:
            held = sum(client.run(_held_keys).values())
        except Exception:  # noqa: BLE001 - a worker already gone: nothing more to wait for here
            return 0, time.monotonic() - t0
        if held == 0:
            break
        if time.monotonic() - said >= 5:   # progress: how many keys are left, and how slow the workers answer
            said = time.monotonic()
            _log(f"shutdown: {held} key(s) still held after {said - t0:.1f} s (the workers answered in "
                 f"{said - asked:.1f} s)")
        time.sleep(poll)
    return held, time.monotonic() - t0


def shutdown(client, cluster, timeout: float, notes: list[str], drain_timeout: float | None = None) -> None:
    """Let the workers drop their data (at most drain_timeout), then close the client, then the
    cluster, each bounded by timeout; what goes wrong is a note, never an exception."""
    drain_timeout = timeout if drain_timeout is None else drain_timeout
    if client is not None:
        try:
            held, waited = bounded(lambda: drain(client, drain_timeout), drain_timeout + CLOSE_SLACK,
                                   "draining the workers")
            _log(f"shutdown: workers drained in {waited:.1f} s" + (f", {held} key(s) still held" if held else ""))
            if held:
                notes.append(f"shutdown: {held} key(s) still held after {waited:.1f} s of draining (--drain-timeout "
                             f"{drain_timeout:g}): the workers were closed with data on them")
        except Exception as err:  # noqa: BLE001
            _log(f"shutdown: draining the workers failed: {type(err).__name__}: {err}")
    for what, obj in (("client", client), ("cluster", cluster)):
        if obj is None:
            continue
        try:
            bounded(lambda obj=obj: obj.close(timeout=timeout), timeout + CLOSE_SLACK, f"closing the {what}")
        except Unfinished:
            notes.append(f"shutdown: closing the {what} did not finish within {timeout + CLOSE_SLACK:g} s "
                         "(--close-timeout); its worker processes are stopped before exit")
        except Exception as err:  # noqa: BLE001
            notes.append(f"shutdown: closing the {what} failed: {type(err).__name__}: {err}")


@contextmanager
def cluster_session(make_cluster, n_workers: int, worker_timeout: float, close_timeout: float, notes: list[str],
                    make_client=None, drain_timeout: float | None = None):
    """A cluster and a client with n_workers joined, within worker_timeout seconds all told, else
    NoWorker; closed (bounded, problems as notes) however the body ends. Yields the client."""
    make_client = make_client or _client_for
    deadline = time.monotonic() + worker_timeout
    try:
        cluster = bounded(make_cluster, worker_timeout, "starting the cluster",
                          on_late=lambda c: _close_quietly(c, close_timeout))
    except Unfinished:
        raise NoWorker(f"no worker started within {worker_timeout:g} s (--worker-timeout): the cluster was still "
                       "starting its worker (stuck creating a CUDA context, importing a module, or killed and "
                       "restarted?)") from None
    client = None
    try:
        try:
            client = bounded(lambda: make_client(cluster, worker_timeout), worker_timeout, "connecting the client")
        except Unfinished:
            raise NoWorker(f"the client did not connect to the scheduler within {worker_timeout:g} s") from None
        try:
            wait_for_workers(client, n_workers, deadline)
        except NoWorker as err:
            raise NoWorker(f"no worker started within {worker_timeout:g} s (--worker-timeout): {err}") from None
        yield client
    finally:
        shutdown(client, cluster, close_timeout, notes, drain_timeout)


class SpillDiskFull(RuntimeError):
    """The spill directory ran out of room (ENOSPC): dask keeps the data in memory and pauses."""


FULL_BELOW = 16 * 2**20  # free bytes in the spill dir below which a spill cannot go on


def spill_room(path: str | None) -> int | None:
    try:
        vfs = os.statvfs(path) if path else None
    except OSError:
        return None
    return vfs.f_bavail * vfs.f_frsize if vfs else None


def _held(collection, timeout: float, spill_dir: str | None = None) -> None:
    """Wait until every piece is held. A worker that dies meanwhile (its nanny restarts it and the
    lost pieces are recomputed, possibly forever), no worker at all, a piece that erred, or a spill
    dir that filled up (dask then keeps the data in memory and pauses: a hang until the timeout)
    fails the wait at once."""
    from distributed import futures_of, get_client, wait

    client = get_client()
    workers = set(client.scheduler_info()["workers"])
    if not workers:
        raise NoWorker("no worker is connected to the scheduler: nothing can hold the data")
    futures = futures_of(collection)
    if not futures:                      # nothing to watch: a plain wait with the deadline
        wait(collection, timeout=timeout)
        return

    wait_held(futures, timeout, watcher(client, workers, spill_dir))


def watcher(client, workers: set, spill_dir: str | None):
    """What the wait checks once a second: every worker still there, room left in the spill dir."""
    def check() -> None:
        gone = workers - set(client.scheduler_info()["workers"])
        if gone:
            raise WorkerDied(f"worker {sorted(gone)[0]} died while holding data (OOM-killed?) and was restarted")
        room = spill_room(spill_dir)
        if room is not None and room < FULL_BELOW:
            raise SpillDiskFull(f"the spill dir {spill_dir} is full ({room:,} bytes free): spilling fails with "
                                "ENOSPC and the workers keep the data in memory; give the spill mount more room")
    return check


def wait_held(futures, timeout: float, each_second=lambda: None, late: str = "") -> None:
    """Wait until every future finished, looking once a second: an erred future raises its error
    at once, `each_second()` may raise (a worker gone) or watch, and past `timeout` TimeoutError(late)."""
    from distributed import wait

    deadline = time.monotonic() + timeout
    while True:
        try:
            wait(futures, timeout=1)
            break
        except TimeoutError:
            pass
        erred = [f for f in futures if f.status == "error"]
        if erred:
            erred[0].result()
        each_second()
        if time.monotonic() > deadline:
            raise TimeoutError(late)
    for future in futures:
        if future.status != "finished":
            future.result(timeout=timeout)


def _describe(err: BaseException, timeout: float) -> str:
    name = type(err).__name__
    if isinstance(err, NoWorker):
        return f"NoWorker: {err}"
    if isinstance(err, SpillDiskFull):
        return f"ENOSPC: {err}"
    if name in ("KilledWorker", "WorkerDied"):
        return f"KilledWorker: a worker died holding the data (OOM-killed?): {err}"
    if isinstance(err, TimeoutError) or "Timeout" in name:
        return f"timed out after {timeout:.0f} s (workers paused or killed and restarted?)"
    return f"{name}: {err}"


# Any worker death fails the run at once instead of being retried into a hang.
STRICT = {"distributed.scheduler.allowed-failures": 0}


def _observe(client, stage: Stage, spill_dir: str, tier_fn, settle: float = 5.0) -> None:
    """Snapshot tiers and spill files while the data is held (files vanish when workers close).
    A worker's memory monitor may still be spilling after the data is held: the files are counted
    before and after the tiers are read, until both counts agree (at most `settle` seconds), so the
    files and the tiers describe one moment."""
    deadline = time.monotonic() + settle
    while True:
        before = dir_usage(spill_dir)
        per_worker = client.run(tier_fn)
        after = dir_usage(spill_dir)
        if before == after or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    sums: dict[str, list[int]] = {}
    peaks = []
    for info in per_worker.values():
        for tier in ("device", "memory", "host", "disk"):
            if tier in info:
                k, b = sums.setdefault(tier, [0, 0]), info[tier]
                k[0] += b[0]
                k[1] += b[1]
        peaks.append(info["rss_peak"])
        if "data_class" in info:
            stage.extra["worker_data"] = info["data_class"]
    stage.tiers = [Tier(n, k, b) for n, (k, b) in sums.items()]
    stage.spill_files, stage.spill_file_bytes = after
    stage.extra["workers"] = len(per_worker)
    stage.extra["worker_rss_peak"] = max(peaks) if peaks else None


def _in_cluster(args, notes: list[str], make_cluster, n_workers: int, failed: Stage, work) -> Stage:
    """work(client) -> Stage inside a bounded cluster session; `failed`, with the reason, when the
    cluster never had its workers."""
    try:
        with cluster_session(make_cluster, n_workers, args.worker_timeout, args.close_timeout, notes,
                             drain_timeout=getattr(args, "drain_timeout", DEFAULT_DRAIN_TIMEOUT)) as client:
            return work(client)
    except Exception as err:  # noqa: BLE001 - the stage says why
        failed.error = _describe(err, args.timeout)
        return failed


def _local_cluster(args, worker_limit: int):
    from distributed import LocalCluster

    return LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, memory_limit=worker_limit,
                        local_directory=args.spill_dir, dashboard_address=None)


def run_cpu(args, limits, notes: list[str]) -> list[Stage]:
    import dask

    worker_limit = limits["worker"]
    data = args.data_bytes or 2 * (limits["container"] or worker_limit)
    memory = {"memory": worker_limit * args.workers}
    _log(f"cpu: LocalCluster({args.workers} worker(s), memory_limit={worker_limit}), dataset {data} B, "
         f"spill dir {args.spill_dir}")

    def work(client) -> Stage:
        before = set(client.scheduler_info()["workers"])
        stage = _array_stage(client, "cpu-array", "numpy", data, args.chunk_bytes or 32 * MiB, memory,
                             args.spill_dir, _host_tiers, args.timeout)
        after = set(client.scheduler_info()["workers"])
        if before != after:
            stage.error = stage.error or f"a worker was restarted (killed?): {sorted(before ^ after)}"
        return stage

    # Spilled bytes are the bytes written: no compression, so the disk tier reads true.
    with dask.config.set({"distributed.worker.memory.spill-compression": False,
                          "distributed.comm.compression": False, **STRICT}):
        return [_in_cluster(args, notes, lambda: _local_cluster(args, worker_limit), args.workers,
                            Stage("cpu-array", data // 8 * 8, memory), work)]


def _cuda_cluster(args, device_limit: int, host_limit: int, pre_import: list[str]):
    import dask
    from dask_cuda import LocalCUDACluster

    # dask-cuda's DeviceHostFile does the spilling; distributed's RSS monitor would pause or
    # kill the worker on the CUDA context's host memory instead.
    cfg = {f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause", "terminate")}
    cfg["distributed.comm.compression"] = False
    cfg.update(STRICT)
    with dask.config.set(cfg):
        return LocalCUDACluster(n_workers=1, device_memory_limit=device_limit, memory_limit=host_limit,
                                local_directory=args.spill_dir, dashboard_address=None,
                                pre_import=pre_import or None, threads_per_worker=1)


def run_gpu(args, limits, notes: list[str]) -> list[Stage]:
    dev, host = limits["device"], limits["host"]
    data = args.data_bytes or 2 * (dev + host)
    tiers = {"device": dev, "host": host}
    _log(f"gpu: LocalCUDACluster(device_memory_limit={dev}, memory_limit={host}), CuPy dataset {data} B")

    def work(client) -> Stage:
        return _array_stage(client, "gpu-cupy", "cupy", data, args.chunk_bytes or 128 * MiB, tiers,
                            args.spill_dir, _device_tiers, args.timeout)

    return [_in_cluster(args, notes, lambda: _cuda_cluster(args, dev, host, args.pre_import), 1,
                        Stage("gpu-cupy", data // 8 * 8, tiers), work)]


def run_cudf(args, limits, notes: list[str]) -> list[Stage]:
    return [cudf_own_spilling(args, limits), dask_cudf_stage(args, limits, notes)]


def cudf_own_spilling(args, limits) -> Stage:
    """cuDF's spill manager under an RMM limit: frames beyond it move to host, stats say how much."""
    os.environ["CUDF_SPILL"] = "on"
    os.environ["CUDF_SPILL_STATS"] = "1"
    limit = limits["device"]
    frames, frame_bytes = 12, 256 * MiB
    stage = Stage("cudf-spill", frames * frame_bytes, {"device": limit}, spill_tier="host")
    t0 = time.monotonic()
    try:
        import rmm

        # the limited resource is in place before cuDF starts its spill manager, which wraps it
        stats = rmm.mr.StatisticsResourceAdaptor(rmm.mr.LimitingResourceAdaptor(rmm.mr.CudaAsyncMemoryResource(), limit))
        rmm.mr.set_current_device_resource(stats)
        import cudf
        import cupy
        from cudf.core.buffer.spill_manager import get_global_manager

        rows = exact_partition_rows(frames, frame_bytes // 8)    # the whole frame (3.2e8 values): no cut
        from rmm.allocators.cupy import rmm_cupy_allocator

        cupy.cuda.set_allocator(rmm_cupy_allocator)   # CuPy's temporaries count against the limit too
        # deep copies: cuDF owns (and may spill) its buffers; wrapped CuPy memory would be pinned in place
        held = [cudf.DataFrame({"a": cupy.arange(i * rows, (i + 1) * rows, dtype="int64")}).copy(deep=True)
                for i in range(frames)]
        stage.seconds["persist"] = round(time.monotonic() - t0, 2)
        total = frames * rows
        stage.expected = arange_sum(0, total)
        stage.got = combine(_piece_sum(f, "a") for f in held)     # one int64 sum per frame, added as Python ints
        stage.result_ok = stage.got == stage.expected
        totals = {f"{src}->{dst}": nbytes for (src, dst), (nbytes, _) in
                  get_global_manager().statistics.spill_totals.items()}
        counts = stats.allocation_counts
        stage.extra = {"spill_totals": totals, "rmm_peak_bytes": int(counts.peak_bytes),
                       "rmm_limit": limit, "note": "cuDF spills device -> host memory only; no disk tier"}
        out = totals.get("gpu->cpu", 0)
        # cuDF reports bytes moved, not keys: keys say only whether anything moved
        stage.tiers = [Tier("device", frames, int(counts.peak_bytes)), Tier("host", 1 if out else 0, out)]
        del held
        rmm.mr.set_current_device_resource(rmm.mr.CudaMemoryResource())
    except Exception as err:  # noqa: BLE001
        stage.error = f"{type(err).__name__}: {err}"
    finally:
        os.environ.pop("CUDF_SPILL", None)      # the dask-cudf workers use dask-cuda's spilling
        os.environ.pop("CUDF_SPILL_STATS", None)
    stage.seconds["total"] = round(time.monotonic() - t0, 2)
    return stage


def dask_cudf_stage(args, limits, notes: list[str]) -> Stage:
    dev, host = limits["device"], limits["host"]
    parts, part_bytes = args.partitions, 128 * MiB
    rows = exact_partition_rows(parts, part_bytes // 16)     # two int64 columns
    stage = Stage("dask-cudf", parts * rows * 16, {"device": dev, "host": host})
    stage.extra["pre_import"] = args.pre_import
    total = parts * rows
    stage.expected = arange_sum(0, total)
    _log(f"cudf: LocalCUDACluster(device_memory_limit={dev}, memory_limit={host}, pre_import={args.pre_import}), "
         f"{parts} partitions of {rows * 16} B")
    t0 = time.monotonic()

    def work(client) -> Stage:
        import dask.dataframe as dd

        try:
            stage.extra["workers_have_dask_cudf"] = all(client.run(_has_dask_cudf).values())
            import cudf
            import cupy
            import dask_cudf  # noqa: F401 - the client's own dispatch for cuDF-backed collections

            meta = cudf.DataFrame({"a": cupy.empty(0, "int64"), "b": cupy.empty(0, "int64")})
            ddf = dd.from_map(_cudf_part, list(range(parts)), rows=rows, meta=meta).persist()
            _held(ddf, args.timeout, args.spill_dir)
            stage.seconds["persist"] = round(time.monotonic() - t0, 2)
            _observe(client, stage, args.spill_dir, _device_tiers)
            t1 = time.monotonic()
            stage.got = combine(_sum_pieces(client, ddf.to_delayed(), args.timeout, column="a"))
            stage.seconds["read_back"] = round(time.monotonic() - t1, 2)
            stage.result_ok = stage.got == stage.expected
            del ddf
        except Exception as err:  # noqa: BLE001
            stage.error = _describe(err, args.timeout)
        return stage

    _in_cluster(args, notes, lambda: _cuda_cluster(args, dev, host, args.pre_import), 1, stage, work)
    stage.seconds["total"] = round(time.monotonic() - t0, 2)
    return stage


MODES = {"cpu": run_cpu, "gpu": run_gpu, "cudf": run_cudf}


def plan_limits(report: dict, args) -> dict:
    """Pure: the limits a run uses: flags first, then the doctor's derived settings."""
    d = report["derived"]
    cg = report["facts"]["cgroup"]
    return {"container": cg["limit"] or d["memory_budget"],
            "worker": args.memory_limit or d["worker_memory_limit"],
            "host": args.memory_limit or d["worker_memory_limit"],
            "device": args.device_memory_limit or d["device_memory_limit"]}


def smoke_intent(args) -> doctor.Intent:
    """What this run asks of the container: disk spill, and --memory-limit for each of its workers
    (cpu: --workers of them; gpu and cudf: one LocalCUDACluster worker)."""
    return doctor.Intent(["rapids-smoke", "spill", "--mode", args.mode], "rapids-smoke", "required",
                         "rapids-smoke spill writes to disk", args.memory_limit,
                         max(1, args.workers) if args.mode == "cpu" else 1, "--memory-limit",
                         spill_dir=args.spill_dir, device_limit=args.device_memory_limit,
                         device_source="rapids-smoke --device-memory-limit")


# FATALs that make a run prove nothing or never end; the others (no spill dir, spilling off) it runs
# into and reports as the failure they are (the negative runs of docs/spill.md)
REFUSED_TOPICS = ("memory-limit", "device-limit", "spill-disk", "spill-threshold")


def plan_problems(report: dict, args, limits: dict) -> list[str]:
    """Pure: why this run cannot start (empty = it can)."""
    # what would make the run prove nothing or never end: a limit above the cap or the GPU, a spill
    # "disk" in RAM or full, thresholds above the limit; each refused before anything starts
    problems = [f"refused before starting: {x['message']}" for x in report["findings"]
                if x["level"] == "FATAL" and x["topic"] in REFUSED_TOPICS]
    if args.mode != "cpu" and jit_unspill():
        problems.append("refused: JIT-unspill is on (DASK_JIT_UNSPILL): its ProxifyHostFile keeps no device / host / "
                        "disk tiers this smoke can read, so a pass would prove nothing; run the smoke with "
                        "DASK_JIT_UNSPILL unset (the workload may keep it)")
    if not args.spill_dir:
        problems.append("no spill directory: set RAPIDS_SPILL_DIR or pass --spill-dir")
    if args.mode == "cpu" and not limits["worker"]:
        problems.append("no memory limit known: pass --memory-limit")
    if args.mode != "cpu" and not limits["device"]:
        problems.append("no GPU seen by NVML and no --device-memory-limit: cannot size the device tier")
    return problems


def jit_unspill(environ: dict | None = None) -> bool:
    """dask-cuda's JIT-unspill switch (DASK_JIT_UNSPILL, or jit-unspill in its config)."""
    env = os.environ if environ is None else environ
    return str(env.get("DASK_JIT_UNSPILL", "")).strip().lower() in ("1", "true", "yes", "on")


def cgroup_peak() -> int | None:
    return doctor.read_cgroup().peak


def _reap_children(before: set, timeout: float, notes: list[str]) -> None:
    """Stop the processes this run started and left behind (a worker whose close gave up): exit
    would otherwise wait on them (multiprocessing joins its children at exit)."""
    left = [c for c in multiprocessing.active_children() if c not in before]
    for child in left:
        child.terminate()
    deadline = time.monotonic() + timeout
    for child in left:
        child.join(max(0.1, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(1)
    if left:
        notes.append(f"shutdown: stopped {len(left)} worker process(es) left running: "
                     f"{', '.join(str(c.pid) for c in left)}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rapids-smoke", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("spill", help="spill a dataset larger than the limits and check it comes back")
    s.add_argument("--mode", choices=sorted(MODES), default="cpu")
    s.add_argument("--data-bytes", type=parse_bytes, default=None,
                   help="dataset size (default: 2 x the container limit; gpu: 2 x (device + host limit))")
    s.add_argument("--chunk-bytes", type=parse_bytes, default=None, help="array chunk size (cpu 32 MiB, gpu 128 MiB)")
    s.add_argument("--memory-limit", type=parse_bytes, default=None,
                   help="host memory per worker (default: the doctor's derived memory_limit); refused above "
                        "the container's memory budget")
    s.add_argument("--device-memory-limit", type=parse_bytes, default=None,
                   help="device memory per worker (default: the doctor's derived device_memory_limit)")
    s.add_argument("--spill-dir", default=doctor.spill_path_from_env(), help="default $RAPIDS_SPILL_DIR")
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--partitions", type=int, default=24, help="dask-cudf partitions of 128 MiB")
    s.add_argument("--pre-import", type=lambda v: doctor._as_list(v),
                   default=doctor._as_list(os.environ.get("RAPIDS_PRE_IMPORT", "")),
                   help="modules workers import first (default $RAPIDS_PRE_IMPORT), e.g. dask_cudf")
    s.add_argument("--timeout", type=float, default=300, help="seconds each step may take (default 300)")
    s.add_argument("--worker-timeout", type=float,
                   default=os.environ.get(WORKER_TIMEOUT_ENV) or str(DEFAULT_WORKER_TIMEOUT),
                   help=f"seconds a cluster may take to have its workers, else the stage fails at once "
                        f"(default ${WORKER_TIMEOUT_ENV}, else {DEFAULT_WORKER_TIMEOUT:g})")
    s.add_argument("--close-timeout", type=float, default=DEFAULT_CLOSE_TIMEOUT,
                   help=f"seconds closing the client and the cluster may take, each (default {DEFAULT_CLOSE_TIMEOUT:g})")
    s.add_argument("--drain-timeout", type=float, default=DEFAULT_DRAIN_TIMEOUT,
                   help=f"seconds the workers may take to free their data before the close (default {DEFAULT_DRAIN_TIMEOUT:g})")
    s.add_argument("--out", help="also write the JSON report to this file")
    return p


# how long the interpreter's own shutdown may take after the report (set from --close-timeout)
_EXIT = {"grace": DEFAULT_CLOSE_TIMEOUT}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _ABANDONED.clear()
    _EXIT["grace"] = args.close_timeout
    t0 = time.monotonic()
    result: dict = {"mode": args.mode, "spill_dir": args.spill_dir, "limits": None, "doctor": None}
    problems: list[str] = []
    notes: list[str] = []
    stages: list[Stage] = []
    base = args.spill_dir
    children = set(multiprocessing.active_children())
    try:
        report = doctor.diagnose(doctor.collect(args.spill_dir), args.workers, smoke_intent(args))
        limits = plan_limits(report, args)
        result["limits"] = limits
        result["doctor"] = {"findings": report["findings"], "derived": report["derived"]}
        problems = plan_problems(report, args, limits)
        if not problems:
            # a fresh folder of our own: counts see only this run's spill files, and it is removed after
            try:
                args.spill_dir = tempfile.mkdtemp(prefix="rapids-smoke-", dir=base)
            except OSError as err:
                problems.append(f"cannot write to the spill dir {base}: {err.strerror}")
        if not problems:
            stages = MODES[args.mode](args, limits, notes)
            _, problems = verdict(stages)
    except Exception as err:  # noqa: BLE001 - whatever happened, the report says it
        traceback.print_exc(file=sys.stderr)
        problems.append(f"the smoke itself failed: {type(err).__name__}: {err}")
    finally:
        if args.spill_dir != base:
            shutil.rmtree(args.spill_dir, ignore_errors=True)
            args.spill_dir = base
        try:
            _reap_children(children, args.close_timeout, notes)
        except Exception as err:  # noqa: BLE001
            notes.append(f"shutdown: stopping leftover processes failed: {type(err).__name__}: {err}")
        notes += [f"shutdown: left running in the background: {what}" for what in _ABANDONED]
        code = _report(result, stages, problems, notes, t0, args.out)
    return code


def _report(result: dict, stages: list[Stage], problems: list[str], notes: list[str], t0: float,
            out: str | None) -> int:
    """Print (and write) the report; never raises."""
    result["stages"] = [asdict(s) for s in stages]
    try:
        peak_cgroup = cgroup_peak()
    except Exception:  # noqa: BLE001
        peak_cgroup = None
    result["peak"] = {"cgroup_bytes": peak_cgroup,
                      "self_rss_bytes": peak_rss(),
                      "workers_rss_bytes": max((s.extra.get("worker_rss_peak") or 0 for s in stages), default=None)}
    result["seconds"] = round(time.monotonic() - t0, 2)
    result["problems"] = problems
    result["notes"] = notes
    result["verdict"] = "PASS" if stages and not problems else "FAIL"
    text = json.dumps(result, indent=2, default=str)
    print(text, flush=True)
    if out:
        try:
            Path(out).write_text(text + "\n")
        except OSError as err:
            _log(f"cannot write the report to {out}: {err}")
    for line in notes:
        _log(f"note: {line}")
    for line in problems:
        _log(f"FAIL: {line}")
    return 0 if result["verdict"] == "PASS" else FAIL_EXIT


def _force_exit(grace: float, code: int) -> None:
    time.sleep(grace)
    _log(f"exit still not done {grace:g} s after the report (threads or processes left by the cluster): forcing it")
    os._exit(code)


def finish(code: int) -> None:
    """Exit with `code`, never hanging: at once when something was left running, else the normal
    way with a daemon watchdog that forces the exit after the grace time."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    if _ABANDONED:
        os._exit(code)
    threading.Thread(target=_force_exit, args=(_EXIT["grace"], code), name="rapids-smoke: exit watchdog",
                     daemon=True).start()
    sys.exit(code)


def run(argv: list[str] | None = None) -> None:
    finish(main(argv))


if __name__ == "__main__":
    run()
