"""rapids-doctor: what this container may use, and whether spilling can work.

Reads the memory the container may really use (cgroup v2 memory.max / memory.high, cgroup v1
memory.limit_in_bytes, host RAM), /dev/shm, the memlock ulimit, the GPUs through NVML when it is
importable (memory, MIG, compute capability), the spill directory (owner, mode, filesystem, free
space), the dask spill configuration and the image's prune record (which GPU architectures' device
code the build kept); derives dask/dask-cuda/RMM settings that fit; prints both views of memory.
A GPU that the kept device code cannot run on is FATAL.

`--preflight` (run by the entrypoint) prints nothing when all is well and stops the container
with one FATAL line when spilling cannot work. `--json` prints the whole diagnosis.

Disk spill is required only where something spills to disk: dask workers (`dask worker`,
`dask-worker`, `dask cuda worker`, `dask-cuda-worker`) and `rapids-smoke`. The entrypoint hands
the doctor the command it is about to run (`rapids-doctor --preflight -- CMD ...`); for any other
command (`python job.py`: cuDF spills to host memory and needs no disk) an unusable spill dir is
a WARNING. RAPIDS_DISK_SPILL=required|optional overrides that choice, `--disk-spill` overrides both.

Shape: `read_*` functions do the I/O and return plain records; `derive`, `findings_for` and
`render_table` are pure functions over those records (unit-tested on fake cgroup trees).
Standard library only at import time: the doctor must run in a broken env too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import resource
import shlex
import stat
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .cuda_rule import code_runs_on

FATAL_EXIT = 3
UNLIMITED = 2**62          # cgroup v1 says "unlimited" with a page-rounded 2^63-1
MiB = 2**20
GiB = 2**30

# Memory a worker process may not take: scheduler, client, nanny and the interpreter itself.
HEADROOM_MIN = 384 * MiB
HEADROOM_FRACTION = 0.15
# A worker with less than this cannot hold one partition and its spill bookkeeping.
MIN_WORKER_MEMORY = 256 * MiB
DEVICE_FRACTION = 0.8      # dask-cuda's own default share of the device
RMM_POOL_FRACTION = 0.9
FREE_FRACTION = 0.95       # of the device memory free now: the rest for the CUDA context and the allocator
RMM_POOL_STEP = 256 * MiB

# The build's prune record: {"keep": [80, 90], ...} lists the compute capabilities (major*10+minor)
# whose device code the image kept; "keep": null, or no file, means nothing was pruned.
PRUNE_RECORD_ENV = "RAPIDSHIP_PRUNE_RECORD"
DEFAULT_PRUNE_RECORD = "/opt/rapidship/prune.json"

RAM_FSTYPES = ("tmpfs", "ramfs")  # a "disk" tier there is memory of the same cgroup: no disk spill at all
MIN_SPILL_FREE = 256 * 2**20     # less free room than this in the spill dir: the first spill hits ENOSPC
WARN_FSTYPES = {"overlay": "the container's writable layer: spilling there fills the node's image disk",
                "tmpfs": "RAM: spilling there counts against the same memory limit it is meant to relieve",
                "ramfs": "RAM: spilling there counts against the same memory limit it is meant to relieve"}


# ---- records ----

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


@dataclass(frozen=True)
class Derived:
    memory_budget: int | None       # what the container may really use (min of the caps and host RAM)
    budget_source: str
    headroom: int | None
    worker_memory_limit: int | None  # per worker, for n_workers
    n_workers: int
    device_memory_limit: int | None  # per GPU (or MIG slice)
    device_source: str
    rmm_pool_size: int | None


@dataclass(frozen=True)
class Finding:
    level: str      # FATAL, WARNING, OK
    topic: str
    message: str
    # the finding means nothing can spill to disk: FATAL where disk spill is required, otherwise a
    # WARNING that --preflight still prints (once, on stderr)
    disk_spill: bool = False


DISK_SPILL_ENV = "RAPIDS_DISK_SPILL"
DISK_SPILL_CHOICES = ("required", "optional", "auto")


@dataclass(frozen=True)
class Intent:
    """What the container is about to run, as far as disk spill and memory limits go."""

    command: list[str] = field(default_factory=list)
    program: str | None = None      # "dask worker", "dask cuda worker", "rapids-smoke"; None: anything else
    disk_spill: str = "required"    # required | optional
    why: str = "no command given: the full check"
    memory_limit: int | None = None  # bytes per worker the command asks for (None: none, auto or a fraction)
    workers: int = 1                # worker processes that share the container, each with memory_limit
    limit_source: str = ""          # where memory_limit came from, for the message
    error: str | None = None        # a bad RAPIDS_DISK_SPILL / --disk-spill value
    ucx: str = ""                   # the flag that asks for UCX comms ("" = none): needs ucxx and /dev/shm
    rdma: str = ""                  # the flag that asks for InfiniBand / RDMA: needs memlock unlimited
    spill_dir: str | None = None    # the directory the command spills to (--local-directory, --spill-dir)
    device_limit: int | None = None  # device memory per worker the command asks for (--device-memory-limit)
    device_source: str = ""
    judged: bool = True             # False: a shell line that could not be read (said in `why`)


# ---- readers (I/O edge) ----

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
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
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
            gpus.append(Gpu(i, _text(pynvml.nvmlDeviceGetName(h)), int(mem.total), int(mem.free), mig_on, slices,
                            cc_major, cc_minor, uuid))
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


def _cwd() -> tuple[str, bool]:
    try:
        cwd = os.getcwd()
    except OSError:
        return "(unknown)", False
    return cwd, os.access(cwd, os.R_OK | os.X_OK)


def collect(spill_path: str | None = None) -> Facts:
    """The facts of this process; `spill_path`: the directory the command will spill to (else
    $RAPIDS_SPILL_DIR)."""
    try:
        host_total, host_avail = read_meminfo(Path("/proc/meminfo").read_text())
    except OSError:
        host_total = host_avail = None
    try:
        vfs = os.statvfs("/dev/shm")
        shm = vfs.f_blocks * vfs.f_frsize
    except OSError:
        shm = None
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    cwd, cwd_ok = _cwd()
    try:
        declared = parse_bytes(os.environ.get(DECLARED_LIMIT_ENV) or None)
    except ValueError:
        declared = None  # a bad value is refused by the finding below, not by a crash here
    return Facts(uid=os.getuid(), gid=os.getgid(), groups=sorted(os.getgroups()), cgroup=read_cgroup(),
                 host_total=host_total, host_available=host_avail, shm_bytes=shm,
                 memlock_soft=None if soft == resource.RLIM_INFINITY else soft, cpus=available_cpus(),
                 gpu=read_gpus(), spill_dir=read_spill_dir(spill_path or spill_path_from_env()),
                 spill_config=read_spill_config(), prune=read_prune_record(), cwd=cwd, cwd_usable=cwd_ok,
                 declared_limit=declared)


# ---- pure core ----

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


_DASK_UNITS = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "ki": 2**10, "mi": 2**20, "gi": 2**30,
               "ti": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "k": 10**3, "m": 10**6,
               "g": 10**9, "t": 10**12, "b": 1, "": 1}


def dask_memory_limit(text: str | None) -> int | None:
    """Pure: a dask worker's --memory-limit in bytes, read as dask reads it (k/m/g decimal, ki/kib binary).
    None where it is no absolute size: unset, "auto", 0 (no limit), a fraction of system memory
    (0 < x <= 1, which dask takes of the container's own limit) or something dask would refuse itself."""
    if text is None:
        return None
    t = str(text).strip().lower().replace(" ", "")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[0-9]+)?)([a-z]*)", t)
    if not m or m.group(2) not in _DASK_UNITS:
        return None
    value = float(m.group(1))
    if m.group(2) == "" and value <= 1:
        return None                 # 0 = no limit, 0 < x <= 1 = a fraction
    return int(value * _DASK_UNITS[m.group(2)])


