"""promtool input series made by the real collector: each simulated worker is a real
`RuntimeCollector` over a recorded container (a cgroup v2 tree on disk read by the real
`read_cgroup`, NVML answers, its spill filesystem, its machine); each scrape is its real exposition
parsed by prometheus_client's parser, with the target labels Prometheus adds (`instance`, `job`
and its target group's labels, as a scrape config gives them: support/scrape_labels.py) and Prometheus's own bookkeeping: `up`, a staleness marker where a series vanishes from
a scrape or a scrape fails, nothing where Prometheus itself was down. No label is typed here: the
rules are tested on the label sets the workers really export."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rapidship.runtime import cgroup_view, metrics
from rapidship.runtime.gpu_view import Gpu, GpuView
from rapidship.runtime.tier_view import RmmView
from rapidship.runtime.views import PruneRecord

GiB = 2**30
NO_GPU = GpuView(False, "pynvml (nvidia-ml-py) is not installed")


@dataclass(frozen=True)
class Machine:
    hostname: str              # the container's host name (Compose: one per worker index, alike on every machine)
    boot_id: str               # the machine's kernel boot id
    ram: int = 64 * GiB


@dataclass
class Container:
    """One container: its cgroup v2 files, written where a test keeps them and read by the real reader."""

    machine: Machine
    root: Path
    limit: int | None = 4 * GiB
    current: int = GiB
    inactive_file: int = 0
    oom_kill: int = 0
    counts_kills: bool = True           # False: a kernel without memory.events' oom_kill (v1 before 4.13)

    def write(self) -> None:
        files = {"cgroup.controllers": "memory", "memory.max": "max" if self.limit is None else str(self.limit),
                 "memory.current": str(self.current),
                 "memory.stat": f"anon {self.current - self.inactive_file}\nfile {self.inactive_file}\n"
                                f"inactive_file {self.inactive_file}\nshmem 0",
                 "memory.events": f"low 0\nhigh 0\nmax 0\noom {self.oom_kill}"
                                  + (f"\noom_kill {self.oom_kill}" if self.counts_kills else "")}
        for name, text in files.items():
            (self.root / name).write_text(text + "\n")

    def read(self) -> cgroup_view.CgroupMemory:
        self.write()
        return cgroup_view.read_cgroup(self.root, proc_cgroup="0::/\n")


@dataclass
class Worker:
    """One worker process in a container, scraped as one Prometheus target."""

    name: str
    container: Container
    instance: str
    labels: dict[str, str] = field(default_factory=dict)   # its target labels but `instance` (scrape_labels)
    memory_limit: int | None = 3 * GiB
    spill_size: int = 100 * GiB
    spill_free: int = 90 * GiB
    gpus: GpuView = NO_GPU
    device_limit: int | None = None
    device_tier: int | None = None        # bytes dask-cuda's device buffer holds
    rmm_pool: int | None = None           # RMM's pool, where the worker made one
    started: float = 1000.0               # the process's start time (prometheus_client's process collector)
    collector: metrics.RuntimeCollector = field(init=False, repr=False)

    def __post_init__(self) -> None:
        spill = Path(tempfile.mkdtemp(prefix="spill-", dir=self.container.root.parent))
        c, m = self.container, self.container.machine
        readers = metrics.Readers(cg=c.read, gpus=lambda: self.gpus, host=lambda: (m.hostname, m.boot_id),
                                  ram=lambda: (m.ram, m.ram // 2), spill_fs=lambda _: (self.spill_size, self.spill_free),
                                  prune=lambda: PruneRecord(""), rmm=self._rmm)
        self.collector = metrics.RuntimeCollector(self.name, str(spill), self.memory_limit, None, data=self,
                                                  readers=readers)

    def _rmm(self) -> RmmView | None:
        return None if self.rmm_pool is None else RmmView(["PoolMemoryResource", "CudaMemoryResource"],
                                                          pool_bytes=self.rmm_pool, reserved_bytes=self.rmm_pool)

    @property
    def device_buffer(self):   # dask-cuda's DeviceHostFile shape, read by the real tier_view
        if self.device_limit is None:
            raise AttributeError("device_buffer")
        return _Buffer(_LRU({"k": self.device_tier or 0}, self.device_limit))

    def target(self) -> dict[str, str]:
        return {**self.labels, "instance": self.instance}

    def scrape(self) -> dict[tuple, float]:
        """One scrape as Prometheus stores it: {(name, sorted labels): value}, target labels added."""
        registry = CollectorRegistry()
        registry.register(self.collector)
        out = {}
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            for s in family.samples:
                out[_key(s.name, {**s.labels, **self.target()})] = s.value
        # what prometheus_client's process collector adds beside it (a restarted process starts later)
        out[_key("process_start_time_seconds", self.target())] = self.started
        out[_key("up", self.target())] = 1.0
        return out


@dataclass
class Scheduler:
    """A dask scheduler target: distributed's own `dask_scheduler_workers{state}` (not rapidship's
    collector; the names and the label as distributed's scheduler exports them, docs/monitoring.md)."""

    instance: str
    labels: dict[str, str]                 # its target labels but `instance` (scrape_labels)
    workers: dict[str, int] = field(default_factory=lambda: {"idle": 0, "processing": 0, "paused": 0})

    def target(self) -> dict[str, str]:
        return {**self.labels, "instance": self.instance}

    def scrape(self) -> dict[tuple, float]:
        out = {_key("dask_scheduler_workers", {"state": k, **self.target()}): float(v) for k, v in self.workers.items()}
        out[_key("up", self.target())] = 1.0
        return out


