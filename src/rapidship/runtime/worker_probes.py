"""What runs inside the workers (module level, so they pickle by name: the workers import
rapids_runtime too): the chunks and partitions made where they live, their sums, and each worker's
tiers and peak RSS. dask, numpy, cupy and cudf are imported by the function that needs them.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

from .spill_view import dir_usage


# ---- workloads (run inside worker processes: module-level, picklable) ----

def int_chunk(chunk_elems: int, total: int, xp_name: str, block_info=None):
    """One chunk of arange(total) made where it lives (never shipped from the client)."""
    import importlib

    xp = importlib.import_module(xp_name)
    start = block_info[None]["array-location"][0][0]
    stop = min(start + chunk_elems, total)
    return xp.arange(start, stop, dtype="int64")


def piece_sum(piece, column: str | None = None) -> int:
    """On the worker: one chunk's (or one partition column's) sum as a Python int. The library sums
    in int64; exact because a piece is at most `exact_chunk_len` values long."""
    data = piece if column is None else piece[column]
    return int(data.sum())


def cudf_part(i: int, rows: int):
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


def host_tiers(dask_worker) -> dict:
    """Inside a distributed worker: keys and bytes in memory and on disk (SpillBuffer)."""
    from dask.sizeof import sizeof

    data = dask_worker.data
    fast = getattr(data, "fast", data)
    out = {"memory": [len(fast), int(sum(sizeof(v) for v in fast.values()))], "disk": [0, 0],
           "rss_peak": peak_rss()}
    if hasattr(data, "spilled_total"):
        out["disk"] = [len(data.slow), int(data.spilled_total.disk)]
    return out


def device_tiers(dask_worker) -> dict:
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


def has_dask_cudf(dask_worker=None) -> bool:
    return "dask_cudf" in sys.modules


def held_keys(dask_worker) -> int:
    return len(dask_worker.data)