# programs (by the name they are run as) that hold dask worker data and spill it to disk
_WORKER_PROGRAMS = {"dask-worker": "dask worker", "dask-cuda-worker": "dask cuda worker",
                    "rapids-smoke": "rapids-smoke"}
_WORKER_MODULES = {"distributed.cli.dask_worker": "dask worker", "dask_cuda.cli.dask_cuda_worker": "dask cuda worker",
                   "rapids_runtime.smoke": "rapids-smoke", "rapidship.runtime.smoke": "rapids-smoke"}
_PYTHON_OPTS_WITH_VALUE = {"-X", "-W"}


def classify(command: list[str]) -> tuple[str | None, list[str]]:
    """Pure: which disk-spilling program a command line starts, and that program's arguments.

    Knows `dask worker`, `dask cuda worker` (also `dask-worker`, `dask-cuda-worker`, `python -m dask
    worker`, `python -m distributed.cli.dask_worker`) and `rapids-smoke` (also `python -m
    rapids_runtime.smoke`), each possibly after `env VAR=value`. `dask scheduler`, `python job.py`
    and anything else: (None, []). A shell line (`sh -c "..."`) is not looked into: set
    RAPIDS_DISK_SPILL=required for such a container.
    """
    argv = unwrap(list(command))
    if not argv:
        return None, []
    prog, rest = os.path.basename(argv[0]), argv[1:]
    if re.fullmatch(r"python[0-9.]*", prog):
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] != "-m":
            i += 2 if rest[i] in _PYTHON_OPTS_WITH_VALUE else 1
        if i + 1 >= len(rest) or rest[i] != "-m":
            return None, []
        module, rest = rest[i + 1], rest[i + 2:]
        if module in _WORKER_MODULES:
            return _WORKER_MODULES[module], rest
        if module != "dask":
            return None, []
        prog = "dask"
    if prog in _WORKER_PROGRAMS:
        return _WORKER_PROGRAMS[prog], rest
    if prog == "dask":
        if rest[:2] == ["cuda", "worker"]:
            return "dask cuda worker", rest[2:]
        if rest[:1] == ["worker"]:
            return "dask worker", rest[1:]
    return None, []


# Programs that run the rest of their command line: name -> (options that take a value, how many
# plain words before the command: timeout's DURATION). A worker behind them is still a worker.
WRAPPERS = {"env": ({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}, 0),
            "nice": ({"-n", "--adjustment"}, 0), "ionice": ({"-c", "-n", "-p"}, 0),
            "timeout": ({"-s", "--signal", "-k", "--kill-after"}, 1), "nohup": (set(), 0), "exec": (set(), 0),
            "tini": ({"-p", "-e"}, 0), "dumb-init": ({"-r", "--rewrite"}, 0), "stdbuf": ({"-i", "-o", "-e"}, 0),
            "taskset": (set(), 1), "numactl": (set(), 0), "chrt": (set(), 1), "setpriv": (set(), 0),
            "catatonit": (set(), 0)}


def unwrap(argv: list[str]) -> list[str]:
    """Pure: the command behind wrappers (env VAR=x, nice -n 5, timeout 1d, tini --, dumb-init,
    exec, taskset -c 0-3, ...), however many are stacked."""
    for _ in range(8):
        if not argv or os.path.basename(argv[0]) not in WRAPPERS:
            return argv
        name = os.path.basename(argv[0])
        with_value, words = WRAPPERS[name]
        rest = argv[1:]
        while rest:
            a = rest[0]
            if a == "--":
                rest = rest[1:]
                break
            if name == "env" and "=" in a and not a.startswith("-"):
                rest = rest[1:]
            elif a in with_value:
                rest = rest[2:]
            elif a.startswith("-") and len(a) > 1:
                rest = rest[1:]
            else:
                break
        argv = rest[words:]
    return argv


