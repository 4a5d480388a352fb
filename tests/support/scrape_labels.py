"""The labels Prometheus gives each target, read from a scrape config (monitoring/prometheus.yml, or
the one `invoke deploy` writes): `job` from the job's name, `instance` from the target's address and
every label of its target group (`static_configs` or the `file_sd_configs` files beside the config).
The alert tests label their series with these, so a rule that joins on a label the config does not
set fails its test. A config that relabels is refused: what it would make is not modelled here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Labelling:
    """job name -> the labels of each of its target groups, in the config's order."""

    groups: dict[str, list[dict[str, str]]]

    def target(self, job: str, address: str, group: int = 0) -> dict[str, str]:
        """The labels a target at `address` of `job`'s group `group` carries: as Prometheus sets them,
        a label of the group wins over `job` and `instance` (a file_sd group may set its own job)."""
        if job not in self.groups:
            raise KeyError(f"the scrape config has no job {job!r} (jobs: {', '.join(self.groups)})")
        labels = self.groups[job][group]
        return {**labels, "job": labels.get("job", job), "instance": labels.get("instance", address)}

    def another_site(self, suffix: str = "-2") -> Labelling:
        """The same jobs with a second copy of every target group, each label value suffixed: a
        second cluster under one Prometheus, labelled exactly as the first one is."""
        return Labelling({job: groups + [{k: v + suffix for k, v in g.items()} for g in groups]
                          for job, groups in self.groups.items()})


def read(path: Path) -> Labelling:
    return of_config(yaml.safe_load(path.read_text()), path.parent)


def of_config(config: dict, base: Path | None = None) -> Labelling:
    groups: dict[str, list[dict[str, str]]] = {}
    for job in config.get("scrape_configs", []):
        if job.get("relabel_configs") or job.get("metric_relabel_configs"):
            raise ValueError(f"scrape job {job['job_name']!r} relabels: its labels are not modelled")
        found = [dict(g.get("labels") or {}) for g in job.get("static_configs", [])]
        for sd in job.get("file_sd_configs", []):
            for pattern in sd["files"]:
                if base is None:
                    raise ValueError(f"scrape job {job['job_name']!r} reads {pattern} but no directory was given")
                for f in sorted(base.glob(pattern)):
                    data = json.loads(f.read_text()) if f.suffix == ".json" else yaml.safe_load(f.read_text())
                    found += [dict(g.get("labels") or {}) for g in data]
        groups[job["job_name"]] = found or [{}]
    return Labelling(groups)
