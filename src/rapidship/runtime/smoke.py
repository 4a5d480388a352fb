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

Standard library at import time; dask, numpy, cupy and cudf are imported by the mode that needs them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import doctor

FAIL_EXIT = 1
MiB = 2**20


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


def dir_usage(path: str, only_storage: bool = True) -> tuple[int, int]:
    """Spill files and their bytes under a directory: non-empty files below a `storage` folder,
    where distributed's SpillBuffer and dask-cuda's DeviceHostFile both write (lock files excluded)."""
    files = total = 0
    for base, _, names in os.walk(path):
        if only_storage and "storage" not in Path(base).parts:
            continue
        for n in names:
            try:
                size = os.stat(os.path.join(base, n)).st_size
            except OSError:
                continue
            if size:
                total += size
                files += 1
    return files, total


def parse_bytes(text: str | None) -> int | None:
    if text in (None, ""):
        return None
    t = str(text).strip().lower().replace(" ", "")
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9,
             "tb": 10**12, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "b": 1}
    for unit, mult in units.items():
        if t.endswith(unit):
            return int(float(t[: -len(unit)]) * mult)
    return int(float(t))


def _log(msg: str) -> None:
    print(f"rapids-smoke: {msg}", file=sys.stderr, flush=True)


# ---- workloads (run inside worker processes: module-level, picklable) ----

def _int_chunk(chunk_elems: int, total: int, xp_name: str, block_info=None):
    """One chunk of arange(total) made where it lives (never shipped from the client)."""
    import importlib

    xp = importlib.import_module(xp_name)
    start = block_info[None]["array-location"][0][0]
    stop = min(start + chunk_elems, total)
    return xp.arange(start, stop, dtype="int64")


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

