"""What the container sees, read once: cgroup memory (v1 and v2, the ancestors too), host RAM,
/dev/shm, memlock, the GPUs through NVML (those CUDA_VISIBLE_DEVICES leaves visible), mounts,
the spill directory, dask's spill configuration, the image's prune record. `read_*` do the I/O and
return plain records; `collect` gathers them into one Facts. Standard library only at import time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import socket
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path



UNLIMITED = 2**62          # cgroup v1 says "unlimited" with a page-rounded 2^63-1


MiB = 2**20


GiB = 2**30


# The build's prune record: {"keep": [80, 90], ...} lists the compute capabilities (major*10+minor)
# whose device code the image kept; "keep": null, or no file, means nothing was pruned.
PRUNE_RECORD_ENV = "RAPIDSHIP_PRUNE_RECORD"


DEFAULT_PRUNE_RECORD = "/opt/rapidship/prune.json"


RAM_FSTYPES = ("tmpfs", "ramfs")  # a "disk" tier there is memory of the same cgroup: no disk spill at all


WARN_FSTYPES = {"overlay": "the container's writable layer: spilling there fills the node's image disk",
                "tmpfs": "RAM: spilling there counts against the same memory limit it is meant to relieve",
                "ramfs": "RAM: spilling there counts against the same memory limit it is meant to relieve"}


@dataclass(frozen=True)
class CgroupMemory:
    version: int | None            # 2, 1 or None (no cgroup memory controller visible)
    limit: int | None              # memory.max / memory.limit_in_bytes; None = unlimited
    high: int | None = None        # v2 memory.high (throttling starts here); None = unlimited
    swap_limit: int | None = None  # v2 memory.swap.max; v1 memory.memsw.limit_in_bytes (memory + swap)
    usage: int | None = None
    peak: int | None = None        # v2 memory.peak; v1 memory.max_usage_in_bytes
    path: str = ""
    soft_limit: int | None = None  # v1 memory.soft_limit_in_bytes (--memory-reservation): distributed obeys it
    swap_unlimited: bool = False   # memory + swap may grow without bound (--memory-swap -1): the cap is no cap


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total: int
    free: int
    mig_mode: bool = False
    mig_slices: list[dict] = field(default_factory=list)   # [{"index", "total", "free"}]
    cc_major: int | None = None     # compute capability (9, 0 on an H200); None when NVML could not say
    cc_minor: int | None = None
    uuid: str = ""                  # GPU-..., what CUDA_VISIBLE_DEVICES may name instead of the index
    # one memory for CPU and GPU (GB10 / DGX Spark: NVML answers NOT_SUPPORTED for its memory, and
    # total/free are then the machine's MemTotal/MemAvailable). GH200's HBM is the GPU's own: False.
    unified: bool = False


@dataclass(frozen=True)
class GpuView:
    available: bool                 # NVML answered
    reason: str = ""                # why not, when not
    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[Gpu] = field(default_factory=list)


@dataclass(frozen=True)
class PruneRecord:
    """Which GPU architectures' device code the image kept (read from the build's prune record)."""

    path: str
    present: bool = False           # the file exists
    keep: list[int] | None = None   # compute capabilities major*10+minor; None = nothing was pruned
    error: str | None = None        # why the record could not be used (unreadable, corrupt)


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fstype: str
    source: str


@dataclass(frozen=True)
class SpillDir:
    path: str | None               # None: nothing configured
    exists: bool = False
    writable: bool = False
    read_only: bool = False         # on a read-only mount: with --read-only, nothing was mounted there
    mode: int | None = None
    owner_uid: int | None = None
    owner_gid: int | None = None
    fstype: str | None = None
    mount_point: str | None = None
    free_bytes: int | None = None


@dataclass(frozen=True)
class SpillConfig:
    """Where dask is told to spill and whether its spilling is switched on."""

    dask_available: bool
    target: float | bool | None     # distributed.worker.memory.target
    spill: float | bool | None      # distributed.worker.memory.spill
    pause: float | bool | None
    terminate: float | bool | None
    temporary_directory: str | None  # temporary-directory (DASK_TEMPORARY_DIRECTORY)
    preload: list[str] = field(default_factory=list)     # distributed.worker.preload
    pre_import: list[str] = field(default_factory=list)  # RAPIDS_PRE_IMPORT, passed to dask-cuda
    cudf_available: bool = False
    dask_cudf_available: bool = False
    dask_cuda_available: bool = False
    ucx_available: bool = False     # ucxx and distributed_ucxx importable (UCX comms for dask)


@dataclass(frozen=True)
class Facts:
    uid: int
    gid: int
    groups: list[int]
    cgroup: CgroupMemory
    host_total: int | None
    host_available: int | None
    shm_bytes: int | None
    memlock_soft: int | None        # None = unlimited
    cpus: int
    gpu: GpuView
    spill_dir: SpillDir
    spill_config: SpillConfig
    prune: PruneRecord = field(default_factory=lambda: PruneRecord(DEFAULT_PRUNE_RECORD))
    cwd: str = ""
    cwd_usable: bool = True         # the working directory can be entered and listed by this uid
    declared_limit: int | None = None  # $RAPIDS_MEMORY_LIMIT: a limit the cgroup view cannot show (a parent's)
    cuda_image: bool = True         # False: the image carries no CUDA (no NVIDIA_REQUIRE_CUDA): no device code
    caches: list[CacheDir] = field(default_factory=list)  # where libraries write at run time, writable or not


def _read_int(path: Path) -> int | None | str:
    """An integer, None for 'max'/unlimited, or '' when the file is absent or unreadable."""
    try:
        raw = path.read_text().strip()
    except (OSError, ValueError):
        return ""
    if raw == "max":
        return None
    try:
        value = int(raw.split()[0])
    except (ValueError, IndexError):
        return ""
    return None if value >= UNLIMITED else value


def _cgroup_paths(proc_cgroup: str) -> tuple[str | None, str | None]:
    """Pure: (v2 path, v1 memory path) from /proc/self/cgroup text."""
    v2 = v1 = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


def _candidates(base: Path, rel: str | None) -> list[Path]:
    """The cgroup's own directory and its ancestors up to the mount root, innermost first.

    With a private cgroup namespace (Docker on v2, most v1 mounts) the mount root IS the
    container's cgroup and `rel` does not exist below it; then only the root is read.
    """
    out: list[Path] = []
    if rel and rel != "/":
        p = base / rel.lstrip("/")
        if p.is_dir():
            while True:
                out.append(p)
                if p == base:
                    return out
                p = p.parent
    return [base]


def read_cgroup(root: Path = Path("/sys/fs/cgroup"), proc_cgroup: str | None = None) -> CgroupMemory:
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            proc_cgroup = ""
    v2_rel, v1_rel = _cgroup_paths(proc_cgroup)
    if (root / "cgroup.controllers").is_file():   # unified hierarchy (v2)
        limit = high = swap = None
        usage = peak = None
        found = False
        dirs = _candidates(root, v2_rel)
        for d in dirs:                      # the tightest limit on the way up wins
            lim = _read_int(d / "memory.max")
            if lim == "":
                continue
            found = True
            if lim is not None and (limit is None or lim < limit):
                limit = lim
            hi = _read_int(d / "memory.high")
            if isinstance(hi, int) and (high is None or hi < high):
                high = hi
            sw = _read_int(d / "memory.swap.max")
            if isinstance(sw, int) and (swap is None or sw < swap):
                swap = sw
        own = dirs[0]
        u, p = _read_int(own / "memory.current"), _read_int(own / "memory.peak")
        usage = u if isinstance(u, int) else None
        peak = p if isinstance(p, int) else None
        if found:
            swap_unlimited = limit is not None and swap is None and _read_int(own / "memory.swap.max") is None
            return CgroupMemory(2, limit, high, swap, usage, peak, str(own), swap_unlimited=swap_unlimited)
    mem = root / "memory"
    if mem.is_dir():
        dirs = [d for d in _candidates(mem, v1_rel) if _read_int(d / "memory.limit_in_bytes") != ""]
        if dirs:
            return _read_v1(dirs)
    return CgroupMemory(None, None, path="")


def _tightest(values) -> int | None:
    ints = [v for v in values if isinstance(v, int)]
    return min(ints) if ints else None


def memory_stat(text: str) -> dict[str, int]:
    """Pure: memory.stat as {key: value}."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def _read_v1(dirs: list[Path]) -> CgroupMemory:
    """cgroup v1: the tightest limit of the cgroup and every ancestor visible, and the kernel's own
    view of them all (memory.stat `hierarchical_memory_limit` / `hierarchical_memsw_limit`): a
    container's namespaced /sys/fs/cgroup/memory shows only its own directory, but a lower limit
    on a parent (docker --cgroup-parent) still OOM-kills there."""
    own = dirs[0]
    try:
        stat_ = memory_stat((own / "memory.stat").read_text())
    except OSError:
        stat_ = {}
    hier = {k: (None if v >= UNLIMITED else v) for k, v in stat_.items() if k.startswith("hierarchical_")}
    limit = _tightest([_read_int(d / "memory.limit_in_bytes") for d in dirs] + [hier.get("hierarchical_memory_limit")])
    swaps = [_read_int(d / "memory.memsw.limit_in_bytes") for d in dirs] + [hier.get("hierarchical_memsw_limit")]
    swap = _tightest(swaps)
    own_swap = _read_int(own / "memory.memsw.limit_in_bytes")
    soft = _read_int(own / "memory.soft_limit_in_bytes")
    u, p = _read_int(own / "memory.usage_in_bytes"), _read_int(own / "memory.max_usage_in_bytes")
    return CgroupMemory(1, limit, None, swap, u if isinstance(u, int) else None, p if isinstance(p, int) else None,
                        str(own), soft_limit=soft if isinstance(soft, int) else None,
                        swap_unlimited=own_swap is None and swap is None and limit is not None)