SHELLS = ("sh", "bash", "dash", "ash", "zsh")
SHELL_OPERATORS = re.compile(r"[;&|<>`$()]")


def shell_command(command: list[str]) -> tuple[list[str] | None, bool]:
    """Pure: (the argv of `sh -c "LINE"`, True) when LINE is one plain command; (None, True) for a
    shell line with operators, variables or substitutions, which cannot be judged; (None, False)
    when `command` is no shell line at all."""
    argv = unwrap(list(command))
    if len(argv) < 3 or os.path.basename(argv[0]) not in SHELLS or not argv[1].startswith("-") or "c" not in argv[1]:
        return None, False
    line = argv[2].strip()
    if line.startswith("exec "):
        line = line[5:]
    if SHELL_OPERATORS.search(line):
        return None, True
    try:
        return shlex.split(line), True
    except ValueError:
        return None, True


def _option(args: list[str], *names: str) -> str | None:
    """Pure: the value of the last `--name value` / `--name=value` among args."""
    value = None
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                value = args[i + 1]
            elif a.startswith(n + "="):
                value = a[len(n) + 1:]
    return value


def _count(text: str | None, default: int) -> int:
    try:
        n = int(str(text))
    except ValueError:
        return default
    return n if n > 0 else default


def dask_nworkers(text: str | None, cpus: int) -> int:
    """Pure: the worker processes `dask worker --nworkers X` starts, resolved as distributed does:
    a count; -1 = one per CPU (negative n: CPUs + 1 + n); "auto": n <= 4 CPUs one each, else the
    smallest factor of n at least sqrt(n)."""
    if text is None:
        return 1
    if str(text).strip() == "auto":
        if cpus <= 4:
            return max(1, cpus)
        return min(f for f in range(1, cpus + 1) if cpus % f == 0 and f * f >= cpus)
    try:
        n = int(str(text))
    except ValueError:
        return 1
    return max(1, cpus + 1 + n) if n < 0 else max(1, n)


def _worker_memory(program: str | None, args: list[str], gpu_count: int, env,
                   cpus: int = 1) -> tuple[int | None, int, str]:
    """Pure: (memory_limit per worker, workers, where it came from) for a worker command line."""
    if program == "rapids-smoke":
        raw = _option(args, "--memory-limit")
        try:
            limit = parse_bytes(raw)
        except ValueError:
            limit = None            # the smoke refuses a bad size itself
        mode = _option(args, "--mode") or "cpu"
        workers = _count(_option(args, "--workers"), 1) if mode == "cpu" else 1
        return limit, workers, "rapids-smoke --memory-limit"
    if program == "dask worker":
        limit = dask_memory_limit(_option(args, "--memory-limit"))
        return limit, dask_nworkers(_option(args, "--nworkers", "--nprocs"), cpus), "dask worker --memory-limit"
    if program == "dask cuda worker":   # one worker per visible GPU, each with --memory-limit
        limit = dask_memory_limit(_option(args, "--memory-limit"))
        visible = env.get("CUDA_VISIBLE_DEVICES")
        workers = len([d for d in visible.split(",") if d.strip()]) if visible else gpu_count
        return limit, max(1, workers), "dask cuda worker --memory-limit"
    return None, 1, ""


UCX_FLAGS = ("--enable-tcp-over-ucx", "--enable-nvlink", "--enable-infiniband", "--enable-rdmacm")
RDMA_FLAGS = ("--enable-infiniband", "--enable-rdmacm")
UCX_MIN_SHM = 1024 * 1024 * 1024  # UCX's shared-memory transport and worker processes: --shm-size >= 1g


def ucx_wanted(program: str | None, args: list[str]) -> tuple[str, str]:
    """Pure: (the flag asking for UCX, the flag asking for RDMA) of a dask worker / scheduler command."""
    if program is None:
        return "", ""
    rdma = next((a for a in args if a.split("=")[0] in RDMA_FLAGS and not a.endswith("=False")), "")
    flag = next((a for a in args if a.split("=")[0] in UCX_FLAGS and not a.endswith("=False")), "")
    protocol = _option(args, "--protocol") or ""
    if not flag and protocol.startswith("ucx"):
        flag = f"--protocol {protocol}"
    if not flag:
        flag = next((a for a in args if a.startswith(("ucx://", "ucxx://"))), "")
    return flag, rdma


