"""monitoring/ with the real promtool (Debian's prometheus package): the scrape config and the alert
rules are valid, every alert fires on the series it must and not on the others, a weakened rule
fails its test, and every dashboard query is PromQL Prometheus accepts. The test series are the
real collector's (support/alert_cases.py): the committed file is exactly what it makes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import re

import pytest
import yaml

from support import alert_cases
from support.commands import ROOT

MON = ROOT / "monitoring"


def promtool(*args: str, cwd: Path = MON) -> subprocess.CompletedProcess:
    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed: scripts/setup installs Debian's prometheus package")
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True)


def test_the_scrape_config_and_rules_are_valid():
    assert promtool("check", "config", "prometheus.yml").returncode == 0
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0 and "15 rules found" in checked.stdout


def test_the_test_series_are_what_the_real_collector_makes():
    """By construction: alerts.test.yml is generated from real scrapes of the real collector, labels
    and all; a hand edit or a collector that changed its labels makes this fail."""
    made = alert_cases.render()
    assert (MON / "alerts.test.yml").read_text() == made, \
        "monitoring/alerts.test.yml is stale: PYTHONPATH=src:tests python3 -m support.alert_cases > monitoring/alerts.test.yml"
    series = [s["series"] for case in yaml.safe_load(made)["tests"] for s in case["input_series"]]
    limit = [s for s in series if s.startswith("rapidship_worker_memory_limit_bytes{")]
    free = [s for s in series if s.startswith("rapidship_spill_dir_free_bytes{")]
    assert limit and free and all('cgroup="' in s for s in limit + free)   # the two families the spill rule joins


def alert_tests_through(config: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """promtool's verdict on the alert tests with every target labelled as `config` labels it."""
    (tmp_path / "alerts.test.yml").write_text(alert_cases.render(config))
    shutil.copy(MON / "alerts.yml", tmp_path / "alerts.yml")
    return promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)


def test_workers_missing_fires_through_the_shipped_scrape_config_and_not_one_that_labels_one_side(tmp_path):
    """The series carry what monitoring/prometheus.yml (and its file_sd targets) label each target
    with: a scheduler target without the workers' `cluster` never matches them, so WorkersMissing
    could not fire; such a config fails the alert tests."""
    good = alert_tests_through(MON / "prometheus.yml", tmp_path)
    assert good.returncode == 0 and "SUCCESS" in good.stdout, good.stdout + good.stderr
    config = yaml.safe_load((MON / "prometheus.yml").read_text())
    scheduler = next(j for j in config["scrape_configs"] if j["job_name"] == "dask-scheduler")
    assert scheduler["static_configs"][0]["labels"]["cluster"]
    del scheduler["static_configs"][0]["labels"]
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copytree(MON / "targets", bad / "targets")
    (bad / "prometheus.yml").write_text(yaml.safe_dump(config))
    failed = alert_tests_through(bad / "prometheus.yml", bad)
    assert failed.returncode != 0 and "alertname: WorkersMissing" in failed.stdout + failed.stderr, failed.stdout


def test_the_labelling_is_the_shipped_configs_own():
    """Read from monitoring/prometheus.yml and the file_sd targets beside it, not typed here."""
    from support import scrape_labels

    shipped = scrape_labels.read(MON / "prometheus.yml")
    workers = json.loads((MON / "targets" / "workers.json").read_text())[0]["labels"]
    assert shipped.target("dask-workers", "w:8788") == {**workers, "job": "dask-workers", "instance": "w:8788"}
    assert shipped.target("dask-scheduler", "s:8787")["cluster"] == workers["cluster"]
    assert shipped.target("dcgm", "d:9400") == {"job": "dcgm", "instance": "d:9400"}
    # a file_sd group's own `job` wins over the job's name, as in Prometheus (the smoke's targets file)
    smoke = scrape_labels.of_config({"scrape_configs": [{"job_name": "rapidship", "static_configs": [
        {"targets": ["s:8787"], "labels": {"cluster": "c", "job": "dask-scheduler"}}]}]})
    assert smoke.target("rapidship", "s:8787")["job"] == "dask-scheduler"


def test_a_config_the_labelling_does_not_model_is_refused(tmp_path):
    from support import scrape_labels

    config = {"scrape_configs": [{"job_name": "dask-workers", "static_configs": [{"targets": ["w:1"]}],
                                  "relabel_configs": [{"target_label": "cluster", "replacement": "x"}]}]}
    with pytest.raises(ValueError, match="relabels"):
        scrape_labels.of_config(config)


def test_every_rule_links_its_runbook_anchor_in_the_monitoring_page():
    page = (ROOT / "docs" / "monitoring.md").read_text()
    anchors = {h.lower() for h in re.findall(r"^### (\w+)$", page, flags=re.M)}
    rules = [r for g in yaml.safe_load((MON / "alerts.yml").read_text())["groups"] for r in g["rules"]]
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert url == f'{{{{ or $externalLabels.runbook_base "{alert_cases.BASE}" }}}}#{rule["alert"].lower()}', url
        assert rule["alert"].lower() in anchors, rule["alert"]
        assert "runbook" not in rule["annotations"]


def test_every_alert_fires_where_it_must_and_nowhere_else():
    proc = promtool("test", "rules", "alerts.test.yml")
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    tested = {t["alertname"] for case in yaml.safe_load((MON / "alerts.test.yml").read_text())["tests"]
              for t in case["alert_rule_test"]}
    rules = {r["alert"] for g in yaml.safe_load((MON / "alerts.yml").read_text())["groups"] for r in g["rules"]}
    assert tested == rules  # no alert without its test
    for name in rules:   # and each both raised and quiet somewhere
        checks = [t for case in yaml.safe_load((MON / "alerts.test.yml").read_text())["tests"]
                  for t in case["alert_rule_test"] if t["alertname"] == name]
        assert any(t["exp_alerts"] for t in checks) and any(not t["exp_alerts"] for t in checks), name


@pytest.mark.parametrize("weaken", [("> 0.9", "> 0.99"), ("> 0.85", "> 0.95"), ("for: 2m", "for: 10m"),
                                    ("max by (cluster, job, cgroup) (increase(",
                                     "max by (cluster, job, cgroup, worker) (increase("),
                                    ("[1d] offset 5m))) > 0", "[5m] offset 5m))) > 0"),   # a gap reads as new
                                    ("sum by (cluster) (dask_scheduler_workers)", "sum(dask_scheduler_workers)"),
                                    ("max by (cluster, job, cgroup) (rapidship_memory_workers_budget_bytes)",
                                     "max by (cluster, job, cgroup) (rapidship_memory_budget_bytes)"),
                                    ("unless on (cluster, job, instance, worker, cgroup)\n", "or on (cluster)\n"),
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
