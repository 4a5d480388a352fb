"""monitoring/alerts.test.yml, made: each case is a timeline of workers (real collectors over
recorded containers, support/collector_scrape.py) and the alerts it must raise, and no others.
The input series come from those scrapes, each target labelled as the shipped scrape config
(monitoring/prometheus.yml and its file_sd targets) labels it (support/scrape_labels.py); an expected
alert names the labels the scrape carries.

    PYTHONPATH=src:tests python3 -m support.alert_cases > monitoring/alerts.test.yml
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

import yaml

from rapidship.runtime import rules
from support import scrape_labels
from support.collector_scrape import DOWN, GiB, Container, Machine, Scheduler, Worker, gpu, identity, series
from support.commands import ROOT

BASE = "https://docs.example.internal/rapidship/monitoring.md"   # runbook_url without `runbook_base`
WORKER = ("cluster", "job", "instance", "worker")                  # a worker's alerts keep these
CGROUP = ("cluster", "job", "cgroup")                              # a cgroup's alerts keep these
SHIPPED = ROOT / "monitoring" / "prometheus.yml"                  # whose labels the targets get
HOST_A, HOST_B = Machine("host-a", "0f6a1e2c-5b7d-4c1e-9a30-7d2b8e4f1a01"), Machine("host-b", "3c9d2b71-8e4a-4f0b-b6c5-1e7a9d0c2b02")


class Case:
    base: str | None = None     # where the recorded containers are written (render's temporary directory)
    labelling: scrape_labels.Labelling   # the scrape config's (render sets it)

    def __init__(self, name: str, interval: str = "15s", sites: int = 1) -> None:
        """sites=2: a second cluster under the same Prometheus, labelled as the config labels the first."""
        self.name, self.interval = name, interval
        self.labels = Case.labelling if sites == 1 else Case.labelling.another_site()
        self.workers: dict[str, Worker | Scheduler] = {}
        self.root = Path(tempfile.mkdtemp(prefix="case-", dir=Case.base))
        self.checks: list[dict] = []
        self.containers = 0

    def container(self, hostname: str | None = None, machine: Machine = HOST_A, **values) -> Container:
        """A container on `machine`, its host name its own (Compose: the service's name)."""
        root = Path(tempfile.mkdtemp(prefix="cgroup-", dir=self.root))
        self.containers += 1
        return Container(Machine(hostname or f"ctr{self.containers}", machine.boot_id, machine.ram), root, **values)

    def target(self, job: str, instance: str, site: int = 0) -> dict[str, str]:
        """The target labels but `instance` that the scrape config gives a target of `job`."""
        return {k: v for k, v in self.labels.target(job, instance, site).items() if k != "instance"}

    def worker(self, key: str, container: Container | None = None, instance: str | None = None, site: int = 0,
               **values) -> Worker:
        instance = instance or f"{key}:8788"
        self.workers[key] = Worker(key, container or self.container(), instance,
                                   self.target("dask-workers", instance, site), **values)
        return self.workers[key]

    def scheduler(self, key: str, site: int = 0, **workers: int) -> Scheduler:
        instance = f"{key}:8787"
        self.workers[key] = Scheduler(instance, self.target("dask-scheduler", instance, site),
                                      {"idle": 0, "processing": 0, "paused": 0, **workers})
        return self.workers[key]

    def expect(self, at: str, alert: str, *raised: dict) -> None:
        self.checks.append({"eval_time": at, "alertname": alert, "exp_alerts": list(raised)})

    def steady(self, n: int, keys=None) -> list[dict]:
        return [dict.fromkeys(keys or self.workers) for _ in range(n)]

    def test(self, steps: list) -> dict:
        return {"name": self.name, "interval": self.interval, "input_series": series(steps, self.workers),
                "alert_rule_test": self.checks}


def alert(anchor: str, severity: str, w, keep, summary: str, **labels: str) -> dict:
    """An expected alert: the labels it keeps, as the worker's own scrape carries them."""
    ident = w if isinstance(w, dict) else identity(w) if isinstance(w, Worker) else w.target()
    return {"exp_labels": {"severity": severity, **{k: ident[k] for k in keep}, **labels},
            "exp_annotations": {"summary": summary, "runbook_url": f"{BASE}#{anchor.lower()}"}}


def oom(w: Worker, n: int) -> dict:
    return alert("WorkerOomKilled", "critical", w, CGROUP,
                 f"the kernel OOM-killed {n} process(es) in cgroup {identity(w)['cgroup']} since Prometheus's previous "
                 "reading of its counter (5 minutes before, or before a gap in its scrapes; for a cgroup never seen "
                 "before: since it started)")


def set_(**values):
    """A change made to the worker's container before a scrape."""
    return lambda w: [setattr(w.container, k, v) for k, v in values.items()]


def memory_high() -> dict:
    c = Case("a working set above 90 % of the cap for a minute fires; 80 % does not, nor a cgroup full of page "
             "cache; an uncapped worker near the machine's RAM fires, one at half does not")
    hot = c.worker("hot", c.container(limit=4 * GiB, current=int(3.8 * GiB)))
    c.worker("cool", c.container(limit=4 * GiB, current=int(3.2 * GiB)))
    c.worker("cached", c.container(limit=4 * GiB, current=4 * GiB - 1024, inactive_file=2 * GiB))
    big = c.worker("uncapped", c.container(limit=None, current=60 * GiB))
    c.worker("uncapped-half", c.container(limit=None, current=32 * GiB))
    capped = c.worker("capped-big", c.container(limit=63 * GiB, current=60 * GiB))   # its cgroup's alert, not this
    above = c.worker("cap-above-ram", c.container(limit=128 * GiB, current=60 * GiB))   # a cap the RAM runs out before
    c.expect("30s", "WorkerCgroupMemoryHigh")
    ident = identity(hot)
    c.expect("2m", "WorkerCgroupMemoryHigh", alert(
        "WorkerCgroupMemoryHigh", "warning", hot, ident,
        "worker hot holds 95% of its cgroup memory it cannot give back (working set)"),
        alert("WorkerCgroupMemoryHigh", "warning", capped, identity(capped),
              "worker capped-big holds 95.24% of its cgroup memory it cannot give back (working set)"))
    c.expect("30s", "WorkerNearHostMemory")
    near = "worker {} has no memory cap below the machine's RAM and holds 93.75% of it that it cannot give back"
    c.expect("2m", "WorkerNearHostMemory",
             *(alert("WorkerNearHostMemory", "warning", w, WORKER + ("cgroup",), near.format(w.name)) for w in (big, above)))
    return c.test(c.steady(11))


def oom_kills() -> dict:
    c = Case("an oom_kill increase fires at once with its count; so does a cgroup first seen with kills counted")
    c1 = c.worker("w1")
    c3 = c.worker("w3", c.container(oom_kill=1))
    c.worker("w4")
    steps = [{"w1": None, "w4": None}] * 2 + [{"w1": None, "w3": None, "w4": None}] + \
            [{"w1": set_(oom_kill=1), "w3": None, "w4": None}] * 5
    c.expect("1m", "WorkerOomKilled", oom(c1, 1), oom(c3, 1))
    c.expect("1m", "OomKillsInvisible")   # kernels that count them
    return c.test(steps)


def old_kills() -> dict:
    c = Case("kills on a flat counter page while they are new and stop 5 minutes on")
    w = c.worker("w2", c.container(oom_kill=2))
    c.expect("3m", "WorkerOomKilled", oom(w, 2))
    c.expect("8m", "WorkerOomKilled")
    return c.test(c.steady(41))


def restarted_worker() -> dict:
    c = Case("a worker restarted under a new name in a cgroup that once had a kill fires no new page", "1m")
    box = c.container(oom_kill=1)
    c.worker("tcp://10.0.0.5:1", box, "w5:8788")
    c.worker("tcp://10.0.0.5:2", box, "w5:8788")
    steps = [{"tcp://10.0.0.5:1": None}] * 10 + [{"tcp://10.0.0.5:2": None}] * 10
    c.expect("12m", "WorkerOomKilled")
    c.expect("19m", "WorkerOomKilled")
    return c.test(steps)


def scrape_gap() -> dict:
    c = Case("a worker unreachable for 7 minutes after an old kill pages nothing when it returns; a kill made "
             "during the gap pages once, with its own count", "1m")
    c.worker("old", c.container(oom_kill=2))
    gap = c.worker("gap", c.container(oom_kill=1))
    steps = c.steady(15) + [{"old": DOWN, "gap": DOWN}] * 7 + \
        [{"old": None, "gap": set_(oom_kill=2)}] + c.steady(12)
    for at in ("22m", "25m", "30m"):
        c.expect(at, "WorkerOomKilled", *([oom(gap, 1)] if at != "30m" else []))
    return c.test(steps)


def prometheus_restart() -> dict:
    c = Case("Prometheus down for 12 minutes and restarted pages no old kill; a kill while it was down pages with "
             "its own count", "1m")
    c.worker("old", c.container(oom_kill=3))
    down = c.worker("new", c.container(oom_kill=3))
    steps = c.steady(15) + [None] * 12 + [{"old": None, "new": set_(oom_kill=5)}] + c.steady(12)
    c.expect("27m", "WorkerOomKilled", oom(down, 2))
    c.expect("28m", "WorkerOomKilled", oom(down, 2))
    c.expect("33m", "WorkerOomKilled")
    return c.test(steps)


def invisible_kills() -> dict:
    c = Case("a kernel that counts no OOM kills is said, once per cgroup, with its reason")
    box = c.container(counts_kills=False)
    a = c.worker("a", box, "box:8788")
    c.worker("b", box, "box:8789")
    c.worker("counted")
    reason = ("the kernel counts no OOM kills for this cgroup (memory.events, or memory.oom_control's oom_kill, "
              "Linux 4.13 and later): kills show only as restarts")
    c.expect("30s", "OomKillsInvisible", alert("OomKillsInvisible", "info", a, CGROUP,
                                               f"cgroup {identity(a)['cgroup']}: {reason}", reason=reason))
    return c.test(c.steady(5))


def spill() -> dict:
    c = Case("a spill filesystem above 85 % full fires; one at half does not; free room below the host limit "
             "fires, above it does not")
    full = c.worker("full", spill_size=100 * GiB, spill_free=10 * GiB)
    c.worker("half", spill_size=100 * GiB, spill_free=50 * GiB)
    tight = c.worker("tight", memory_limit=2 * GiB, spill_size=100 * GiB, spill_free=20 * GiB)
    c.worker("roomy", memory_limit=2 * GiB, spill_size=100 * GiB, spill_free=40 * GiB)
    tight.spill_free = GiB
    c.expect("30s", "SpillDirNearlyFull")
    c.expect("2m", "SpillDirNearlyFull",
             alert("SpillDirNearlyFull", "warning", full, identity(full), "worker full's spill filesystem is 90% full"),
             alert("SpillDirNearlyFull", "warning", tight, identity(tight), "worker tight's spill filesystem is 99% full"))
    c.expect("30s", "SpillDirSmallerThanHostLimit")
    c.expect("2m", "SpillDirSmallerThanHostLimit", alert(
        "SpillDirSmallerThanHostLimit", "warning", tight, identity(tight),
        "worker tight's spill dir has 1GiB free, less than its host limit"))
    return c.test(c.steady(11))


def gpus() -> dict:
    c = Case("device memory: held above the device limit warns (RMM's count, else the device tier), a pool "
             "reserved up front does not; NVML near full while dask is within its limit warns, a pool does not")
    total = 80 * GiB
    g1 = c.worker("g1", gpus=_view(gpu(0, total, 10 * GiB)), device_limit=5 * GiB, device_tier=6 * GiB)
    c.worker("pool", gpus=_view(gpu(0, total, 78 * GiB)), device_limit=40 * GiB, device_tier=10 * GiB,
                    rmm_pool=76 * GiB)
    leak = c.worker("leak", gpus=_view(gpu(0, total, 78 * GiB)), device_limit=40 * GiB, device_tier=10 * GiB)
    c.worker("busy", gpus=_view(gpu(0, total, 78 * GiB)), device_limit=40 * GiB, device_tier=50 * GiB)
    c.worker("cpu")
    # two targets, one worker name: matched per target
    dup_a = c.worker("dup", instance="a:8788", gpus=_view(gpu(0, total, 8 * GiB)), device_limit=5 * GiB,
                     device_tier=6 * GiB)
    c.workers["dup-b"] = Worker("dup", c.container(), "b:8788", c.target("dask-workers", "b:8788"), gpus=_view(gpu(0, total, GiB)),
                                device_limit=5 * GiB, device_tier=GiB)
    above = "worker {} holds {} on its GPU, above its device limit: spilling does not keep up"
    c.expect("30s", "DeviceMemoryAboveLimit")
    c.expect("2m", "DeviceMemoryAboveLimit",
             alert("DeviceMemoryAboveLimit", "warning", g1, WORKER, above.format("g1", "6GiB")),
             alert("DeviceMemoryAboveLimit", "warning", c.workers["busy"], WORKER, above.format("busy", "50GiB")),
             alert("DeviceMemoryAboveLimit", "warning", dup_a, WORKER, above.format("dup", "6GiB")))
    c.expect("30s", "GpuMemoryFullOutsideDask")
    c.expect("2m", "GpuMemoryFullOutsideDask", alert(
        "GpuMemoryFullOutsideDask", "warning", leak, WORKER,
        OUTSIDE.format(gpu="0", worker="leak", share="97.14%"), gpu="0"))
    return c.test(c.steady(11))


def _view(*found):
    from rapidship.runtime.gpu_view import GpuView

    return GpuView(True, "", "580", "13.0", list(found))


def sizing() -> dict:
    c = Case("the doctor's sizing pages nobody; workers above the budget page, into the headroom warns; the same "
             "stack on two machines is two cgroups, never summed")
    for cap in (4, 8, 48):   # invoke deploy --memory 4g / 8g / 48g: the doctor's own limits
        c.worker(f"d{cap}", c.container(limit=cap * GiB), memory_limit=rules.worker_limit_for(cap * GiB))
    over = c.worker("over", c.container(limit=2 * GiB), memory_limit=2 * GiB + 1)   # one worker as large as its cap
    two = c.container(limit=4 * GiB)   # --nworkers 2: 2 x 2 GiB in one 4 GiB cgroup (each alone would fit)
    a = c.worker("two-a", two, "two:8788", memory_limit=2 * GiB)
    c.worker("two-b", two, "two:8789", memory_limit=2 * GiB)
    tight = c.worker("tight", c.container(limit=4 * GiB), memory_limit=rules.worker_limit_for(4 * GiB) + 1)
    # Compose names the container of worker 0 alike on both machines; each is sized by the doctor
    for key, machine in (("host-a", HOST_A), ("host-b", HOST_B)):
        c.worker(key, c.container("rapidship-worker-0", machine, limit=4 * GiB),
                 f"{key}:8788", memory_limit=rules.worker_limit_for(4 * GiB))
    cg = "the workers of cgroup {} may hold {}, "
    c.expect("0m", "HostLimitAboveCgroup", alert(
        "HostLimitAboveCgroup", "critical", over, CGROUP, cg.format(identity(over)["cgroup"], "2GiB")
        + "above the container's memory budget: the kernel kills before dask spills"))
    c.expect("0m", "HostLimitInHeadroom", *(alert(
        "HostLimitInHeadroom", "warning", w, CGROUP, cg.format(identity(w)["cgroup"], size)
        + "into the headroom of the container's memory budget") for w, size in ((over, "2GiB"), (a, "4GiB"),
                                                                               (tight, "3.4GiB"))))
    return c.test(c.steady(2))


def two_hosts_kill() -> dict:
    c = Case("the same stack on two machines under one Prometheus: a kill on one pages for that one alone")
    a = c.worker("a", c.container("rapidship-worker-0", HOST_A), "host-a:8788")
    c.worker("b", c.container("rapidship-worker-0", HOST_B), "host-b:8788")
    steps = c.steady(2) + [{"a": set_(oom_kill=1), "b": None}] * 4
    c.expect("1m", "WorkerOomKilled", oom(a, 1))
    c.expect("0m", "HostLimitAboveCgroup")   # each 3 GiB worker fits its own 4 GiB cap; together they are not one
    c.expect("0m", "HostLimitInHeadroom")
    return c.test(steps)


def liveness() -> dict:
    c = Case("a worker or scheduler that stops answering pages after a minute; the scheduler counting fewer "
             "workers than its cluster's targets warns, per cluster (two clusters are never added up)", sites=2)
    for key, site in (("w1", 0), ("w2", 0), ("w3", 0), ("v1", 1)):
        c.worker(key, c.container(), site=site)
    c.scheduler("s1", idle=2)
    c.scheduler("s2", 1, idle=2)
    steps = c.steady(4) + [{**dict.fromkeys(c.workers), "w2": DOWN}] * 16
    c.expect("1m", "WorkerDown")
    c.expect("3m", "WorkerDown", {"exp_labels": {"severity": "critical", **c.workers["w2"].target()},
                                  "exp_annotations": {"summary": "worker target w2:8788 has not answered a scrape "
                                                                 "for a minute (killed, or its container exited)",
                                                      "runbook_url": f"{BASE}#workerdown"}})
    c.expect("3m", "SchedulerDown")
    c.expect("1m", "WorkersMissing")
    c.expect("3m", "WorkersMissing", alert(   # named by its workers' cluster, the one missing a worker
        "WorkersMissing", "warning", c.workers["w1"], ("cluster",),
        "the scheduler counts 2 worker(s), fewer than the worker targets: jobs run on fewer workers than planned"))
    return c.test(steps)


def scheduler_down() -> dict:
    c = Case("a scheduler that stops answering pages")
    s = c.scheduler("scheduler")
    steps = [dict.fromkeys(c.workers)] * 2 + [{"scheduler": DOWN}] * 8
    c.expect("2m", "SchedulerDown", {"exp_labels": {"severity": "critical", **s.target()}, "exp_annotations": {
        "summary": "the dask scheduler scheduler:8787 has not answered a scrape for a minute",
        "runbook_url": f"{BASE}#schedulerdown"}})
    return c.test(steps)


def paused() -> dict:
    c = Case("workers paused for two minutes warn; a short pause does not", sites=2)
    s = c.scheduler("long", paused=1)
    short = c.scheduler("short", 1, paused=1)
    steps = [dict.fromkeys(c.workers)] * 3 + [{"long": None, "short": lambda _: short.workers.update(paused=0)}] * 17
    c.expect("1m", "WorkersPaused")
    c.expect("3m", "WorkersPaused", alert(
        "WorkersPaused", "warning", s, tuple(s.target()),   # the scheduler target's labels, as configured
        "1 dask worker(s) paused for more than 2 minutes (memory above the pause threshold)", state="paused"))
    return c.test(steps)


def restarted_process() -> dict:
    c = Case("a worker process that started again (its container restarted) warns; a steady one does not", "1m")
    w1 = c.worker("w1")
    c.worker("w2")
    steps = c.steady(5) + [{"w1": lambda w: setattr(w, "started", 1400.0), "w2": None}] + c.steady(9)
    c.expect("4m", "WorkerRestarted")
    c.expect("8m", "WorkerRestarted", {"exp_labels": {"severity": "warning", **w1.target()}, "exp_annotations": {
        "summary": "worker target w1:8788 restarted 1 time(s) in 15 minutes (an OOM kill that took its container, "
                   "a nanny restart)", "runbook_url": f"{BASE}#workerrestarted"}})
    return c.test(steps)


CASES = (memory_high, oom_kills, old_kills, restarted_worker, scrape_gap, prometheus_restart, invisible_kills,
         two_hosts_kill, spill, gpus, sizing, liveness, scheduler_down, paused, restarted_process)


# --- GPU memory held outside dask, from scrapes recorded on a real GPU (support/recorded_gpu.py) ---
OUTSIDE = ("GPU {gpu} of worker {worker}: {share} of what the worker's own reserve (RMM's pool or async pool, else "
           "its device tier) leaves of the card is held outside dask (NVML), while dask's device tier is within its "
           "limit")
CROWDED = ("pool20-other78", "async20-other78", "none-otherfull", "pool90-otherrest")   # a fresh 1 GiB cudaMalloc failed


def gpus_recorded() -> dict:
    from support.recorded_gpu import RecordedWorker, recorded_cases

    c = Case("recorded on an H100, every RMM mode: another process filling what the worker's pool, async pool or "
             "device tier leaves fires; an idle 90 % async pool and workers holding data near their device limit "
             "do not")
    fired = []
    for case in recorded_cases():
        instance = f"{case['case']}:8788"
        w = c.workers[case["case"]] = RecordedWorker(case["case"], case["metrics"], instance,
                                                     c.target("dask-workers", instance))
        if case["case"] in CROWDED:
            fired.append(_outside(w))
    c.expect("30s", "GpuMemoryFullOutsideDask")
    c.expect("2m", "GpuMemoryFullOutsideDask", *fired)
    return c.test(c.steady(11))


def _outside(w) -> dict:
    """The alert a recorded worker raises, its share computed as the rule does (float64, same order)."""
    used, total = w.value("rapidship_gpu_memory_used_bytes"), w.value("rapidship_gpu_memory_total_bytes")
    own = max(v for v in (w.value("rapidship_rmm_reserved_bytes"),
                          w.value("rapidship_worker_tier_bytes", tier="device"), 0.0) if v is not None)
    share = f"{(used - own) / (total - own) * 100:.4g}%"   # Prometheus's humanizePercentage
    ident = w.labels("rapidship_gpu_memory_used_bytes")
    return alert("GpuMemoryFullOutsideDask", "warning", ident, WORKER,
                 OUTSIDE.format(gpu=ident["gpu"], worker=ident["worker"], share=share), gpu=ident["gpu"])


CASES += (gpus_recorded,)


# --- a worker given part of a GPU: the collector exports the share's memory, the rule judges that ---
def shared_gpus() -> dict:
    from rapidship.runtime.gpu_share import Quota, on_slice, with_quota
    from rapidship.runtime.gpu_view import Gpu

    c = Case("a worker on a MIG slice or under a memory quota: what others hold of its share fires though the card "
             "has room; the same worker judged against the whole card would not")
    mib = 2**20
    card = Gpu(0, "NVIDIA H100 80GB HBM3", 80 * GiB, 40 * GiB, True,
               [{"index": 2, "total": 9856 * mib, "free": 200 * mib, "profile": "1g.10gb", "uuid": "MIG-a"}], 9, 0)
    on = c.worker("slice", gpus=_view(on_slice(card, card.mig_slices[0])), device_limit=6 * GiB, device_tier=GiB)
    c.worker("card", gpus=_view(card), device_limit=6 * GiB, device_tier=GiB)   # the card: 50 % used
    quota = with_quota(Gpu(0, "NVIDIA A100-SXM4-40GB", 40 * GiB, GiB), Quota(30 * GiB, "CUDA_DEVICE_MEMORY_LIMIT=30g", True))
    q = c.worker("quota", gpus=_view(quota), device_limit=24 * GiB, device_tier=2 * GiB)
    c.expect("30s", "GpuMemoryFullOutsideDask")
    c.expect("2m", "GpuMemoryFullOutsideDask", *(
        alert("GpuMemoryFullOutsideDask", "warning", w, WORKER,
              OUTSIDE.format(gpu="0", worker=w.name, share=f"{(total - free - own) / (total - own) * 100:.4g}%"), gpu="0")
        for w, total, free, own in ((on, 9856 * mib, 200 * mib, GiB), (q, 30 * GiB, GiB, 2 * GiB))))
    return c.test(c.steady(11))


CASES += (shared_gpus,)


def render(config: Path = SHIPPED) -> str:
    """The whole test file, as `promtool test rules` reads it, its targets labelled as `config` labels them."""
    Case.labelling = scrape_labels.read(config)
    os.environ.pop("RAPIDS_MEMORY_LIMIT", None)   # the budget is the cgroup's, as in a container without it
    logging.getLogger("rapidship.metrics").setLevel(logging.ERROR)   # each absent view is said once per worker
    with tempfile.TemporaryDirectory() as Case.base:
        doc = {"rule_files": ["alerts.yml"], "evaluation_interval": "15s", "tests": [case() for case in CASES]}
    head = ("# Made by tests/support/alert_cases.py from real scrapes of the real collector; do not edit:\n"
            "# PYTHONPATH=src:tests python3 -m support.alert_cases > monitoring/alerts.test.yml\n")
    return head + yaml.safe_dump(doc, sort_keys=False, width=200)


if __name__ == "__main__":
    sys.stdout.write(render())
