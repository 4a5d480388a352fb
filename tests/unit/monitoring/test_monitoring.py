"""monitoring/ with the real promtool (Debian's prometheus package): the scrape config and the alert
rules are valid, every alert fires on the series it must and not on the others, a weakened rule
fails its test, and every dashboard query is PromQL Prometheus accepts."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from support.commands import ROOT

MON = ROOT / "monitoring"


def promtool(*args: str, cwd: Path = MON) -> subprocess.CompletedProcess:
    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed: scripts/setup installs Debian's prometheus package")
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True)


def test_the_scrape_config_and_rules_are_valid():
    assert promtool("check", "config", "prometheus.yml").returncode == 0
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0 and "13 rules found" in checked.stdout


def test_every_alert_fires_where_it_must_and_nowhere_else():
    proc = promtool("test", "rules", "alerts.test.yml")
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    tested = {t["alertname"] for case in yaml.safe_load((MON / "alerts.test.yml").read_text())["tests"]
              for t in case["alert_rule_test"]}
    rules = {r["alert"] for g in yaml.safe_load((MON / "alerts.yml").read_text())["groups"] for r in g["rules"]}
    assert tested == rules  # no alert without its test


@pytest.mark.parametrize("weaken", [("> 0.9", "> 0.99"), ("> 0.85", "> 0.95"), ("for: 2m", "for: 10m"),
                                    ("max by (cgroup) (increase(", "max by (cgroup, worker) (increase("),
                                    ("max by (cgroup) (rapidship_memory_workers_budget_bytes)",
                                     "max by (cgroup) (rapidship_memory_budget_bytes)"),
                                    ('up{job="dask-workers"} == 0\n        for: 1m', 'up{job="dask-workers"} == 0\n        for: 9m'),
                                    ("[15m]) > 0", "[15m]) > 1")])
def test_a_weakened_rule_fails_its_test(tmp_path, weaken):
    """The tests are not decoration: loosen a threshold and they say so."""
    before, after = weaken
    text = (MON / "alerts.yml").read_text()
    assert before in text
    (tmp_path / "alerts.yml").write_text(text.replace(before, after, 1))
    shutil.copy(MON / "alerts.test.yml", tmp_path / "alerts.test.yml")
    proc = promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)
    assert proc.returncode != 0 and "FAILED" in proc.stdout + proc.stderr


def test_every_dashboard_query_is_promql_prometheus_accepts(tmp_path):
    dash = json.loads((MON / "dashboard.json").read_text())
    exprs = [t["expr"].replace("$worker", ".+") for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 8
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:q{i}", "expr": e}
                                                         for i, e in enumerate(exprs)]}]}
    (tmp_path / "q.yml").write_text(yaml.safe_dump(rules))
    proc = promtool("check", "rules", "q.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
