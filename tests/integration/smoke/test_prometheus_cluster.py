"""A real Prometheus (Debian's server, on loopback) scrapes a real capped cluster smoke:
`invoke smoke --cluster 2 --metrics --metrics-targets F` serves every worker's /metrics on the
cluster's internal network and writes F (file_sd); Prometheus loads the shipped alert rules and
scrapes what F names, every second. What Prometheus stored agrees with the smoke record; every
query of the shipped dashboard returns data (its GPU panels return none on CPU workers: the GPU
run in docs/measurements/gpu-smoke.md covers them); a healthy spilling cluster raises no alert although its
page cache fills the cgroup; the run that OOM-kills a worker fires WorkerOomKilled. The smoke
holds its cluster up until Prometheus has read every worker's end values, so a Prometheus that
scrapes less often than the smoke (or found the targets late) still stores the kill.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from rapidship.records import ClusterSmokeRecord, load
from rapidship.smoke.scrape import OOM_KILLS
from support.commands import CPU_VARIANT, invoke
from support.prometheus import MONITORING, Prometheus, serve_prometheus

pytestmark = pytest.mark.docker

NO_SPILLING = ["--env", "RAPIDS_DOCTOR=off"] + [
    x for k in ("TARGET", "SPILL", "PAUSE", "TERMINATE") for x in ("--env", f"DASK_DISTRIBUTED__WORKER__MEMORY__{k}=False")]
WINDOW = "30m"
LIVENESS = {"WorkerDown", "SchedulerDown", "WorkersMissing"}


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    with serve_prometheus(tmp_path_factory.mktemp("prometheus")) as prom:
        yield prom


def cluster(prom: Prometheus, out: Path, *args) -> tuple[subprocess.CompletedProcess, ClusterSmokeRecord]:
    proc = invoke("smoke", "--variant", CPU_VARIANT, "--cluster", "2", "--memory", "1g", "--metrics",
                  "--metrics-targets", str(prom.targets), *args, "--out", str(out), check=False)
    (path,) = out.glob(f"{CPU_VARIANT}-amd64-cluster2*-uid*.json")
    return proc, load(path, ClusterSmokeRecord, "invoke smoke --cluster 2")


@pytest.fixture(scope="module")
def healthy(prometheus, cpu_image, tmp_path_factory):
    proc, record = cluster(prometheus, tmp_path_factory.mktemp("healthy"))
    assert proc.returncode == 0 and record.verdict == "PASS", record.problems
    time.sleep(2)   # the last rule evaluations
    return record


def workers(record: ClusterSmokeRecord):
    return [c for c in record.containers if c.role == "worker"]


def test_the_record_carries_what_every_worker_s_metrics_said(healthy, prometheus):
    # the file_sd file named the cluster while it ran (Prometheus scraped it) and names nothing once
    # it is gone: a torn-down cluster is no target that WorkerDown would page for
    assert json.loads(Path(healthy.metrics_targets).read_text()) == []
    scraped = {r["metric"]["container"]: r["metric"]["job"] for r in prometheus.query(f"max_over_time(up[{WINDOW}])")}
    assert {c.name for c in workers(healthy)} <= {n for n, job in scraped.items() if job == "dask-workers"}
    assert any(job == "dask-scheduler" for job in scraped.values())
    for c in workers(healthy):
        m = c.metrics
        assert m and m.scrapes >= 10 and m.target.endswith(":8788"), m
        assert m.others_since_end >= 1, m     # Prometheus read the end values before the teardown
        assert m.highest["rapidship_cgroup_memory_max_bytes"] == c.memory_bytes
        assert m.highest["rapidship_worker_memory_limit_bytes"] == healthy.memory_limit
        assert m.highest['dask_worker_spill_bytes_total{activity="disk-write"}'] > 0      # dask's own, same endpoint
        assert m.highest["rapidship_spill_dir_used_bytes"] > 0 and m.highest[OOM_KILLS] == 0
        # the tiers as the worker's SpillBuffer counts them, against dask's own account of the same
        assert m.highest['rapidship_worker_tier_bytes{tier="disk"}'] == m.highest['dask_worker_memory_bytes{type="spilled"}']
        assert m.highest['rapidship_worker_tier_keys{tier="host"}'] > 0


def test_what_prometheus_stored_agrees_with_the_smoke_record(healthy, prometheus):
    """Two observers of each worker: Prometheus (its /metrics, every second) and the smoke (the
    bind-mounted spill dir from the host, every half second; its own scrapes). Peaks sampled at
    different instants: the spill dir within a quarter or two blocks; counters and the cgroup's
    peak (they only grow, and both read them after the job) within 5 %."""
    window = f"[{WINDOW}]"
    spill = prometheus.by_worker(f"max_over_time(rapidship_spill_dir_used_bytes{window})")
    peak = prometheus.by_worker(f"max_over_time(rapidship_cgroup_memory_peak_bytes{window})")
    written = {r["metric"]["container"]: float(r["value"][1]) for r in prometheus.query(
        f'max_over_time(dask_worker_spill_bytes_total{{activity="disk-write",role="worker"}}{window})')}
    client = next(argv for name, argv in healthy.argv.items() if name.endswith("-client"))
    slack = 2 * int(client[client.index("--chunk-bytes") + 1])
    for c in workers(healthy):
        m = c.metrics
        assert c.spill_peak_bytes > 0
        assert abs(spill[c.name] - c.spill_peak_bytes) <= max(0.25 * c.spill_peak_bytes, slack), (spill, c)
        assert abs(peak[c.name] - m.highest["rapidship_cgroup_memory_peak_bytes"]) <= 0.05 * c.memory_bytes
        want = m.highest['dask_worker_spill_bytes_total{activity="disk-write"}']
        assert abs(written[c.name] - want) <= 0.05 * want, (written, want)


def test_every_dashboard_query_returns_data(healthy, prometheus):
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    (var,) = [v for v in dashboard["templating"]["list"] if v["name"] == "worker"]
    metric = var["query"].removeprefix("label_values(").split(",")[0]
    q = urllib.parse.urlencode({"match[]": metric})
    with urllib.request.urlopen(f"{prometheus.url}/api/v1/label/worker/values?{q}", timeout=10) as resp:
        assert {c.name for c in workers(healthy)} <= set(json.load(resp)["data"])
    empty, gpu = [], []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$worker", ".*")
            found = prometheus.query(f"max_over_time(({expr})[{WINDOW}:1s])" if "[" not in expr else expr)
            if any(gpu_only in expr for gpu_only in ("rapidship_gpu", "rapidship_rmm", "device")):
                gpu.append(expr)
                assert found == [], expr        # CPU workers: absent, never a made-up zero
            elif not found:
                empty.append(expr)
    assert empty == [] and gpu, (empty, gpu)


def test_a_healthy_spilling_cluster_raises_no_alert(healthy, prometheus):
    """Its workers' page cache fills the cgroup (memory.current near the cap: the reason the
    memory alert reads the working set); no alert is pending or firing."""
    ratio = prometheus.by_worker(f"max_over_time((rapidship_cgroup_memory_current_bytes"
                                 f" / rapidship_cgroup_memory_max_bytes)[{WINDOW}:1s])")
    print("highest memory.current / memory.max per worker:", ratio)
    raised = {r["metric"]["alertname"] for r in prometheus.query(f"max_over_time(ALERTS[{WINDOW}])")
              if not (r["metric"]["alertname"] in LIVENESS and r["metric"]["alertstate"] == "pending")}
    # the spill dirs are on this machine's disk: its own fill level may rightly raise the disk alerts;
    # a liveness alert may be pending from the scrape that met the containers going away, never firing
    disk = os.statvfs(Path(healthy.metrics_targets).parent)
    allowed = set()
    if 1 - disk.f_bavail / disk.f_blocks > 0.80:
        allowed.add("SpillDirNearlyFull")
    if disk.f_bavail * disk.f_frsize < 2 * healthy.memory_limit:
        allowed.add("SpillDirSmallerThanHostLimit")
    assert raised <= allowed, raised


def killed_cgroups(prom: Prometheus, record: ClusterSmokeRecord) -> tuple[set[str], set[str]]:
    """The workers whose own /metrics counted a kill (the smoke's scrapes), and the cgroups of those
    Prometheus stored a kill for."""
    killed = {c.name for c in workers(record) if c.metrics and c.metrics.highest.get(OOM_KILLS, 0) > 0}
    stored = prom.query(f'max_over_time(rapidship_cgroup_memory_events_total{{event="oom_kill"}}[{WINDOW}]) > 0')
    return killed, {r["metric"]["cgroup"] for r in stored if r["metric"]["container"] in killed}


def oom_run(prom: Prometheus, out: Path) -> tuple[ClusterSmokeRecord, set[str], set[str]]:
    proc, record = cluster(prom, out, "--data", "2g", *NO_SPILLING)
    assert proc.returncode == 1 and record.verdict == "FAIL"
    assert any(p.startswith("OOM KILL inside worker") and "/metrics counted" in p for p in record.problems), \
        record.problems
    killed, cgroups = killed_cgroups(prom, record)
    # the kill is per cgroup (a restarted worker's new name is no new kill): one cgroup per killed worker
    assert killed and len(cgroups) == len(killed), (cgroups, killed)
    # every worker that answered after the job was read by Prometheus too before the teardown
    assert all(c.metrics.others_since_end >= 1 for c in workers(record) if c.metrics.others_since_end is not None)
    assert not any("--metrics-linger" in n for n in record.notes), record.notes
    return record, killed, cgroups


def test_the_run_that_oom_kills_a_worker_fires_the_oom_alert(healthy, prometheus, tmp_path):
    record, killed, cgroups = oom_run(prometheus, tmp_path)
    fired = []
    for _ in range(30):  # each killed worker's alert fires at its own rule evaluation: wait for all of them
        fired = prometheus.query(f'max_over_time(ALERTS{{alertname="WorkerOomKilled",alertstate="firing"}}[{WINDOW}])')
        if {r["metric"]["cgroup"] for r in fired} >= cgroups:
            break
        time.sleep(1)
    # every kill pages once per cgroup, and nothing else does
    assert {r["metric"]["cgroup"] for r in fired} == cgroups, (fired, killed)
    assert fired[0]["metric"]["severity"] == "critical"


def test_a_prometheus_scraping_less_often_than_the_smoke_still_stores_every_kill(cpu_image, tmp_path):
    """The defect CI met: the smoke tore the cluster down one of its own intervals after the end
    values, and a Prometheus that had not scraped since (late discovery, a slow interval) never
    stored the kill. Scraping every 5 s it missed most kills that way; now the cluster waits for it."""
    (tmp_path / "prometheus").mkdir()
    with serve_prometheus(tmp_path / "prometheus", every="5s") as slow:
        record, killed, cgroups = oom_run(slow, tmp_path / "run")
    waited = [c.metrics.others_since_end for c in workers(record)]
    print("kills stored:", len(cgroups), "of", len(killed), "; scrapes by Prometheus after the end values:", waited)
