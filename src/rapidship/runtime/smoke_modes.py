"""The spill smoke's modes, each a workload larger than its limits: cpu (a LocalCluster worker under the
memory cap), gpu (a LocalCUDACluster worker, device -> host -> disk), cudf (cuDF's own spilling under
an RMM limit, then dask-cudf partitions). Each returns its Stages for the verdict. Standard library at
import time: dask, numpy, cupy and cudf are imported by the mode that needs them.
"""

from __future__ import annotations

import os
import time

from .session import DEFAULT_DRAIN_TIMEOUT, cluster_session, describe, log, wait_until_held
from .smoke_verdict import Stage, Tier, arange_sum, chunk_bounds, combine, exact_chunk_len, exact_partition_rows
from .spill_view import dir_usage
from .units import MiB
from .worker_probes import cudf_part, device_tiers, has_dask_cudf, host_tiers, int_chunk, piece_sum


# ---- modes ----

def _sum_pieces(client, pieces, timeout: float, column: str | None = None) -> list[int]:
    """Read every piece back: one task per chunk or partition, each returning its sum as a Python int."""
    import dask
    from distributed import wait

    futures = client.compute([dask.delayed(piece_sum)(piece, column) for piece in pieces])
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
    x = da.map_blocks(int_chunk, chunk_elems, total, xp_name, chunks=(chunks,), dtype="int64", meta=meta)
    t0 = time.monotonic()
    try:
        x = x.persist()
        wait_until_held(x, timeout, spill_dir)
        stage.seconds["persist"] = round(time.monotonic() - t0, 2)
        _observe(client, stage, spill_dir, tier_fn)
        t1 = time.monotonic()
        stage.got = combine(_sum_pieces(client, x.to_delayed().ravel().tolist(), timeout))
        stage.seconds["read_back"] = round(time.monotonic() - t1, 2)
        stage.result_ok = stage.got == stage.expected
    except Exception as err:  # noqa: BLE001 - reported in the JSON, judged as a failure
        stage.error = describe(err, timeout)
    stage.seconds["total"] = round(time.monotonic() - t0, 2)
    del x
    return stage


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
        failed.error = describe(err, args.timeout)
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
    log(f"cpu: LocalCluster({args.workers} worker(s), memory_limit={worker_limit}), dataset {data} B, "
         f"spill dir {args.spill_dir}")

    def work(client) -> Stage:
        before = set(client.scheduler_info()["workers"])
        stage = _array_stage(client, "cpu-array", "numpy", data, args.chunk_bytes or 32 * MiB, memory,
                             args.spill_dir, host_tiers, args.timeout)
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
    log(f"gpu: LocalCUDACluster(device_memory_limit={dev}, memory_limit={host}), CuPy dataset {data} B")

    def work(client) -> Stage:
        return _array_stage(client, "gpu-cupy", "cupy", data, args.chunk_bytes or 128 * MiB, tiers,
                            args.spill_dir, device_tiers, args.timeout)

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
        stage.got = combine(piece_sum(f, "a") for f in held)     # one int64 sum per frame, added as Python ints
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
    log(f"cudf: LocalCUDACluster(device_memory_limit={dev}, memory_limit={host}, pre_import={args.pre_import}), "
         f"{parts} partitions of {rows * 16} B")
    t0 = time.monotonic()

    def work(client) -> Stage:
        import dask.dataframe as dd

        try:
            stage.extra["workers_have_dask_cudf"] = all(client.run(has_dask_cudf).values())
            import cudf
            import cupy
            import dask_cudf  # noqa: F401 - the client's own dispatch for cuDF-backed collections

            meta = cudf.DataFrame({"a": cupy.empty(0, "int64"), "b": cupy.empty(0, "int64")})
            ddf = dd.from_map(cudf_part, list(range(parts)), rows=rows, meta=meta).persist()
            wait_until_held(ddf, args.timeout, args.spill_dir)
            stage.seconds["persist"] = round(time.monotonic() - t0, 2)
            _observe(client, stage, args.spill_dir, device_tiers)
            t1 = time.monotonic()
            stage.got = combine(_sum_pieces(client, ddf.to_delayed(), args.timeout, column="a"))
            stage.seconds["read_back"] = round(time.monotonic() - t1, 2)
            stage.result_ok = stage.got == stage.expected
            del ddf
        except Exception as err:  # noqa: BLE001
            stage.error = describe(err, args.timeout)
        return stage

    _in_cluster(args, notes, lambda: _cuda_cluster(args, dev, host, args.pre_import), 1, stage, work)
    stage.seconds["total"] = round(time.monotonic() - t0, 2)
    return stage


MODES = {"cpu": run_cpu, "gpu": run_gpu, "cudf": run_cudf}