class _LRU(dict):
    def __init__(self, items, n):
        super().__init__(items)
        self.total_weight, self.n = sum(items.values()), n


@dataclass
class _Buffer:
    fast: _LRU


def gpu(index: int, total: int, used: int, name: str = "H200") -> Gpu:
    return Gpu(index, name, total, total - used, cc_major=9, cc_minor=0)


def _key(name: str, labels: dict[str, str]) -> tuple:
    return (name, tuple(sorted(labels.items())))


DOWN = "down"   # a worker whose scrape fails (up 0, its series stale)


def series(steps: list[dict[str, object] | None], workers: dict[str, Worker]) -> list[dict[str, str]]:
    """promtool input_series from a timeline. Each step maps a worker's key to a change to make
    before the scrape (a callable on the Worker, or None), or to DOWN; a worker missing from a step
    is not a target then; a step that is None is Prometheus down (nothing stored, no markers)."""
    stored: list[dict[tuple, float] | None] = []
    for step in steps:
        if step is None:
            stored.append(None)
            continue
        scraped: dict[tuple, float] = {}
        for key, change in step.items():
            w = workers[key]
            if change == DOWN:
                scraped[_key("up", w.target())] = 0.0
                continue
            if change is not None:
                change(w)
            scraped.update(w.scrape())
        stored.append(scraped)
    keys = sorted({k for s in stored if s for k in s})
    out = []
    for name, labels in keys:
        tokens, had = [], False
        for s in stored:
            if s is None:          # Prometheus down: nothing, and no marker after it either
                tokens.append("_")
                had = False
            elif (name, labels) in s:
                tokens.append(_number(s[(name, labels)]))
                had = True
            else:                  # gone from a scrape that ran, or its target failed: marked stale once
                tokens.append("stale" if had else "_")
                had = False
        while tokens and tokens[-1] == "_":
            tokens.pop()
        text = ",".join(f'{k}="{v}"' for k, v in labels)
        out.append({"series": f"{name}{{{text}}}", "values": " ".join(tokens)})
    return out


def _number(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(v)


def identity(w: Worker) -> dict[str, str]:
    """The labels every series of this worker carries, as its collector makes them and Prometheus
    adds them (what an expected alert names); read without counting a scrape."""
    found = metrics.sample(w.name, None, None, None, **w.collector.readers.given())
    return {**found.identity, **w.target()}