def intent_for(command: list[str] | None, environ: dict | None = None, gpu_count: int = 0,
               override: str | None = None, cpus: int = 1) -> Intent:
    """Pure: whether disk spill is required for this command, and the memory limit it asks for.

    Order: `override` (--disk-spill), then $RAPIDS_DISK_SPILL, then the command (required for dask
    workers and rapids-smoke, optional for anything else); with no command at all, required.
    """
    env = os.environ if environ is None else environ
    command = list(command or [])
    program, args = classify(command)
    inner, is_shell = shell_command(command)
    if program is None and inner is not None:
        program, args = classify(inner)
    judged = not (is_shell and inner is None)
    limit, workers, source = _worker_memory(program, args, gpu_count, env, cpus)
    spill = _option(args, "--local-directory", "--spill-dir") if program else None
    try:
        device = parse_bytes(_option(args, "--device-memory-limit")) if program else None
    except ValueError:
        device = None
    device_source = f"{program} --device-memory-limit" if device else ""
    shown = shlex.join(command) if command else ""
    if len(shown) > 80:
        shown = shown[:77] + "..."
    error = None
    choice, origin = "auto", ""
    for raw, name in ((override, "--disk-spill"), (env.get(DISK_SPILL_ENV), DISK_SPILL_ENV)):
        value = (raw or "").strip().lower()
        if not value:
            continue
        if value not in DISK_SPILL_CHOICES:
            error = (f"{name}={raw!r} is not one of {', '.join(DISK_SPILL_CHOICES)}: say whether this container "
                     "needs disk spill (required), may run without it (optional) or decide from the command (auto)")
            break
        choice, origin = value, name
        break
    if choice != "auto":
        disk, why = choice, f"{origin}={choice}"
    elif not command:
        disk, why = "required", "no command given: the full check"
    elif program:
        disk, why = "required", f"`{shown}` is {'the spill smoke' if program == 'rapids-smoke' else 'a ' + program}"
    elif not judged:
        disk, why = "optional", (f"`{shown}` is a shell line with operators or variables that could not be judged "
                                 f"(a dask worker inside it is not checked: {DISK_SPILL_ENV}=required insists)")
    else:
        disk, why = "optional", f"`{shown}` is no dask worker and no rapids-smoke"
    ucx, rdma = ucx_wanted(program, args)
    return Intent(command, program, disk, why, limit, workers, source, error, ucx, rdma, spill, device,
                  device_source, judged)


DECLARED_LIMIT_ENV = "RAPIDS_MEMORY_LIMIT"


def memory_budget(cg: CgroupMemory, host_total: int | None, declared: int | None = None) -> tuple[int | None, str]:
    """The memory this container may really use: the tightest of $RAPIDS_MEMORY_LIMIT (a limit the
    cgroup view cannot show: a v2 parent's behind a private cgroup namespace), memory.high, the v1
    soft limit (distributed sizes workers by it too), the cap (the tightest on the way up) and host RAM."""
    options = [(v, name) for v, name in ((declared, f"${DECLARED_LIMIT_ENV}"), (cg.high, "cgroup memory.high"),
                                         (cg.soft_limit, "cgroup v1 memory.soft_limit_in_bytes"),
                                         (cg.limit, f"cgroup v{cg.version} limit"),
                                         (host_total, "host RAM")) if v]
    if not options:
        return None, "unknown"
    return min(options)


def derive(f: Facts, n_workers: int = 1) -> Derived:
    budget, source = memory_budget(f.cgroup, f.host_total, f.declared_limit)
    headroom = worker = None
    if budget is not None:
        headroom = max(HEADROOM_MIN, int(budget * HEADROOM_FRACTION))
        worker = max(0, budget - headroom) // max(1, n_workers)
    device = pool = None
    dev_source = "no GPU visible"
    if f.gpu.available and f.gpu.gpus:
        sizes = [(s["total"], s["free"], f"MIG slice {g.index}/{s['index']}") for g in f.gpu.gpus for s in g.mig_slices]
        sizes = sizes or [(g.total, g.free, f"GPU {g.index} {g.name}") for g in f.gpu.gpus]
        total, free, dev_source = min(sizes)
        # another process holding part of the GPU: size to what is free, not to what exists
        usable = int(free * FREE_FRACTION)
        device = min(int(total * DEVICE_FRACTION), usable)
        pool = min(int(total * RMM_POOL_FRACTION), usable) // RMM_POOL_STEP * RMM_POOL_STEP
        if usable < total * DEVICE_FRACTION:
            dev_source += f", only {_b(free)} of {_b(total)} free"
    return Derived(budget, source, headroom, worker, n_workers, device, dev_source, pool)


def covered(cc_major: int, cc_minor: int, keep: list[int] | tuple[int, ...]) -> bool:
    """Pure: can a GPU of compute capability major.minor run device code kept for `keep`? (the
    rule is cuda_rule.code_runs_on, the one the pruner keeps code by)"""
    return any(code_runs_on(k, cc_major * 10 + cc_minor) for k in keep)


def _sm_list(keep: list[int]) -> str:
    return ", ".join(f"sm_{k}" for k in keep) or "no architecture"


def arch_checks(pr: PruneRecord, gpu: GpuView) -> list[tuple[str, str]]:
    """Pure: (level, sentence) for the visible GPUs against the device code the image kept; the
    doctor's findings and the GPU guard (gpu_guard.py, at the first CUDA import) both come from here."""
    if pr.error:
        return [("FATAL", f"prune record {pr.path} {pr.error}: which GPUs this image's device code runs on is "
                          f"unknown; rebuild the image, or point {PRUNE_RECORD_ENV} at its record")]
    if pr.keep is None or not gpu.available:
        return []
    out = []
    for g in gpu.gpus:
        if g.cc_major is None or g.cc_minor is None:
            out.append(("WARNING", f"GPU {g.index} {g.name}: NVML did not report its compute capability, so it is "
                                   f"not checked against this image's device code ({_sm_list(pr.keep)})"))
        elif not covered(g.cc_major, g.cc_minor, pr.keep):
            out.append(("FATAL", f"GPU {g.index} {g.name} has compute capability {g.cc_major}.{g.cc_minor}, but "
                                 f"this image's device code was pruned to {_sm_list(pr.keep)}: no kernel can run "
                                 f"there; rebuild with gpu_archs including {g.cc_major * 10 + g.cc_minor} "
                                 "(variants.yaml) or run on a covered GPU"))
    return out


def arch_problems(pr: PruneRecord, gpu: GpuView) -> list[str]:
    return [sentence for level, sentence in arch_checks(pr, gpu) if level == "FATAL"]


