"""A real Prometheus (Debian's server) on loopback with the shipped alert rules and the shipped
worker job, its targets a file_sd file the test writes; scrapes and rule evaluations every second
(the shipped 15 s would see a 30 s run twice)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from support.commands import ROOT
from support.registry_fixtures import free_port

MONITORING = ROOT / "monitoring"


class Prometheus:
    def __init__(self, url: str, targets: Path) -> None:
        self.url, self.targets = url, targets

    def query(self, expr: str) -> list[dict]:
        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=10) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def by_worker(self, expr: str) -> dict[str, float]:
        return {r["metric"]["worker"]: float(r["value"][1]) for r in self.query(expr)}

    def firing(self, alert: str) -> list[dict]:
        return [r["metric"] for r in self.query(f'ALERTS{{alertname="{alert}", alertstate="firing"}}')]


@contextlib.contextmanager
def serve_prometheus(d: Path, every: str = "1s"):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed: scripts/setup installs Debian's prometheus package")
    shutil.copy(MONITORING / "alerts.yml", d / "alerts.yml")
    shipped = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    (job,) = [j for j in shipped["scrape_configs"] if j["job_name"] == "dask-workers"]
    job["file_sd_configs"] = [{"files": [str(d / "targets.json")], "refresh_interval": "1s"}]
    config = {**shipped, "global": {"scrape_interval": every, "evaluation_interval": "1s", "scrape_timeout": every},
              "scrape_configs": [job]}
    (d / "prometheus.yml").write_text(yaml.safe_dump(config))
    subprocess.run(["promtool", "check", "config", str(d / "prometheus.yml")], check=True, capture_output=True)
    port = free_port()
    log = open(d / "prometheus.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([binary, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(60):
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"prometheus did not become ready: {(d / 'prometheus.log').read_text()[-2000:]}")
        yield Prometheus(url, d / "targets.json")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
