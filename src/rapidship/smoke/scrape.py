"""The cluster smoke's own scrape of every worker's /metrics (`invoke smoke --cluster N --metrics`).

With --metrics each worker serves distributed's /metrics (with `--preload rapids_runtime.metrics`:
the container's cgroup, spill dir and limits beside dask's own) on the cluster's internal network;
nothing is published. The smoke reads them from the host over the network's bridge while the job
runs, keeps each series' highest and last value per worker, and puts them in the record; a
Prometheus given the `--metrics-targets` file (file_sd) scrapes the very same endpoints.

Pure core: `parse` (exposition text -> {series: value}) and `Scraped.add` (maxima and last values
over time); thin edge: `fetch`.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from rapidship.records import ScrapedMetrics

WORKER_PORT = 8788       # each worker's HTTP server (--dashboard-address :8788)
SCHEDULER_PORT = 8787
# The series kept in the record: the product's own and dask's memory/spill accounting.
KEPT = ("rapidship_", "dask_worker_memory_bytes", "dask_worker_spill")
IGNORED_LABELS = {"worker", "cgroup", "source"}   # the container is the record's key already
OOM_KILLS = 'rapidship_cgroup_memory_events_total{event="oom_kill"}'
SERVED = "rapidship_metrics_scrapes_total"   # the worker process's count of the scrapes it answered


def series_key(name: str, labels: dict[str, str]) -> str:
    kept = sorted((k, v) for k, v in labels.items() if k not in IGNORED_LABELS)
    return name + ("{" + ",".join(f'{k}="{v}"' for k, v in kept) + "}" if kept else "")


def parse(text: str) -> dict[str, float]:
    """Pure: the kept series of one scrape, by name and labels. A malformed exposition raises
    ValueError (the scrape counts as failed)."""
    from prometheus_client.parser import text_string_to_metric_families  # the host's parse only

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(KEPT) and not s.name.endswith("_created"):
                out[series_key(s.name, s.labels)] = float(s.value)
    return out


class Scraped:
    """One target's scrapes over the run: counts, the highest and the last value of each series."""

    def __init__(self, target: str) -> None:
        self.target, self.scrapes, self.failures = target, 0, 0
        self.last_error: str | None = None
        self.highest: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.end_served: float | None = None   # SERVED at the scrape that read the job's end values
        self.end_scrapes = 0                   # the smoke's own scrapes by then

    def add(self, values: dict[str, float]) -> None:
        served = values.get(SERVED)
        if self.end_served is not None and served is not None and served < self.last.get(SERVED, 0):
            # the worker process restarted after the end: its count starts over, and these are the end values now
            self.end_served, self.end_scrapes = served, self.scrapes + 1
        self.scrapes += 1
        self.last = dict(values)
        for key, value in values.items():
            self.highest[key] = max(value, self.highest.get(key, value))

    def mark_end(self) -> None:
        """The last scrape read the job's end values: from here, count the reads of everyone else."""
        self.end_served, self.end_scrapes = self.last.get(SERVED), self.scrapes

    def others_since_end(self) -> int | None:
        """Scrapes of this worker by other readers since the end values (a Prometheus the targets file
        named): the worker's count less the smoke's own; None before mark_end or without the count."""
        if self.end_served is None or SERVED not in self.last:
            return None
        return int(self.last[SERVED] - self.end_served) - (self.scrapes - self.end_scrapes)

    def failed(self, why: str) -> None:
        self.failures += 1
        self.last_error = why

    def record(self) -> ScrapedMetrics:
        return ScrapedMetrics(target=self.target, scrapes=self.scrapes, failures=self.failures,
                              last_error=self.last_error, highest=self.highest, last=self.last,
                              others_since_end=self.others_since_end())


def fetch(scraped: Scraped, timeout: float = 2.0) -> None:
    """GET the target's /metrics once and add it (a failure is counted with its reason, never raised)."""
    try:
        with urllib.request.urlopen(f"http://{scraped.target}/metrics", timeout=timeout) as resp:  # noqa: S310 - http to the cluster's own bridge
            scraped.add(parse(resp.read().decode("utf-8", "replace")))
    except (OSError, ValueError, urllib.error.URLError) as err:
        scraped.failed(f"{type(err).__name__}: {err}")


def targets_file(path: Path, cluster: str, targets: dict[str, tuple[str, str]]) -> None:
    """Write Prometheus file_sd JSON for the cluster's endpoints ({container: (role, host:port)}),
    atomically: Prometheus re-reads the file when it changes and must never see half of it."""
    # each in the job of the shipped prometheus.yml (a file_sd label sets `job`): the liveness rules
    # count worker targets, never the scheduler among them; `cluster` is the label they group by
    # (monitoring/alerts.yml, as monitoring/targets/workers.json sets it)
    groups = [{"targets": [addr], "labels": {"cluster": cluster, "role": role, "container": name,
                                             "job": "dask-scheduler" if role == "scheduler" else "dask-workers"}}
              for name, (role, addr) in sorted(targets.items())]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(groups, f, indent=1)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