def read_meminfo(text: str) -> tuple[int | None, int | None]:
    """Pure: (MemTotal, MemAvailable) in bytes from /proc/meminfo text."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) * 1024
    return values.get("MemTotal"), values.get("MemAvailable")


def parse_mountinfo(text: str) -> list[Mount]:
    """Pure: mounts from /proc/self/mountinfo (fields before ' - ', fstype and source after)."""
    mounts = []
    for line in text.splitlines():
        pre, sep, post = line.partition(" - ")
        if not sep:
            continue
        fields, tail = pre.split(), post.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        mounts.append(Mount(_unescape(fields[4]), tail[0], _unescape(tail[1])))
    return mounts


def _unescape(s: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (\\040 ...)."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 4 <= len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mount_for(path: str, mounts: list[Mount]) -> Mount | None:
    """Pure: the mount a path lives on: the longest mount point that contains it, last one wins."""
    best: Mount | None = None
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        if path == mp or path.startswith(mp + "/") or mp == "/":
            if best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/"):
                best = m
    return best


def read_spill_dir(path: str | None, mounts: list[Mount] | None = None) -> SpillDir:
    if not path:
        return SpillDir(path=None)
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return SpillDir(path=path)
    if not stat.S_ISDIR(st.st_mode):
        return SpillDir(path=path)
    if mounts is None:
        try:
            mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
        except OSError:
            mounts = []
    m = mount_for(os.path.realpath(path), mounts)
    try:
        vfs = os.statvfs(path)
        free, read_only = vfs.f_bavail * vfs.f_frsize, bool(vfs.f_flag & os.ST_RDONLY)
    except OSError:
        free, read_only = None, False
    return SpillDir(path=path, exists=True, writable=_really_writable(p), read_only=read_only,
                    mode=stat.S_IMODE(st.st_mode),
                    owner_uid=st.st_uid, owner_gid=st.st_gid, fstype=m.fstype if m else None,
                    mount_point=m.mount_point if m else None, free_bytes=free)


def _really_writable(p: Path) -> bool:
    """os.access trusts mode bits; a read-only mount or a user namespace can still refuse."""
    if not os.access(p, os.W_OK | os.X_OK):
        return False
    probe = p / f".rapids-doctor-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def _as_list(value) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.replace(",", " ").split() if v.strip()]
    return [str(v) for v in value]


def read_spill_config(environ: dict | None = None) -> SpillConfig:
    """Dask's view (its config files and DASK_* variables) when dask is installed."""
    env = os.environ if environ is None else environ
    has = lambda mod: importlib.util.find_spec(mod) is not None  # noqa: E731
    cudf, dask_cudf, dask_cuda = has("cudf"), has("dask_cudf"), has("dask_cuda")
    ucx = has("ucxx") and has("distributed_ucxx")
    pre_import = _as_list(env.get("RAPIDS_PRE_IMPORT", ""))
    if has("dask"):
        import dask.config  # noqa: PLC0415 - optional, and only when present

        get = dask.config.get
        return SpillConfig(True, get("distributed.worker.memory.target", None),
                           get("distributed.worker.memory.spill", None),
                           get("distributed.worker.memory.pause", None),
                           get("distributed.worker.memory.terminate", None),
                           get("temporary-directory", None) or None,
                           _as_list(get("distributed.worker.preload", [])), pre_import, cudf, dask_cudf, dask_cuda,
                           ucx)
    return SpillConfig(False, None, None, None, None, env.get("DASK_TEMPORARY_DIRECTORY") or None, [], pre_import,
                       cudf, dask_cudf, dask_cuda, ucx)


