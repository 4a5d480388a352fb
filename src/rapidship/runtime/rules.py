"""The sizing rules and findings that the doctor, the smoke and later the metrics and deploy share:
the memory budget, worker and device limits, RMM pool, and what is FATAL or a WARNING for a given
command. Pure functions over views.Facts and command.Intent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .command import DISK_SPILL_ENV, UCX_MIN_SHM, Intent
from .cuda_rule import code_runs_on
from .cgroup_view import CgroupMemory
from .gpu_view import GpuView
from .spill_view import RAM_FSTYPES, WARN_FSTYPES
from .units import MiB, _b
from .views import DECLARED_LIMIT_ENV, PRUNE_RECORD_ENV, Facts, PruneRecord


# Memory a worker process may not take: scheduler, client, nanny and the interpreter itself.
HEADROOM_MIN = 384 * MiB


HEADROOM_FRACTION = 0.15


# A worker with less than this cannot hold one partition and its spill bookkeeping.
MIN_WORKER_MEMORY = 256 * MiB


DEVICE_FRACTION = 0.8      # dask-cuda's own default share of the device


RMM_POOL_FRACTION = 0.9


FREE_FRACTION = 0.95       # of the device memory free now: the rest for the CUDA context and the allocator


RMM_POOL_STEP = 256 * MiB


MIN_SPILL_FREE = 256 * 2**20     # less free room than this in the spill dir: the first spill hits ENOSPC


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
    # a WARNING the quiet --preflight prints too, whatever the command: the limits do not hold
    preflight: bool = False

    @property
    def said_at_preflight(self) -> bool:
        """What --preflight prints besides its one FATAL line (the report's `warnings`)."""
        return self.level == "WARNING" and (self.disk_spill or self.preflight)


def headroom(cap: int) -> int:
    """What a worker container keeps beside the worker's memory_limit (nanny, interpreter, page
    cache): 15 % of the cap and at least 384 MiB, in whole bytes. The one statement of the rule:
    the doctor's sizing, the deploy targets and the metrics (`rapidship_memory_workers_budget_bytes`,
    which the alerts compare with) all take it from here."""
    return max(HEADROOM_MIN, int(cap * HEADROOM_FRACTION))


def worker_limit_for(cap: int) -> int:
    """The memory_limit one worker gets in a container of `cap` bytes."""
    return max(0, cap - headroom(cap))


def cap_for_limit(limit: int) -> int:
    """The smallest container cap whose worker may hold `limit` bytes (worker_limit_for's inverse)."""
    import math  # noqa: PLC0415

    cap = limit + max(HEADROOM_MIN, math.ceil(limit * HEADROOM_FRACTION / (1 - HEADROOM_FRACTION)))
    while cap > limit and worker_limit_for(cap - 1) >= limit:   # int() rounding: step to the exact inverse
        cap -= 1
    while worker_limit_for(cap) < limit:
        cap += 1
    return cap


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


def unified_gpu(gpu: GpuView) -> bool:
    """A visible GPU shares the machine's memory (GB10): device and host tiers are one pool."""
    return gpu.available and any(g.unified for g in gpu.gpus)


def smallest_device(gpu: GpuView) -> tuple[int, int, str] | None:
    """Pure: (total, free, name) of the smallest device a worker may get: a MIG slice where MIG is
    on, else a whole GPU; None without a visible GPU. The device limit and its checks size to it."""
    if not (gpu.available and gpu.gpus):
        return None
    from .gpu_share import on_slice  # noqa: PLC0415

    sizes = []
    for g in gpu.gpus:
        if g.share or not g.mig_slices:     # a named MIG instance or a quota: already the share's memory
            sizes.append((g.total, g.free, g.share or f"GPU {g.index} {g.name}"))
        else:                               # MIG on, no instance named: any of them
            sizes += [(s["total"], s["free"], on_slice(g, s).share) for s in g.mig_slices]
    return min(sizes)


def device_sizes(total: int, usable: int | None = None) -> tuple[int, int]:
    """Pure: (device_memory_limit, rmm_pool_size) on a device (card, MIG slice or quota) of `total`
    bytes of which `usable` may be taken now: the doctor's sizing, and the deploy's for a GPU share."""
    usable = total if usable is None else usable
    device = min(int(total * DEVICE_FRACTION), usable)
    pool = min(int(total * RMM_POOL_FRACTION), usable) // RMM_POOL_STEP * RMM_POOL_STEP
    return device, pool


def derive(f: Facts, n_workers: int = 1) -> Derived:
    budget, source = memory_budget(f.cgroup, f.host_total, f.declared_limit)
    room = worker = None
    if budget is not None:
        room = headroom(budget)
        worker = max(0, budget - room) // max(1, n_workers)
    device = pool = None
    dev_source = "no GPU visible"
    smallest = smallest_device(f.gpu)
    if smallest is not None:
        total, free, dev_source = smallest
        # another process holding part of the GPU: size to what is free, not to what exists
        usable = int(free * FREE_FRACTION)
        if unified_gpu(f.gpu) and worker is not None:
            # one pool: the host tiers of this node's workers live in the same RAM, and the GPU's
            # allocations are not charged to the cgroup, so the device tier gets what they leave
            usable = max(0, usable - worker * max(1, n_workers))
            dev_source += ", unified memory (the machine's, less the host tiers)"
        device, pool = device_sizes(total, usable)
        if usable < total * DEVICE_FRACTION:
            dev_source += f", only {_b(free)} of {_b(total)} free"
    return Derived(budget, source, room, worker, n_workers, device, dev_source, pool)


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

    def disk(message: str, fatal: bool = True, topic: str = "spill") -> Finding:
        if not fatal:
            return Finding("WARNING", topic, message)
        if required:
            return Finding("FATAL", topic, message, disk_spill=True)
        return Finding("WARNING", topic, f"{message}; not fatal: {intent.why} (cuDF spills to host memory "
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
            out.append(Finding("FATAL", "spill-threshold", f"dask's spill threshold(s) {', '.join(above)} (fractions of the "
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
    # (dask_cuda.initialize), so the config's is never read; measured on an H200 (docs/measurements/gpu-smoke.md).
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
                           "(--memory-swap = --memory)", preflight=True))
    if cg.limit and cg.swap_limit and cg.version == 1 and cg.swap_limit > cg.limit:
        out.append(Finding("WARNING", "memory", f"memory+swap limit {_b(cg.swap_limit)} exceeds the memory limit "
                           f"{_b(cg.limit)}: the container swaps instead of spilling (--memory-swap = --memory)"))
    if cg.limit and cg.swap_limit and cg.version == 2 and cg.swap_limit > 0:
        out.append(Finding("WARNING", "memory", f"memory.swap.max is {_b(cg.swap_limit)}: the container swaps "
                           "instead of spilling (--memory-swap = --memory)"))
    out.extend(device_findings(f, d, intent))
    out.extend(share_findings(f, d))
    if not f.cwd_usable and runs_workers:
        out.append(Finding("FATAL", "user", f"the working directory {f.cwd} cannot be entered by uid {f.uid} gid "
                           f"{f.gid} (groups {','.join(map(str, f.groups)) or '-'}): dask's nanny cannot start there; "
                           "run with --user UID:0 (the image's home is group-0 writable, as for an arbitrary uid), "
                           "or --group-add 0, or -w a directory it can use"))
    for cache in f.caches:  # CuPy makes its kernel cache at import: a read-only place breaks `import cupy`
        if not cache.writable:
            out.append(Finding("WARNING", "cache", f"{cache.what} ({cache.env}={cache.path}) would land on a path uid "
                               f"{f.uid} cannot write (a read-only root?): imports that create it fail; mount a "
                               "tmpfs at /tmp (the image keeps its caches there) or point "
                               f"{cache.env} at a writable directory"))
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
    out: list[Finding] = []
    smallest = smallest_device(f.gpu)
    if smallest is None:
        return out
    total, free, name = smallest
    if intent.device_limit is not None and intent.device_limit > total:
        out.append(Finding("FATAL", "device-limit", f"{intent.device_source} {_b(intent.device_limit)} is above what "
                           f"{name} has ({_b(total)}): the device tier never fills, so nothing spills and "
                           f"allocations fail first; give at most {_b(d.device_memory_limit)}"))
    elif intent.device_limit is not None and intent.device_limit > free:
        # said at --preflight too: the device tier cannot fill before allocations fail, so nothing spills
        out.append(Finding("WARNING", "device-limit", f"{intent.device_source} {_b(intent.device_limit)} is "
                           f"{intent.device_limit / max(free, 1):.1f}x the {_b(free)} free on {name} now (another "
                           f"process holds {_b(total - free)} of {_b(total)}): allocations fail before the device "
                           f"tier fills, so nothing spills from the device; give at most {_b(d.device_memory_limit)}",
                           preflight=True))
    out.extend(pool_findings(intent, d, total, free, name))
    if unified_gpu(f.gpu):
        out.append(Finding("OK", "unified-memory", f"{name} shares the machine's {_b(total)} with the CPU (no "
                           "memory of its own): spilling device -> host frees no RAM, only disk spill does; the "
                           "GPU's allocations are not charged to the container's cgroup, so the device limit "
                           f"({_b(d.device_memory_limit)}) is what the host tiers leave of the free memory"))
        if intent.device_limit is not None and d.device_memory_limit is not None and \
                intent.device_limit > d.device_memory_limit:
            out.append(Finding("WARNING", "device-limit", f"{intent.device_source} {_b(intent.device_limit)} plus the "
                               f"host tiers is more than the free unified memory: give at most "
                               f"{_b(d.device_memory_limit)}"))
        return out
    if free * FREE_FRACTION < total * DEVICE_FRACTION:
        out.append(Finding("WARNING", "gpu", f"{name} has only {_b(free)} of {_b(total)} free (another process holds "
                           f"the rest): the device limit and RMM pool are sized to what is free "
                           f"({_b(d.device_memory_limit)})"))
    return out


def pool_findings(intent: Intent, d: Derived, total: int, free: int, name: str) -> list[Finding]:
    """Pure: an RMM pool (--rmm-pool-size, reserved whole at the worker's start, --rmm-async too) above
    the GPU is FATAL; above what is free now, a WARNING the quiet --preflight prints."""
    pool, hint = intent.rmm_pool, f"give at most {_b(d.rmm_pool_size)}" if d.rmm_pool_size else "give less"
    if pool is None:
        return []
    if pool > total:
        return [Finding("FATAL", "rmm-pool", f"{intent.rmm_pool_source} {_b(pool)} is above what {name} has "
                        f"({_b(total)}): RMM cannot reserve it and the worker fails as it starts; {hint}")]
    if pool > free:
        return [Finding("WARNING", "rmm-pool", f"{intent.rmm_pool_source} {_b(pool)} is above the {_b(free)} free on "
                        f"{name} now (another process holds {_b(total - free)} of {_b(total)}): reserving it fails "
                        f"as the worker starts unless that memory is given back first; {hint}", preflight=True)]
    return []


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
                        "memory charged to the same cgroup; bind-mount a host disk there", topic="spill-disk"))
    elif sd.fstype in WARN_FSTYPES:
        out.append(Finding("WARNING", "spill", f"spill dir {sd.path} is on {sd.fstype}, {WARN_FSTYPES[sd.fstype]}; "
                           "bind-mount a host disk there"))
    if sd.free_bytes is not None and sd.free_bytes < MIN_SPILL_FREE:
        out.append(disk(f"spill dir {sd.path} has {_b(sd.free_bytes)} free: a spill would fail at once with ENOSPC; "
                        f"give it at least {_b(MIN_SPILL_FREE)}, better twice the memory limit", topic="spill-disk"))
    elif sd.free_bytes is not None and f.cgroup.limit and sd.free_bytes < 2 * f.cgroup.limit:
        out.append(Finding("WARNING", "spill", f"spill dir has {_b(sd.free_bytes)} free, less than twice the "
                           f"memory limit ({_b(f.cgroup.limit)})"))
    return out


def share_findings(f: Facts, d: Derived) -> list[Finding]:
    """Pure: what the doctor says of a shared GPU (gpu_share.py): the MIG instance or quota it sized
    the device limit and RMM pool to, a quota nothing enforces, a quota variable it cannot read, MIG
    on with no instance named."""
    gpu = f.gpu
    out = [Finding("WARNING", "gpu-share", problem) for problem in gpu.share_problems]
    if not gpu.available or not gpu.gpus:
        return out
    smallest = smallest_device(gpu)
    sized = (f"device_memory_limit {_b(d.device_memory_limit)}, rmm_pool_size {_b(d.rmm_pool_size)}, dask-cuda "
             f"spills device -> host above the device limit")
    for g in gpu.gpus:
        if g.mig_mode and not g.share and len(g.mig_slices) > 1:
            out.append(Finding("WARNING", "gpu-share", f"MIG is on on GPU {g.index} {g.name} and no instance is named: "
                               f"CUDA uses one of its {len(g.mig_slices)} instances, so the doctor sized to the "
                               f"smallest ({smallest[2] if smallest else '-'}); set CUDA_VISIBLE_DEVICES=MIG-<uuid> "
                               "(nvidia-smi -L lists them)"))
        if g.quota_enforced is False:
            out.append(Finding("WARNING", "gpu-share", f"{g.share}: nothing enforces this quota (NVML and CUDA see the "
                               f"whole card), so a worker that grows past it takes memory promised to the card's other "
                               f"pods; sized to the quota: {sized}; for a limit that holds, share the card through "
                               "MPS (--gpu-share mps:...) or a HAMi / Volcano vGPU quota (--gpu-share memory:...)"))
    if smallest is not None and any(g.share for g in gpu.gpus):
        out.append(Finding("OK", "gpu-share", f"sized to {smallest[2]}: {sized}"))
    return out