def _arch_findings(f: Facts) -> list[Finding]:
    return [Finding(level, "gpu-archs", sentence) for level, sentence in arch_checks(f.prune, f.gpu)]


def _fraction_off(value) -> bool:
    return value is False or value in ("false", "False", "0", 0)


def findings_for(f: Facts, d: Derived, intent: Intent | None = None) -> list[Finding]:
    """Pure: what is wrong (FATAL stops the container), what is risky (WARNING).

    `intent` is the command about to run (default: none, the full check): where it needs no disk
    spill, what would stop a disk spill is a WARNING with `disk_spill` set instead of a FATAL.
    """
    intent = intent or Intent()
    sd, sc = f.spill_dir, f.spill_config
    required = intent.disk_spill == "required"
    # worker sizing speaks only where workers run: no command (the full check) or a worker / smoke
    runs_workers = intent.program is not None or not intent.command

    def disk(message: str, fatal: bool = True) -> Finding:
        if not fatal:
            return Finding("WARNING", "spill", message)
        if required:
            return Finding("FATAL", "spill", message, disk_spill=True)
        return Finding("WARNING", "spill", f"{message}; not fatal: {intent.why} (cuDF spills to host memory "
                       f"without a disk; {DISK_SPILL_ENV}=required insists)", disk_spill=True)

    # the GPUs against the device code the image kept: first, since without it nothing can run
    out: list[Finding] = _arch_findings(f)
    if intent.error:
        out.append(Finding("FATAL", "spill", intent.error))
    # the spill directory
    if sd.path is None:
        out.append(disk("no spill directory configured: set RAPIDS_SPILL_DIR to a "
                        "host-mounted directory (docker run -v HOST_DIR:/spill -e RAPIDS_SPILL_DIR=/spill)"))
    elif not sd.exists:
        out.append(disk(f"spill dir {sd.path} does not exist: mount a host directory "
                        f"there (docker run -v HOST_DIR:{sd.path})"))
    elif sd.read_only:
        out.append(disk(f"spill dir {sd.path} is on a read-only filesystem: no spill "
                        f"directory is mounted there; mount a host directory (docker run -v HOST_DIR:{sd.path})"))
    elif not sd.writable:
        out.append(disk(f"spill dir {sd.path} is not writable by uid {f.uid} "
                        f"(owner {sd.owner_uid}:{sd.owner_gid}, mode {sd.mode:04o}): chown it to the run uid, "
                        "mode 0700"))
    else:
        out.extend(_spill_dir_notes(f, disk))
    # dask's own spill switches
    if sc.dask_available:
        if _fraction_off(sc.target) and _fraction_off(sc.spill):
            # under dask-cuda with a GPU, DeviceHostFile still spills: never fatal there
            out.append(disk("dask spilling is disabled (distributed.worker.memory.target and "
                            ".spill are false): data beyond the worker's memory_limit cannot leave memory; unset "
                            "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET/__SPILL or set them to 0.6/0.7",
                            fatal=not (f.gpu.gpus and sc.dask_cuda_available)))
        above = [f"{name} {value}" for name, value in (("target", sc.target), ("spill", sc.spill))
                 if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1]
        if above and runs_workers:
            out.append(Finding("FATAL", "spill", f"dask's spill threshold(s) {', '.join(above)} (fractions of the "
                               "worker's memory_limit) lie above the limit itself: the worker never spills before the "
                               "kernel OOM-kills it; set distributed.worker.memory.target / .spill below 1 (0.6 / 0.7), "
                               "e.g. unset DASK_DISTRIBUTED__WORKER__MEMORY__TARGET / __SPILL"))
        if sd.path and sc.temporary_directory and os.path.realpath(sc.temporary_directory) != os.path.realpath(sd.path):
            out.append(Finding("WARNING", "spill", f"dask temporary-directory {sc.temporary_directory} is not the "
                               f"spill dir {sd.path}: workers spill where dask says, not where the mount is"))
        if sd.path and not sc.temporary_directory:
            out.append(Finding("WARNING", "spill", "dask temporary-directory is unset: workers spill under their "
                               "working directory unless given local_directory; set DASK_TEMPORARY_DIRECTORY="
                               f"{sd.path}"))
    # cuDF partitions are only measured (and so spilled) where dask_cudf registered its sizeof.
    # distributed.worker.preload does not count: LocalCUDACluster passes its own preload list
    # (dask_cuda.initialize), so the config's is never read; measured on an H200 (docs/gpu-smoke.md).
    if sc.cudf_available and sc.dask_cuda_available and "dask_cudf" not in sc.pre_import:
        out.append(Finding("WARNING", "cudf", "cuDF is installed but workers are not told to import dask_cudf: "
                           "cuDF partitions then have no sizeof, never fill the device tier and never spill; "
                           "pass LocalCUDACluster(pre_import=['dask_cudf']) / dask cuda worker --pre-import "
                           "dask_cudf, or set RAPIDS_PRE_IMPORT=dask_cudf"))
    # memory
    out.extend(memory_limit_findings(d, intent))
    if d.memory_budget is None:
        out.append(Finding("WARNING", "memory", "no memory limit found (no cgroup limit, no /proc/meminfo)"))
    elif d.worker_memory_limit is not None and d.worker_memory_limit < MIN_WORKER_MEMORY and runs_workers:
        out.append(Finding("FATAL", "memory", f"memory limit too small: {_b(d.memory_budget)} ({d.budget_source}) "
                           f"leaves {_b(d.worker_memory_limit)} per worker after {_b(d.headroom)} headroom; give the "
                           f"container at least {_b(MIN_WORKER_MEMORY * d.n_workers + HEADROOM_MIN)} (--memory)"))
    cg = f.cgroup
    if cg.limit is None and cg.version is not None:
        out.append(Finding("WARNING", "memory", "the container has no memory cap: workers size themselves from "
                           "host RAM and the kernel OOM killer, not spilling, decides what survives"))
    if cg.swap_unlimited:
        out.append(Finding("WARNING", "memory", f"swap is unlimited (--memory-swap -1): beyond the {_b(cg.limit)} cap "
                           "the container swaps without bound instead of spilling, and the cap is no cap "
                           "(--memory-swap = --memory)"))
    if cg.limit and cg.swap_limit and cg.version == 1 and cg.swap_limit > cg.limit:
        out.append(Finding("WARNING", "memory", f"memory+swap limit {_b(cg.swap_limit)} exceeds the memory limit "
                           f"{_b(cg.limit)}: the container swaps instead of spilling (--memory-swap = --memory)"))
    if cg.limit and cg.swap_limit and cg.version == 2 and cg.swap_limit > 0:
        out.append(Finding("WARNING", "memory", f"memory.swap.max is {_b(cg.swap_limit)}: the container swaps "
                           "instead of spilling (--memory-swap = --memory)"))
    out.extend(device_findings(f, d, intent))
    if not f.cwd_usable and runs_workers:
        out.append(Finding("FATAL", "user", f"the working directory {f.cwd} cannot be entered by uid {f.uid} gid "
                           f"{f.gid} (groups {','.join(map(str, f.groups)) or '-'}): dask's nanny cannot start there; "
                           "run with --user UID:0 (the image's home is group-0 writable, as for an arbitrary uid), "
                           "or --group-add 0, or -w a directory it can use"))
    out.extend(ucx_findings(f, intent))  # with UCX asked for, a small /dev/shm is FATAL there
    if not intent.ucx and f.shm_bytes is not None and f.shm_bytes < 256 * MiB and (f.gpu.gpus or sc.dask_available):
        out.append(Finding("WARNING", "shm", f"/dev/shm is {_b(f.shm_bytes)}: multiprocessing and UCX/NCCL need "
                           "more (--shm-size=1g)"))
    if f.gpu.gpus and f.memlock_soft is not None and not intent.rdma:
        out.append(Finding("WARNING", "memlock", f"memlock ulimit is {_b(f.memlock_soft)}: pinned host buffers "
                           "for device<->host copies need --ulimit memlock=-1"))
    return out


