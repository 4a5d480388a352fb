"""What a running worker's memory holds, as its own libraries count it: RMM's device resource chain
(pool, allocated, peak, limit) and the dask worker's spill tiers (device, host, disk). Read by the
/metrics preload; nothing is imported here that the process did not import already.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RmmView:
    """What RMM's current device resource chain says, when the process uses RMM."""
    resources: list[str] = field(default_factory=list)  # the chain, outermost first
    pool_bytes: int | None = None        # PoolMemoryResource.pool_size(): device memory the pool holds
    # device memory the chain holds from the GPU whatever it hands out: the pool's size, or what the
    # CUDA memory pool of a CudaAsyncMemoryResource (`--rmm-async`) has reserved now
    reserved_bytes: int | None = None
    allocated_bytes: int | None = None   # statistics / tracking / limiting adaptor: bytes handed out now
    peak_bytes: int | None = None        # statistics adaptor: the most ever handed out at once
    limit_bytes: int | None = None       # limiting adaptor: its allocation limit


def rmm_view(mr, depth: int = 16) -> RmmView:
    """Walk a resource chain (get_upstream) and keep what each adaptor can say; by class name, so
    recorded stand-ins test it and an RMM release that renames one leaves it absent, not wrong."""
    names, got = [], {}
    for _ in range(depth):
        if mr is None:
            break
        kind = type(mr).__name__
        names.append(kind)
        try:
            if kind == "PoolMemoryResource":
                got.setdefault("pool_bytes", int(mr.pool_size()))
                got.setdefault("reserved_bytes", got["pool_bytes"])
            elif kind == "CudaAsyncMemoryResource":
                reserved, used = async_pool_usage(mr)
                got.setdefault("reserved_bytes", reserved)
                got.setdefault("allocated_bytes", used)
            elif kind == "StatisticsResourceAdaptor":
                counts = mr.allocation_counts
                got.setdefault("allocated_bytes", int(counts.current_bytes))
                got.setdefault("peak_bytes", int(counts.peak_bytes))
            elif kind in ("TrackingResourceAdaptor", "LimitingResourceAdaptor"):
                got.setdefault("allocated_bytes", int(mr.get_allocated_bytes()))
                if kind == "LimitingResourceAdaptor":
                    got.setdefault("limit_bytes", int(mr.get_allocation_limit()))
        except Exception:  # noqa: BLE001 - an adaptor that cannot answer is left out
            pass
        mr = mr.get_upstream() if hasattr(mr, "get_upstream") else None
    return RmmView(names, **got)


def async_pool_usage(mr, buffer=None, driver=None) -> tuple[int, int]:
    """(reserved, used) bytes of the CUDA memory pool behind a CudaAsyncMemoryResource. RMM's Python
    API does not give the pool's handle, but the driver says which pool a pointer came from: one
    byte allocated from the resource names it, and the pool says what it holds (reserved: taken from
    the GPU, handed out or not; used: handed out). `buffer` and `driver` are for tests."""
    if driver is None:
        from cuda.bindings import driver  # noqa: PLC0415 - rmm's own dependency
    if buffer is None:
        import rmm  # noqa: PLC0415 - only called when the process uses RMM

        buffer = rmm.DeviceBuffer(size=1, mr=mr)
    err, pool = driver.cuPointerGetAttribute(driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                             buffer.ptr)
    if int(err) != 0:
        raise RuntimeError(f"cuPointerGetAttribute(MEMPOOL_HANDLE): {err}")
    found = []
    for attr in ("CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT", "CU_MEMPOOL_ATTR_USED_MEM_CURRENT"):
        err, value = driver.cuMemPoolGetAttribute(pool, getattr(driver.CUmemPool_attribute, attr))
        if int(err) != 0:
            raise RuntimeError(f"cuMemPoolGetAttribute({attr}): {err}")
        found.append(int(value))
    return found[0], found[1]


def _lru(buffer) -> tuple[int, int] | None:
    """(keys, bytes) of a zict Buffer's fast LRU, by its own running weight (no sizeof per scrape)."""
    fast = getattr(buffer, "fast", None)
    weight = getattr(fast, "total_weight", None)
    return None if fast is None or weight is None else (len(fast), int(weight))


def worker_tiers(data) -> dict[str, tuple[int, int | None]]:
    """A worker's tiers from its data mapping, as the spilling code itself counts them: dask-cuda's
    DeviceHostFile (device -> host -> disk zict buffers) or distributed's SpillBuffer (host ->
    disk). {tier: (keys, bytes)}; bytes None where the mapping does not count them (dask-cuda's
    disk: the spill dir's metrics have those); a tier it lacks is absent."""
    out: dict[str, tuple[int, int | None]] = {}
    device = getattr(data, "device_buffer", None)
    if device is not None and (got := _lru(device)) is not None:
        out["device"] = got
    host = getattr(data, "host_buffer", data)
    if (got := _lru(host)) is not None:
        out["host"] = got
        slow = getattr(host, "slow", None)
        spilled = getattr(getattr(host, "spilled_total", None), "disk", None)
        if slow is not None:
            out["disk"] = (len(slow), None if spilled is None else int(spilled))
    return out


def device_limit(data) -> int | None:
    """dask-cuda's device tier limit (its device buffer's LRU n), None without one."""
    n = getattr(getattr(getattr(data, "device_buffer", None), "fast", None), "n", None)
    return int(n) if isinstance(n, (int, float)) and n != float("inf") else None


def read_rmm(modules: dict | None = None) -> RmmView | None:
    """RMM's view in this process, only when the process already imported rmm (importing it here
    would start CUDA in a process that never asked for the GPU). None: RMM is not in use."""
    import sys  # noqa: PLC0415

    rmm = (modules if modules is not None else sys.modules).get("rmm")
    if rmm is None:
        return None
    return rmm_view(rmm.mr.get_current_device_resource())
