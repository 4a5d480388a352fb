"""Workers replayed from scrapes recorded on a real GPU (tests/fixtures/gpu-alerts-scrapes.json, made by
the alerts job: bench/gpu/jobs/alerts_scrapes.py on an H100, docs/measurements/gpu-alerts-2026-12-07/):
each case is one `dask cuda worker --preload rapids_runtime.metrics` in an RMM mode the project deploys,
its rapidship_* exposition as it answered then. A replayed worker is a Prometheus target like the
simulated ones (support/collector_scrape.py): the same target labels, `up`, the same series builder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from support.collector_scrape import _key

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-alerts-scrapes.json"


def recorded_cases(path: Path = FIXTURE) -> list[dict]:
    return json.loads(path.read_text())


@dataclass
class RecordedWorker:
    """One recorded scrape, answered again at every step."""

    name: str
    exposition: str
    instance: str
    tags: dict[str, str]   # its target labels but `instance`, as the shipped scrape config gives them (scrape_labels)
    started: float = 1000.0

    def target(self) -> dict[str, str]:
        """The labels Prometheus adds to a worker target, as for the simulated workers."""
        return {**self.tags, "instance": self.instance}

    def scrape(self) -> dict[tuple, float]:
        out = {}
        for family in text_string_to_metric_families(self.exposition):
            for s in family.samples:
                out[_key(s.name, {**s.labels, **self.target()})] = s.value
        out[_key("process_start_time_seconds", self.target())] = self.started
        out[_key("up", self.target())] = 1.0
        return out

    def labels(self, family: str) -> dict[str, str]:
        """The labels of the recorded family's first sample, target labels added (what an alert keeps)."""
        for fam in text_string_to_metric_families(self.exposition):
            for s in fam.samples:
                if s.name == family:
                    return {**s.labels, **self.target()}
        raise KeyError(f"{family} is not in the recorded scrape of {self.name}")

    def value(self, family: str, **match: str) -> float | None:
        for fam in text_string_to_metric_families(self.exposition):
            for s in fam.samples:
                if s.name == family and all(s.labels.get(k) == v for k, v in match.items()):
                    return s.value
        return None