def device_findings(f: Facts, d: Derived, intent: Intent) -> list[Finding]:
    """Pure: a device limit the command asks for above what the GPU has is FATAL (nothing ever
    spills from the device: allocations fail first); device memory another process holds is said."""
    out = []
    sizes = [(s["total"], s["free"], f"MIG slice {g.index}/{s['index']} of {g.name}") for g in f.gpu.gpus
             for s in g.mig_slices] or [(g.total, g.free, f"GPU {g.index} {g.name}") for g in f.gpu.gpus]
    if not sizes:
        return out
    total, free, name = min(sizes)
    if intent.device_limit is not None and intent.device_limit > total:
        out.append(Finding("FATAL", "device-limit", f"{intent.device_source} {_b(intent.device_limit)} is above what "
                           f"{name} has ({_b(total)}): the device tier never fills, so nothing spills and "
                           f"allocations fail first; give at most {_b(d.device_memory_limit)}"))
    elif intent.device_limit is not None and intent.device_limit > free:
        out.append(Finding("WARNING", "device-limit", f"{intent.device_source} {_b(intent.device_limit)} is above the "
                           f"{_b(free)} free on {name} now (another process holds the rest)"))
    if free * FREE_FRACTION < total * DEVICE_FRACTION:
        out.append(Finding("WARNING", "gpu", f"{name} has only {_b(free)} of {_b(total)} free (another process holds "
                           f"the rest): the device limit and RMM pool are sized to what is free "
                           f"({_b(d.device_memory_limit)})"))
    return out


def ucx_findings(f: Facts, intent: Intent) -> list[Finding]:
    """Pure: what a worker command asking for UCX (its `intent.ucx` flag) needs, each missing piece
    one FATAL: ucxx + distributed-ucxx in the image, a /dev/shm of at least 1 GiB (docker's default
    is 64 MiB), and for InfiniBand / RDMA an unlimited memlock ulimit (registered memory is pinned)."""
    if not intent.ucx:
        return []
    out = []
    if not f.spill_config.ucx_available:
        out.append(Finding("FATAL", "ucx", f"{intent.ucx} asks for UCX, but ucxx / distributed-ucxx are not "
                           "importable in this image: use a RAPIDS image with UCX (docs/cluster.md) or --protocol tcp"))
    if f.shm_bytes is not None and f.shm_bytes < UCX_MIN_SHM:
        out.append(Finding("FATAL", "shm", f"/dev/shm is {_b(f.shm_bytes)}: {intent.ucx} needs at least "
                           f"{_b(UCX_MIN_SHM)} for UCX's shared-memory transport (docker run --shm-size=8g)"))
    if intent.rdma and f.memlock_soft is not None:
        out.append(Finding("FATAL", "memlock", f"memlock ulimit is {_b(f.memlock_soft)}: {intent.rdma} registers "
                           "(pins) host memory; run with --ulimit memlock=-1"))
    return out