def unified_memory(path: str = "/proc/meminfo") -> tuple[int, int]:
    """(total, free) of a unified-memory GPU: the machine's MemTotal and MemAvailable."""
    try:
        total, avail = read_meminfo(Path(path).read_text())
    except OSError:
        total = avail = None
    return int(total or 0), int(avail or 0)


def read_gpus() -> GpuView:
    """GPUs through NVML (pynvml from nvidia-ml-py). Absent library or driver: reported, never fatal."""
    if importlib.util.find_spec("pynvml") is None:
        return GpuView(False, "pynvml (nvidia-ml-py) is not installed")
    try:
        import pynvml  # noqa: PLC0415
        pynvml.nvmlInit()
    except Exception as err:  # noqa: BLE001 - NVML raises its own types; any means "no GPU"
        return GpuView(False, f"NVML did not start: {err}")
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            try:
                mem = pynvml.nvmlDeviceGetMemoryInfo(h)
                total, free, unified = int(mem.total), int(mem.free), False
            except pynvml.NVMLError as err:   # no framebuffer of its own: the machine's memory is the GPU's
                if "Not Supported" not in str(err) and getattr(err, "value", None) != getattr(
                        pynvml, "NVML_ERROR_NOT_SUPPORTED", 3):
                    raise
                total, free = unified_memory()
                unified = True
            mig_on, slices = False, []
            try:
                mig_on = pynvml.nvmlDeviceGetMigMode(h)[0] == pynvml.NVML_DEVICE_MIG_ENABLE
            except pynvml.NVMLError:
                pass
            if mig_on:
                for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)):
                    try:
                        mh = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
                    except pynvml.NVMLError:
                        continue
                    mm = pynvml.nvmlDeviceGetMemoryInfo(mh)
                    slices.append({"index": j, "total": int(mm.total), "free": int(mm.free)})
            cc_major = cc_minor = None
            try:
                cc_major, cc_minor = (int(x) for x in pynvml.nvmlDeviceGetCudaComputeCapability(h))
            except pynvml.NVMLError:
                pass
            try:
                uuid = _text(pynvml.nvmlDeviceGetUUID(h))
            except pynvml.NVMLError:
                uuid = ""
            gpus.append(Gpu(i, _text(pynvml.nvmlDeviceGetName(h)), total, free, mig_on, slices,
                            cc_major, cc_minor, uuid, unified))
        return visible_gpus(GpuView(True, "", driver, f"{cuda // 1000}.{cuda % 1000 // 10}", gpus),
                            os.environ.get("CUDA_VISIBLE_DEVICES"))
    except Exception as err:  # noqa: BLE001
        return GpuView(False, f"NVML query failed: {err}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def visible_gpus(view: GpuView, visible: str | None) -> GpuView:
    """Pure: only the GPUs CUDA_VISIBLE_DEVICES lets this process use (indices or GPU-UUID
    prefixes, in its order); NVML sees every GPU of the machine, CUDA only these. Unset: all;
    empty or "-1": none."""
    if visible is None or not view.available:
        return view
    chosen: list[Gpu] = []
    for item in (x.strip() for x in visible.split(",")):
        if not item:
            continue
        if item.isdigit() or item.lstrip("-").isdigit():
            found = [g for g in view.gpus if g.index == int(item)]
            if not found:
                break  # CUDA stops at the first invalid entry
        else:
            found = [g for g in view.gpus if g.uuid and g.uuid.startswith(item if item.startswith("GPU-") else f"GPU-{item}")]
            if len(found) != 1:
                break
        chosen += [g for g in found if g not in chosen]
    return replace(view, gpus=chosen, reason=f"CUDA_VISIBLE_DEVICES={visible}: {len(chosen)} of {len(view.gpus)} "
                                             "GPU(s) visible")


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def prune_record_path(environ: dict | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(PRUNE_RECORD_ENV) or DEFAULT_PRUNE_RECORD


@dataclass(frozen=True)
class RmmView:
    """What RMM's current device resource chain says, when the process uses RMM."""
    resources: list[str] = field(default_factory=list)  # the chain, outermost first
    pool_bytes: int | None = None        # PoolMemoryResource.pool_size(): device memory the pool holds
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


def read_prune_record(path: str | None = None) -> PruneRecord:
    """The image's prune record. No file: nothing was pruned. Unreadable or malformed: `error` says why."""
    path = path or prune_record_path()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return PruneRecord(path)
    except (OSError, UnicodeDecodeError) as err:
        return PruneRecord(path, True, error=f"cannot be read ({err.__class__.__name__}: {err})")
    return parse_prune_record(text, path)


def parse_prune_record(text: str, path: str) -> PruneRecord:
    """Pure: prune record JSON text -> PruneRecord; a malformed record carries `error`."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        return PruneRecord(path, True, error=f"is not valid JSON ({err})")
    if not isinstance(doc, dict):
        return PruneRecord(path, True, error="is not a JSON object")
    if "keep" not in doc:
        return PruneRecord(path, True, error='has no "keep" key (a list of compute capabilities, or null)')
    keep = doc["keep"]
    if keep is None:
        return PruneRecord(path, True)
    if not isinstance(keep, list) or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0
                                             for k in keep):
        return PruneRecord(path, True, error=f'"keep" is {keep!r}, not a list of compute capabilities like [80, 90]')
    return PruneRecord(path, True, sorted(keep))


def spill_path_from_env(environ: dict | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return env.get("RAPIDS_SPILL_DIR") or None


def cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs the cgroup's quota allows (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us), or None."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def available_cpus() -> int:
    """CPUs as distributed counts them for --nworkers -1 / auto: the affinity mask, bounded by the
    cgroup's CPU quota (docker run --cpus), rounded up."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    quota = cpu_quota()
    return max(1, min(count, -(-int(quota * 1000) // 1000))) if quota else max(1, count)


@dataclass(frozen=True)
class CacheDir:
    what: str       # whose cache (CuPy's kernel cache, ...)
    env: str        # the variable that places it
    path: str
    writable: bool  # this uid can create it (its nearest existing ancestor is writable and searchable)


# Caches libraries of the env write at run time, and where (the image sets each under /tmp, the
# hardened profile's tmpfs): CuPy creates its kernel cache at import and fails on a read-only path.
CACHE_ENVS = (("CuPy's kernel cache", "CUPY_CACHE_DIR", "~/.cupy/kernel_cache"),
              ("numba's cache", "NUMBA_CACHE_DIR", ""),
              ("the XDG cache", "XDG_CACHE_HOME", "~/.cache"),
              ("matplotlib's config and cache", "MPLCONFIGDIR", "~/.config/matplotlib"))


def _creatable(path: str) -> bool:
    here = Path(path)
    while not here.exists():
        if here.parent == here:
            return False
        here = here.parent
    return here.is_dir() and os.access(here, os.W_OK | os.X_OK)


def read_cache_dirs(environ: dict | None = None) -> list[CacheDir]:
    env = os.environ if environ is None else environ
    out = []
    for what, name, default in CACHE_ENVS:
        path = env.get(name) or (os.path.expanduser(default) if default else "")
        if path:
            out.append(CacheDir(what, name, path, _creatable(path)))
    return out


def _cwd() -> tuple[str, bool]:
    try:
        cwd = os.getcwd()
    except OSError:
        return "(unknown)", False
    return cwd, os.access(cwd, os.R_OK | os.X_OK)


def host_memory() -> tuple[int | None, int | None]:
    """(MemTotal, MemAvailable) of the machine, or Nones."""
    try:
        return read_meminfo(Path("/proc/meminfo").read_text())
    except OSError:
        return None, None


def declared_limit() -> int | None:
    """$RAPIDS_MEMORY_LIMIT, or None (a bad value is refused by the doctor's finding, not by a crash)."""
    try:
        return parse_bytes(os.environ.get(DECLARED_LIMIT_ENV) or None)
    except ValueError:
        return None


def cgroup_id(cg: CgroupMemory) -> str:
    """Which cgroup this is, the same in every worker process that shares it: host name and path."""
    return f"{socket.gethostname()}:{cg.path or '/'}"


def collect(spill_path: str | None = None) -> Facts:
    """The facts of this process; `spill_path`: the directory the command will spill to (else
    $RAPIDS_SPILL_DIR)."""
    host_total, host_avail = host_memory()
    try:
        vfs = os.statvfs("/dev/shm")
        shm = vfs.f_blocks * vfs.f_frsize
    except OSError:
        shm = None
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    cwd, cwd_ok = _cwd()
    declared = declared_limit()
    return Facts(uid=os.getuid(), gid=os.getgid(), groups=sorted(os.getgroups()), cgroup=read_cgroup(),
                 host_total=host_total, host_available=host_avail, shm_bytes=shm,
                 memlock_soft=None if soft == resource.RLIM_INFINITY else soft, cpus=available_cpus(),
                 gpu=read_gpus(), spill_dir=read_spill_dir(spill_path or spill_path_from_env()),
                 spill_config=read_spill_config(), prune=read_prune_record(), cwd=cwd, cwd_usable=cwd_ok,
                 declared_limit=declared, cuda_image="NVIDIA_REQUIRE_CUDA" in os.environ, caches=read_cache_dirs())


def parse_bytes(text: str | None) -> int | None:
    """Pure: a size as the runtime's own flags take it: k/m/g/t and kib/mib/gib/tib binary, kb/mb/gb/tb
    decimal, a bare number in bytes."""
    if text in (None, ""):
        return None
    t = str(text).strip().lower().replace(" ", "")
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9,
             "tb": 10**12, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "b": 1}
    for unit, mult in units.items():
        if t.endswith(unit):
            return int(float(t[: -len(unit)]) * mult)
    return int(float(t))


DECLARED_LIMIT_ENV = "RAPIDS_MEMORY_LIMIT"


def _b(n: int | None) -> str:
    if n is None:
        return "unlimited"
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


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


def _keyed(path: Path) -> dict[str, int] | None:
    try:
        return memory_stat(path.read_text())
    except OSError:
        return None


def memory_events(cg: CgroupMemory) -> dict[str, int] | None:
    """The cgroup's OOM counters: v2 memory.events (low, high, max, oom, oom_kill), v1
    memory.oom_control (oom_kill, under_oom); None when they cannot be read."""
    if not cg.path:
        return None
    own = Path(cg.path)
    if cg.version == 2:
        return _keyed(own / "memory.events")
    found = _keyed(own / "memory.oom_control")
    return {k: v for k, v in found.items() if k in ("oom_kill", "under_oom")} if found is not None else None


def memory_stat_of(cg: CgroupMemory) -> dict[str, int] | None:
    """The cgroup's memory.stat, parsed (None when it cannot be read); read once per scrape."""
    return _keyed(Path(cg.path) / "memory.stat") if cg.path else None


def memory_kinds(cg: CgroupMemory, stat: dict[str, int] | None = None) -> dict[str, int] | None:
    """What the cgroup's memory is: anon, file (page cache), shmem (tmpfs, /dev/shm) in bytes;
    v1's rss/cache/shmem read as the same three. None when memory.stat cannot be read."""
    found = stat if stat is not None else memory_stat_of(cg)
    if found is None:
        return None
    if cg.version == 2:
        return {k: found[k] for k in ("anon", "file", "shmem") if k in found}
    return {name: found[k] for name, k in (("anon", "rss"), ("file", "cache"), ("shmem", "shmem")) if k in found}


def working_set(cg: CgroupMemory, stat: dict[str, int] | None = None) -> int | None:
    """The memory the cgroup cannot give back without killing: usage less its inactive page cache
    (what kubelet evicts by). A worker that spills fills the cgroup with page cache up to its limit
    (measured: 99.9 % of memory.max, healthy); the kernel reclaims that before it kills, so alerts
    compare this, not memory.current, with the limit. None when memory.stat cannot be read."""
    if cg.usage is None:
        return None
    found = stat if stat is not None else memory_stat_of(cg)
    if found is None:
        return None
    inactive = found.get("inactive_file" if cg.version == 2 else "total_inactive_file", found.get("inactive_file"))
    return None if inactive is None else max(0, cg.usage - inactive)


def fs_bytes(path: str) -> tuple[int | None, int | None]:
    """(size, free) in bytes of the filesystem holding `path` (free as an unprivileged user sees it)."""
    try:
        vfs = os.statvfs(path)
    except OSError:
        return None, None
    return vfs.f_blocks * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize
