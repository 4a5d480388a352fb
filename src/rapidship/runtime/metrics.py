"""The container's own views on dask's /metrics: cgroup memory, spill dir, GPUs, while workers run.

distributed serves Prometheus metrics at `/metrics` on its HTTP port once `prometheus_client` is
installed (the images lock it). A worker started with `--preload rapids_runtime.metrics` adds one
collector to that same registry, so the numbers the kernel kills by (`memory.current` against
`memory.max`), the spill disk filling up and the device memory sit beside dask's own, on the same
endpoint: no new port. Every sample is read at scrape time through `views` (the readers the doctor
uses, so the one-shot view and the metrics say the same). What cannot be read is left out, with
one logged reason per kind, never a made-up zero and never a failed scrape.

Names follow Prometheus practice: base units (`_bytes`), counters `_total`, the worker's name as
the `worker` label, the GPU index as `gpu` (docs/monitoring.md has the list and a sample scrape).
Standard library only at import time; prometheus_client is imported when the collector is made.
"""

from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass
from typing import Callable

from . import cgroup_view, gpu_view, rules, spill_view, tier_view, views

LOG = logging.getLogger("rapidship.metrics")
PREFIX = "rapidship_"


class Samples:
    """What one scrape emits, as (name, kind, help, labels, value), built without prometheus_client
    so the rules can be unit-tested on recorded cgroup trees."""

    def __init__(self, worker: str, cgroup: str = "") -> None:
        # the worker's identity, on every row alike: a rule joining two of its families pairs them
        # whatever else each carries (labels a row adds, as `tier` or `gpu`, come on top)
        self.worker, self.identity = worker, {"worker": worker, **({"cgroup": cgroup} if cgroup else {})}
        self.rows: list[tuple[str, str, str, dict[str, str], float]] = []
        self.missing: dict[str, str] = {}  # family -> why it is absent this time

    def add(self, name: str, type_: str, help_: str, value, /, **labels: str) -> None:
        if value is None:
            return
        self.rows.append((PREFIX + name, type_, help_, {**self.identity, **labels}, float(value)))

    def absent(self, family: str, why: str, **labels: str) -> None:
        """A view this scrape cannot give, said once in the log and as a 1 under its reason."""
        self.missing[family] = why
        self.add("view_absent", "gauge", "1: a view of the container this worker cannot read, and why", 1,
                 family=family, reason=why, **labels)


def sample(worker: str, spill_dir: str | None, memory_limit: int | None, device_limit: int | None,
           cg: cgroup_view.CgroupMemory | None = None, gpus: gpu_view.GpuView | None = None,
           prune: views.PruneRecord | None = None, rmm: tier_view.RmmView | None = None,
           tiers: dict | None = None, host: tuple[str, str] | None = None,
           ram: tuple[int | None, int | None] | None = None, spill_fs: Callable | None = None) -> Samples:
    """Read every view once and turn it into samples (the I/O is the views' readers; `cg`, `gpus`,
    `prune`, `rmm`, `host` (name, boot id), `ram` (host MemTotal, MemAvailable) and `spill_fs` (the
    spill filesystem's reader) may be given, as recorded, instead of read). RMM is read only in a
    process that imported it (a dask-cuda worker with --rmm-pool-size, cuDF)."""
    cg = cg if cg is not None else cgroup_view.read_cgroup()
    # every worker sharing a container's cgroup reports it under one `cgroup` label, on every row:
    # the alerts sum the workers of a cgroup and key its kills to it, not to a worker name that a
    # restart changes; the label names the machine too (two hosts running one stack share the rest)
    out = Samples(worker, cgroup_view.cgroup_id(cg, host))
    ram = ram if ram is not None else cgroup_view.host_memory()
    out.add("host_memory_total_bytes", "gauge", "the machine's RAM (MemTotal): what a worker without a cgroup "
            "cap may fill before the host's OOM killer picks a process", ram[0])
    if cg.version is None:
        out.absent("cgroup", "no cgroup memory controller visible")
    else:
        out.add("cgroup_memory_max_bytes", "gauge", "the cgroup's memory limit (the tightest on the way up)", cg.limit)
        out.add("cgroup_memory_high_bytes", "gauge", "cgroup v2 memory.high (throttling starts here)", cg.high)
        out.add("cgroup_memory_current_bytes", "gauge", "memory the cgroup uses now (what the OOM killer compares)",
                cg.usage)
        out.add("cgroup_memory_peak_bytes", "gauge", "the most memory the cgroup has used", cg.peak)
        stat = cgroup_view.memory_stat_of(cg)   # once: the working set and the kinds both come from it
        out.add("cgroup_memory_working_set_bytes", "gauge",
                "memory.current less inactive page cache: what the kernel cannot reclaim before it kills",
                cgroup_view.working_set(cg, stat))
        events = cgroup_view.memory_events(cg)
        if events is None or "oom_kill" not in events:
            out.absent("cgroup_memory_events", "the kernel counts no OOM kills for this cgroup (memory.events, "
                       "or memory.oom_control's oom_kill, Linux 4.13 and later): kills show only as restarts")
        for event in ("oom", "oom_kill", "max", "high"):
            if events and event in events:
                out.add("cgroup_memory_events_total", "counter", "the cgroup's memory events (memory.events)",
                        events[event], event=event)
        kinds = cgroup_view.memory_kinds(cg, stat)
        if kinds is None:
            out.absent("cgroup_memory_stat", "memory.stat cannot be read")
        for kind, value in (kinds or {}).items():
            out.add("cgroup_memory_stat_bytes", "gauge", "what the cgroup's memory is (anon, file, shmem)", value,
                    kind=kind)
        budget, source = rules.memory_budget(cg, ram[0], views.declared_limit())
        if budget is not None:
            out.add("memory_budget_bytes", "gauge", "the doctor's memory budget of this container: the tightest of its "
                    "cgroup limit, memory.high, soft limit, declared limit and host RAM", budget, source=source)
            out.add("memory_workers_budget_bytes", "gauge", "what the doctor lets this cgroup's workers hold in all: "
                    "the budget less the headroom (rules.headroom)", budget - rules.headroom(budget))
    if spill_dir and os.path.isdir(spill_dir):
        files, used = spill_view.dir_usage(spill_dir, only_storage=False)
        size, free = (spill_fs or spill_view.fs_bytes)(spill_dir)
        out.add("spill_dir_used_bytes", "gauge", "bytes of the files in the spill directory", used)
        out.add("spill_dir_files", "gauge", "non-empty files in the spill directory", files)
        out.add("spill_dir_free_bytes", "gauge", "free bytes on the spill directory's filesystem", free)
        out.add("spill_dir_size_bytes", "gauge", "size of the spill directory's filesystem", size)
    else:
        out.absent("spill_dir", f"the spill directory {spill_dir or '(none)'} does not exist (vanished?)")
    out.add("worker_memory_limit_bytes", "gauge", "the worker's dask memory_limit (host tier)", memory_limit)
    out.add("worker_device_memory_limit_bytes", "gauge", "the worker's device memory limit (dask-cuda)", device_limit)
    for tier, (keys, nbytes) in sorted((tiers or {}).items()):
        out.add("worker_tier_keys", "gauge", "keys the worker holds in this tier (device, host, disk)", keys, tier=tier)
        out.add("worker_tier_bytes", "gauge", "bytes the worker holds in this tier, as its spilling code counts them",
                nbytes, tier=tier)
    used = rmm if rmm is not None else tier_view.read_rmm()
    if used is not None:
        chain = {"resource": " > ".join(used.resources)}
        out.add("rmm_pool_size_bytes", "gauge", "device memory RMM's pool holds (PoolMemoryResource)", used.pool_bytes,
                **chain)
        out.add("rmm_reserved_bytes", "gauge", "device memory RMM's resource holds from the GPU, handed out or not: "
                "the pool's size (PoolMemoryResource), what the async allocator's CUDA pool has reserved now "
                "(CudaAsyncMemoryResource, --rmm-async)", used.reserved_bytes, **chain)
        out.add("rmm_allocated_bytes", "gauge", "device memory RMM has handed out now (statistics/tracking adaptor)",
                used.allocated_bytes, **chain)
        out.add("rmm_allocated_peak_bytes", "gauge", "the most device memory RMM has handed out at once",
                used.peak_bytes, **chain)
        out.add("rmm_limit_bytes", "gauge", "RMM's limiting adaptor's allocation limit", used.limit_bytes, **chain)
    view = gpus if gpus is not None else gpu_view.read_gpus()
    if not view.available:
        out.absent("gpu", view.reason)
    kept = prune if prune is not None else views.read_prune_record()
    for g in view.gpus:
        labels = {"gpu": str(g.index), "name": g.name}
        out.add("gpu_memory_total_bytes", "gauge", "the GPU's device memory (NVML)", g.total, **labels)
        out.add("gpu_memory_used_bytes", "gauge", "device memory in use on the GPU (NVML; every process)",
                g.total - g.free, **labels)
        if g.share:   # a MIG instance or a quota (gpu_share.py): the two above are then the share's, not the card's
            enforced = "mig" if g.mig_slices and g.quota_enforced is None else str(g.quota_enforced is not False).lower()
            out.add("gpu_share_memory_bytes", "gauge", "the memory of the part of the GPU this worker was given (a MIG "
                    "instance or a memory quota): what its device memory is judged against", g.total, **labels,
                    share=g.share, enforced=enforced)
        if kept.keep is not None and g.cc_major is not None and g.cc_minor is not None:
            out.add("gpu_code_covered", "gauge", "1 when the image's pruned device code runs on this GPU",
                    int(rules.covered(g.cc_major, g.cc_minor, kept.keep)), **labels)
    return out


@dataclass(frozen=True)
class Readers:
    """Where each scrape reads the container from: the real files (None: `sample`'s own readers), or
    a recorded view of them (a test's cgroup tree, NVML answers, spill filesystem, machine)."""

    cg: Callable[[], cgroup_view.CgroupMemory] | None = None
    gpus: Callable[[], gpu_view.GpuView] | None = None
    host: Callable[[], tuple[str, str]] | None = None
    ram: Callable[[], tuple[int | None, int | None]] | None = None
    spill_fs: Callable[[str], tuple[int, int]] | None = None
    prune: Callable[[], views.PruneRecord] | None = None
    rmm: Callable[[], tier_view.RmmView | None] | None = None

    def given(self) -> dict:
        """`sample`'s keyword arguments: each view read now through its recorded reader."""
        return {"spill_fs": self.spill_fs, **{k: getattr(self, k)() for k in ("cg", "gpus", "host", "ram", "prune", "rmm")
                                              if getattr(self, k) is not None}}


class RuntimeCollector:
    """A prometheus_client collector over `sample`, for one worker; `data` is the worker's data
    mapping (its tiers and device limit are read from it at every scrape)."""

    def __init__(self, worker: str, spill_dir: str | None, memory_limit=None, device_limit=None, data=None,
                 readers: Readers = Readers()) -> None:
        self.worker, self.spill_dir = worker, spill_dir
        self.memory_limit, self.device_limit, self.data = memory_limit, device_limit, data
        self.readers = readers
        self._said: set[str] = set()
        self._served = itertools.count(1)   # next() is atomic under the GIL: concurrent scrapes count once each

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        try:
            device = self.device_limit if self.device_limit is not None else tier_view.device_limit(self.data)
            tiers = tier_view.worker_tiers(self.data) if self.data is not None else None
            found = sample(self.worker, self.spill_dir, self.memory_limit, device, tiers=tiers, **self.readers.given())
            # a reader tells its own scrapes from everyone else's by this count (the cluster smoke holds
            # its cluster up until the Prometheus its targets file named has read the end values)
            found.add("metrics_scrapes_total", "counter", "scrapes of /metrics this worker process has answered, "
                      "this one included", next(self._served))
        except Exception as err:  # noqa: BLE001 - a broken view must never fail the worker's scrape
            LOG.warning("rapidship metrics: the views could not be read: %s: %s", type(err).__name__, err)
            return
        for family, why in found.missing.items():
            if family not in self._said:  # once per kind, not at every scrape
                self._said.add(family)
                LOG.warning("rapidship metrics: %s absent: %s", family, why)
        families: dict[str, object] = {}
        for name, kind, help_, labels, value in found.rows:
            keys = sorted(labels)
            if name not in families:
                base = name[:-len("_total")] if kind == "counter" else name
                families[name] = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(base, help_, labels=keys)
            families[name].add_metric([labels[k] for k in keys], value)
        yield from families.values()


def dask_setup(worker) -> None:
    """`dask worker --preload rapids_runtime.metrics`: put the collector on the registry distributed
    serves at /metrics. Without prometheus_client there is no /metrics to add to: said once."""
    try:
        from prometheus_client import REGISTRY
    except ImportError:
        LOG.warning("rapidship metrics: prometheus_client is not installed: no /metrics to add to")
        return
    manager = getattr(worker, "memory_manager", None)
    REGISTRY.register(RuntimeCollector(str(worker.name), getattr(worker, "local_directory", None),
                                       getattr(manager, "memory_limit", None), data=getattr(worker, "data", None)))