def memory_limit_findings(d: Derived, intent: Intent) -> list[Finding]:
    """Pure: a worker memory_limit the command asks for, against what the container may use.

    Workers x memory_limit above the memory budget: FATAL, since dask spills only once a worker
    nears its memory_limit and the kernel OOM-kills it first. Within the budget but into the
    headroom the scheduler, client and nanny need: a WARNING.
    """
    if intent.memory_limit is None or d.memory_budget is None:
        return []
    total = intent.memory_limit * intent.workers
    asked = (f"{intent.limit_source} {intent.memory_limit} B ({_b(intent.memory_limit)})"
             + (f" x {intent.workers} workers = {total} B ({_b(total)})" if intent.workers > 1 else ""))
    fit = max(0, d.memory_budget - (d.headroom or 0)) // max(1, intent.workers)
    if total > d.memory_budget:
        return [Finding("FATAL", "memory-limit", f"worker memory limit above the container's memory budget: {asked} > "
                        f"{d.memory_budget} B ({_b(d.memory_budget)}, {d.budget_source}); the kernel OOM-kills a "
                        f"worker before it spills; give each worker at most {fit} B ({_b(fit)}) or the container "
                        "more memory (--memory)")]
    if d.headroom and total > d.memory_budget - d.headroom:
        return [Finding("WARNING", "memory-limit", f"{asked} leaves less than {_b(d.headroom)} of the memory "
                        f"budget {_b(d.memory_budget)} ({d.budget_source}) to the scheduler, client and nanny; "
                        f"{fit} B ({_b(fit)}) per worker fits")]
    return []


def _spill_dir_notes(f: Facts, disk) -> list[Finding]:
    sd = f.spill_dir
    out = []
    if sd.mode is not None:
        if sd.mode & 0o777 == 0o700:
            pass
        elif sd.mode & 0o777 == 0o770 and sd.owner_gid == 0 and 0 in ([f.gid] + f.groups):
            out.append(Finding("OK", "spill", "spill dir mode 0770 with group 0: accepted, so an arbitrary uid "
                               "in group 0 can spill (0700 owned by the run uid is tighter)"))
        elif sd.mode & 0o007:
            out.append(Finding("WARNING", "spill", f"spill dir {sd.path} is mode {sd.mode:04o}: other users can "
                               "read spilled data; use 0700 owned by the run uid"))
        else:
            out.append(Finding("WARNING", "spill", f"spill dir {sd.path} is mode {sd.mode:04o}, expected 0700 "
                               "owned by the run uid"))
    if sd.fstype in RAM_FSTYPES:
        out.append(disk(f"spill dir {sd.path} is on {sd.fstype}, {WARN_FSTYPES[sd.fstype]}: the disk tier would be "
                        "memory charged to the same cgroup; bind-mount a host disk there"))
    elif sd.fstype in WARN_FSTYPES:
        out.append(Finding("WARNING", "spill", f"spill dir {sd.path} is on {sd.fstype}, {WARN_FSTYPES[sd.fstype]}; "
                           "bind-mount a host disk there"))
    if sd.free_bytes is not None and sd.free_bytes < MIN_SPILL_FREE:
        out.append(disk(f"spill dir {sd.path} has {_b(sd.free_bytes)} free: a spill would fail at once with ENOSPC; "
                        f"give it at least {_b(MIN_SPILL_FREE)}, better twice the memory limit"))
    elif sd.free_bytes is not None and f.cgroup.limit and sd.free_bytes < 2 * f.cgroup.limit:
        out.append(Finding("WARNING", "spill", f"spill dir has {_b(sd.free_bytes)} free, less than twice the "
                           f"memory limit ({_b(f.cgroup.limit)})"))
    return out


def diagnose(f: Facts, n_workers: int = 1, intent: Intent | None = None) -> dict:
    """Pure: the whole report as JSON-ready data. `warnings` are what --preflight prints besides a
    FATAL: what stops a disk spill where the command needs none."""
    intent = intent or Intent()
    d = derive(f, n_workers)
    findings = findings_for(f, d, intent)
    return {"facts": asdict(f), "derived": asdict(d), "intent": asdict(intent),
            "findings": [asdict(x) for x in findings],
            "fatal": [x.message for x in findings if x.level == "FATAL"],
            "warnings": [x.message for x in findings if x.level == "WARNING" and x.disk_spill],
            "ok": not any(x.level == "FATAL" for x in findings)}