def _array_stage(client, name: str, xp_name: str, data_bytes: int, chunk_bytes: int, limits: dict,
                 spill_dir: str, tier_fn, timeout: float) -> Stage:
    import dask.array as da

    total = data_bytes // 8
    chunk_elems = max(1, chunk_bytes // 8)
    chunks = tuple(min(chunk_elems, total - s) for s in range(0, total, chunk_elems))
    stage = Stage(name, total * 8, limits, expected=total * (total - 1) // 2)
    meta = __import__(xp_name).empty((0,), dtype="int64")
    x = da.map_blocks(_int_chunk, chunk_elems, total, xp_name, chunks=(chunks,), dtype="int64", meta=meta)
    t0 = time.monotonic()
    try:
        x = x.persist()
        _held(x, timeout)
        stage.seconds["persist"] = round(time.monotonic() - t0, 2)
        _observe(client, stage, spill_dir, tier_fn)
        t1 = time.monotonic()
        got = client.compute(x.sum()).result(timeout=timeout)
        stage.got = int(got.get() if hasattr(got, "get") else got)
        stage.seconds["read_back"] = round(time.monotonic() - t1, 2)
        stage.result_ok = stage.got == stage.expected
    except Exception as err:  # noqa: BLE001 - reported in the JSON, judged as a failure
        stage.error = _describe(err, timeout)
    stage.seconds["total"] = round(time.monotonic() - t0, 2)
    del x
    return stage


class WorkerDied(RuntimeError):
    pass


def _held(collection, timeout: float) -> None:
    """Wait until every piece is held. A worker that dies meanwhile (its nanny restarts it and the
    lost pieces are recomputed, possibly forever) or a piece that erred fails the wait at once."""
    from distributed import futures_of, get_client, wait

    client = get_client()
    workers = set(client.scheduler_info()["workers"])
    deadline = time.monotonic() + timeout
    futures = futures_of(collection)
    if not futures:                      # nothing to watch: a plain wait with the deadline
        wait(collection, timeout=timeout)
        return
    while True:
        try:
            wait(futures, timeout=1)
            break
        except TimeoutError:
            pass
        erred = [f for f in futures if f.status == "error"]
        if erred:
            erred[0].result()
        gone = workers - set(client.scheduler_info()["workers"])
        if gone:
            raise WorkerDied(f"worker {sorted(gone)[0]} died while holding data (OOM-killed?) and was restarted")
        if time.monotonic() > deadline:
            raise TimeoutError
    for future in futures:
        if future.status != "finished":
            future.result(timeout=timeout)


def _describe(err: BaseException, timeout: float) -> str:
    name = type(err).__name__
    if name in ("KilledWorker", "WorkerDied"):
        return f"KilledWorker: a worker died holding the data (OOM-killed?): {err}"
    if isinstance(err, TimeoutError) or "Timeout" in name:
        return f"timed out after {timeout:.0f} s (workers paused or killed and restarted?)"
    return f"{name}: {err}"


# Any worker death fails the run at once instead of being retried into a hang.
STRICT = {"distributed.scheduler.allowed-failures": 0}


def _observe(client, stage: Stage, spill_dir: str, tier_fn) -> None:
    """Snapshot tiers and spill files while the data is held (files vanish when workers close)."""
    per_worker = client.run(tier_fn)
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
    stage.spill_files, stage.spill_file_bytes = dir_usage(spill_dir)
    stage.extra["workers"] = len(per_worker)
    stage.extra["worker_rss_peak"] = max(peaks) if peaks else None


def run_cpu(args, limits) -> list[Stage]:
    import dask
    from distributed import Client, LocalCluster

    worker_limit = limits["worker"]
    data = args.data_bytes or 2 * (limits["container"] or worker_limit)
    _log(f"cpu: LocalCluster(1 worker, memory_limit={worker_limit}), dataset {data} B, spill dir {args.spill_dir}")
    # Spilled bytes are the bytes written: no compression, so the disk tier reads true.
    with dask.config.set({"distributed.worker.memory.spill-compression": False,
                          "distributed.comm.compression": False, **STRICT}):
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                          memory_limit=worker_limit, local_directory=args.spill_dir,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            before = set(client.scheduler_info()["workers"])
            stage = _array_stage(client, "cpu-array", "numpy", data, args.chunk_bytes or 32 * MiB,
                                 {"memory": worker_limit * args.workers}, args.spill_dir, _host_tiers, args.timeout)
            after = set(client.scheduler_info()["workers"])
            if before != after:
                stage.error = stage.error or f"a worker was restarted (killed?): {sorted(before ^ after)}"
    return [stage]


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


def run_gpu(args, limits) -> list[Stage]:
    from distributed import Client

    dev, host = limits["device"], limits["host"]
    data = args.data_bytes or 2 * (dev + host)
    _log(f"gpu: LocalCUDACluster(device_memory_limit={dev}, memory_limit={host}), CuPy dataset {data} B")
    with _cuda_cluster(args, dev, host, args.pre_import) as cluster, Client(cluster) as client:
        stage = _array_stage(client, "gpu-cupy", "cupy", data, args.chunk_bytes or 128 * MiB,
                             {"device": dev, "host": host}, args.spill_dir, _device_tiers, args.timeout)
    return [stage]


def run_cudf(args, limits) -> list[Stage]:
    return [cudf_own_spilling(args, limits), dask_cudf_stage(args, limits)]


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

        rows = frame_bytes // 8
        from rmm.allocators.cupy import rmm_cupy_allocator

        cupy.cuda.set_allocator(rmm_cupy_allocator)   # CuPy's temporaries count against the limit too
        # deep copies: cuDF owns (and may spill) its buffers; wrapped CuPy memory would be pinned in place
        held = [cudf.DataFrame({"a": cupy.arange(i * rows, (i + 1) * rows, dtype="int64")}).copy(deep=True)
                for i in range(frames)]
        stage.seconds["persist"] = round(time.monotonic() - t0, 2)
        total = frames * rows
        stage.expected = total * (total - 1) // 2
        stage.got = int(sum(int(f["a"].sum()) for f in held))
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


def dask_cudf_stage(args, limits) -> Stage:
    import dask.dataframe as dd
    from distributed import Client

    dev, host = limits["device"], limits["host"]
    parts, part_bytes = args.partitions, 128 * MiB
    rows = part_bytes // 16          # two int64 columns
    stage = Stage("dask-cudf", parts * rows * 16, {"device": dev, "host": host})
    stage.extra["pre_import"] = args.pre_import
    total = parts * rows
    stage.expected = total * (total - 1) // 2
    _log(f"cudf: LocalCUDACluster(device_memory_limit={dev}, memory_limit={host}, pre_import={args.pre_import}), "
         f"{parts} partitions of {part_bytes} B")
    t0 = time.monotonic()
    try:
        with _cuda_cluster(args, dev, host, args.pre_import) as cluster, Client(cluster) as client:
            stage.extra["workers_have_dask_cudf"] = all(client.run(_has_dask_cudf).values())
            import cudf
            import cupy
            import dask_cudf  # noqa: F401 - the client's own dispatch for cuDF-backed collections

            meta = cudf.DataFrame({"a": cupy.empty(0, "int64"), "b": cupy.empty(0, "int64")})
            ddf = dd.from_map(_cudf_part, list(range(parts)), rows=rows, meta=meta).persist()
            _held(ddf, args.timeout)
            stage.seconds["persist"] = round(time.monotonic() - t0, 2)
            _observe(client, stage, args.spill_dir, _device_tiers)
            t1 = time.monotonic()
            stage.got = int(client.compute(ddf["a"].sum()).result(timeout=args.timeout))
            stage.seconds["read_back"] = round(time.monotonic() - t1, 2)
            stage.result_ok = stage.got == stage.expected
            del ddf
    except Exception as err:  # noqa: BLE001
        stage.error = _describe(err, args.timeout)
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


def cgroup_peak() -> int | None:
    return doctor.read_cgroup().peak


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rapids-smoke", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("spill", help="spill a dataset larger than the limits and check it comes back")
    s.add_argument("--mode", choices=sorted(MODES), default="cpu")
    s.add_argument("--data-bytes", type=parse_bytes, default=None,
                   help="dataset size (default: 2 x the container limit; gpu: 2 x (device + host limit))")
    s.add_argument("--chunk-bytes", type=parse_bytes, default=None, help="array chunk size (cpu 32 MiB, gpu 128 MiB)")
    s.add_argument("--memory-limit", type=parse_bytes, default=None,
                   help="host memory per worker (default: the doctor's derived memory_limit)")
    s.add_argument("--device-memory-limit", type=parse_bytes, default=None,
                   help="device memory per worker (default: the doctor's derived device_memory_limit)")
    s.add_argument("--spill-dir", default=doctor.spill_path_from_env(), help="default $RAPIDS_SPILL_DIR")
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--partitions", type=int, default=24, help="dask-cudf partitions of 128 MiB")
    s.add_argument("--pre-import", type=lambda v: doctor._as_list(v),
                   default=doctor._as_list(os.environ.get("RAPIDS_PRE_IMPORT", "")),
                   help="modules workers import first (default $RAPIDS_PRE_IMPORT), e.g. dask_cudf")
    s.add_argument("--timeout", type=float, default=300, help="seconds each step may take (default 300)")
    s.add_argument("--out", help="also write the JSON report to this file")
    args = p.parse_args(argv)

    t0 = time.monotonic()
    report = doctor.diagnose(doctor.collect(), args.workers)
    limits = plan_limits(report, args)
    result: dict = {"mode": args.mode, "spill_dir": args.spill_dir, "limits": limits,
                    "doctor": {"findings": report["findings"], "derived": report["derived"]}}
    problems: list[str] = []
    if not args.spill_dir:
        problems.append("no spill directory: set RAPIDS_SPILL_DIR or pass --spill-dir")
    if args.mode == "cpu" and not limits["worker"]:
        problems.append("no memory limit known: pass --memory-limit")
    if args.mode != "cpu" and not limits["device"]:
        problems.append("no GPU seen by NVML and no --device-memory-limit: cannot size the device tier")
    stages: list[Stage] = []
    if not problems:
        # a fresh folder of our own: counts see only this run's spill files, and it is removed after
        base = args.spill_dir
        try:
            args.spill_dir = tempfile.mkdtemp(prefix="rapids-smoke-", dir=base)
        except OSError as err:
            problems.append(f"cannot write to the spill dir {base}: {err.strerror}")
    if not problems:
        try:
            stages = MODES[args.mode](args, limits)
        finally:
            shutil.rmtree(args.spill_dir, ignore_errors=True)
            args.spill_dir = base
        _, problems = verdict(stages)
    result["stages"] = [asdict(s) for s in stages]
    result["peak"] = {"cgroup_bytes": cgroup_peak(),
                      "self_rss_bytes": peak_rss(),
                      "workers_rss_bytes": max((s.extra.get("worker_rss_peak") or 0 for s in stages), default=None)}
    result["seconds"] = round(time.monotonic() - t0, 2)
    result["problems"] = problems
    result["verdict"] = "PASS" if stages and not problems else "FAIL"
    text = json.dumps(result, indent=2)
    print(text, flush=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    for line in problems:
        _log(f"FAIL: {line}")
    return 0 if result["verdict"] == "PASS" else FAIL_EXIT


if __name__ == "__main__":
    sys.exit(main())