def _b(n: int | None) -> str:
    if n is None:
        return "unlimited"
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def render_table(report: dict) -> str:
    """Pure: one screen, no third-party libraries: both views of memory, the spill dir, the settings."""
    f, d = report["facts"], report["derived"]
    cg, gpu, sd, sc = f["cgroup"], f["gpu"], f["spill_dir"], f["spill_config"]
    rows: list[tuple[str, str, str]] = []
    add = lambda section, key, value: rows.append((section, key, str(value)))  # noqa: E731
    add("process", "uid / gid / groups", f"{f['uid']} / {f['gid']} / {','.join(map(str, f['groups'])) or '-'}")
    add("process", "cpus", f["cpus"])
    ver = f"v{cg['version']}" if cg["version"] else "none"
    add("memory (cgroup)", f"limit ({ver})", _b(cg["limit"]))
    if cg["version"] == 2:
        add("memory (cgroup)", "memory.high", _b(cg["high"]))
    if cg["version"] == 1:
        add("memory (cgroup)", "soft limit (reservation)", _b(cg["soft_limit"]) if cg["soft_limit"] else "-")
    add("memory (cgroup)", "swap limit", "unlimited" if cg["swap_unlimited"] else
        (_b(cg["swap_limit"]) if cg["swap_limit"] is not None else "-"))
    add("memory (cgroup)", "usage / peak", f"{_b(cg['usage']) if cg['usage'] is not None else '-'} / "
        f"{_b(cg['peak']) if cg['peak'] is not None else '-'}")
    add("memory (host)", "total / available", f"{_b(f['host_total'])} / {_b(f['host_available'])}")
    add("memory (host)", "/dev/shm", _b(f["shm_bytes"]))
    add("memory (host)", "memlock ulimit", _b(f["memlock_soft"]))
    if gpu["available"]:
        add("memory (GPU)", "driver / CUDA", f"{gpu['driver_version']} / {gpu['cuda_version']}")
        for g in gpu["gpus"]:
            cc = f", cc {g['cc_major']}.{g['cc_minor']}" if g["cc_major"] is not None else ", cc unknown"
            add("memory (GPU)", f"GPU {g['index']} {g['name']}", f"{_b(g['free'])} free of {_b(g['total'])}"
                + cc + (" (MIG on)" if g["mig_mode"] else ""))
            for s in g["mig_slices"]:
                add("memory (GPU)", f"  MIG slice {s['index']}", f"{_b(s['free'])} free of {_b(s['total'])}")
    else:
        add("memory (GPU)", "GPUs", f"none ({gpu['reason']})")
    pr = f["prune"]
    if pr["error"]:
        kept = f"UNREADABLE ({pr['path']})"
    elif pr["keep"] is None:
        kept = f"all (not pruned{'' if pr['present'] else '; no record at ' + pr['path']})"
    else:
        kept = f"{_sm_list(pr['keep'])} ({pr['path']})"
    add("device code", "GPU archs kept", kept)
    add("spill", "directory", sd["path"] or "NOT CONFIGURED (RAPIDS_SPILL_DIR)")
    if sd["path"]:
        if sd["exists"]:
            add("spill", "writable / mode / owner", f"{'yes' if sd['writable'] else 'NO'} / {sd['mode']:04o} / "
                f"{sd['owner_uid']}:{sd['owner_gid']}")
            add("spill", "filesystem / free", f"{sd['fstype']} at {sd['mount_point']} / {_b(sd['free_bytes'])}")
        else:
            add("spill", "exists", "NO")
    if sc["dask_available"]:
        add("spill", "dask target/spill/pause/terminate",
            "/".join("default" if sc[k] is None else str(sc[k]) for k in ("target", "spill", "pause", "terminate")))
        add("spill", "dask temporary-directory", sc["temporary_directory"] or "-")
    else:
        add("spill", "dask", "not installed")
    if sc["cudf_available"]:
        add("spill", "workers pre-import", ",".join(sc["pre_import"] + sc["preload"]) or "-")
    intent = report.get("intent") or asdict(Intent())
    add("command", "command", shlex.join(intent["command"]) if intent["command"] else "- (none given)")
    add("command", "disk spill", f"{intent['disk_spill']} ({intent['why']})")
    if intent["memory_limit"] is not None:
        add("command", "worker memory_limit", f"{_b(intent['memory_limit'])} x {intent['workers']} worker(s) "
            f"({intent['limit_source']})")
    add("derived", "memory budget", f"{_b(d['memory_budget'])} ({d['budget_source']})")
    add("derived", "dask worker memory_limit", f"{_b(d['worker_memory_limit'])} x {d['n_workers']} worker(s), "
        f"headroom {_b(d['headroom'])}")
    add("derived", "device_memory_limit", f"{_b(d['device_memory_limit']) if d['device_memory_limit'] else '-'} "
        f"({d['device_source']})")
    add("derived", "rmm_pool_size", _b(d["rmm_pool_size"]) if d["rmm_pool_size"] else "-")
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines, last = [], None
    for section, key, value in rows:
        lines.append(f"{section if section != last else '':{w0}}  {key:{w1}}  {value}")
        last = section
    for x in report["findings"]:
        lines.append(f"{x['level']}: [{x['topic']}] {x['message']}")
    if not report["findings"]:
        lines.append("OK: nothing to report")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = None
    if "--" in argv:                    # rapids-doctor [options] -- CMD ...: judge for that command
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(prog="rapids-doctor", description=__doc__.splitlines()[0],
                                     usage="%(prog)s [options] [-- COMMAND ...]")
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    parser.add_argument("--preflight", action="store_true",
                        help="quiet unless something is fatal (or would stop a disk spill the command does "
                             "not need: one WARNING line each)")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("RAPIDS_WORKERS", "1")),
                        help="dask workers that share the container's memory (default 1)")
    parser.add_argument("--disk-spill", choices=DISK_SPILL_CHOICES, default=None,
                        help=f"is disk spill required (default: ${DISK_SPILL_ENV}, else decided from the command "
                             "after --: required for dask workers and rapids-smoke, optional for anything else; "
                             "required when no command is given)")
    parser.add_argument("--memory-limit", type=parse_bytes, default=None,
                        help="check this memory_limit per worker (x --workers) against the container's budget "
                             "(a dask worker command after -- is read for its own --memory-limit)")
    args = parser.parse_args(argv)
    probe = intent_for(command, override=args.disk_spill, cpus=available_cpus())
    facts = collect(probe.spill_dir)  # the directory the command really spills to
    intent = intent_for(command, gpu_count=len(facts.gpu.gpus), override=args.disk_spill, cpus=facts.cpus)
    if args.memory_limit is not None:
        intent = replace(intent, memory_limit=args.memory_limit, workers=max(1, args.workers),
                         limit_source="rapids-doctor --memory-limit")
    report = diagnose(facts, args.workers, intent)
    if args.json:
        print(json.dumps(report, indent=2))
    elif not args.preflight:
        print(render_table(report))
    if args.preflight:
        for line in report["warnings"]:
            print(f"rapids-doctor: WARNING: {line}", file=sys.stderr)
    if args.preflight or args.json:
        for line in report["fatal"][:1]:
            print(f"rapids-doctor: FATAL: {line}", file=sys.stderr)
    return 0 if report["ok"] else FATAL_EXIT


if __name__ == "__main__":
    sys.exit(main())
