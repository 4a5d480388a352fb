"""The pages whose blocks start where docs/quickstart.md ends (its registry up, the image built,
pushed and imported again), each run as written in the quickstart's scratch checkout, in its own
shell, in order: every console block's printout compared with the page's, and the figures the
page quotes from the run's records compared with them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from support.commands import ROOT
from support.doc_pages import compare, run_page, runnable, user_env

pytestmark = pytest.mark.docker


def page_text(page: str) -> str:
    return " ".join((ROOT / page).read_text().split())


def holding(root: Path, secret: str, skip: Path) -> list[str]:
    """The files under root (not under skip) whose bytes contain the secret."""
    needle = secret.encode()
    return [str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and not p.is_relative_to(skip) and needle in p.read_bytes()]


def test_the_deploy_pages_compose_block_runs_against_the_quickstarts_registry(quickstart, tmp_path):
    quickstart.require()
    page = "docs/deploy.md"
    work = quickstart.work
    docker_config = tmp_path / "docker-config"   # the pulling user's own, never the checkout's
    docker_config.mkdir()
    try:
        proc = run_page(runnable(page), work, user_env(DOCKER_CONFIG=str(docker_config)), timeout=600)
    finally:
        subprocess.run(["docker-compose", "-p", "rapidship", "-f", "build/deploy/compose.yaml", "--profile", "check",
                        "down", "-v", "--remove-orphans"], cwd=work, capture_output=True)
        compose = work / "build/deploy/compose.yaml"
        pulled = set(re.findall(r"^\s*image: (127\.0\.0\.1:\d+/\S+@sha256:[0-9a-f]{64})$", compose.read_text(), re.M)
                     ) if compose.is_file() else set()
        if pulled:   # the name the pull gave (the loopback registry's port is this run's alone)
            subprocess.run(["docker", "rmi", *pulled], capture_output=True)
    assert proc.returncode == 0, f"{page} failed as written:\n{proc.stdout[-5000:]}"
    assert re.search(r'"verdict": "PASS"', proc.stdout), proc.stdout[-3000:]
    sizing = re.search(r"`(\d+ worker\(s\) x \d+ MiB \(dask --memory-limit \d+ MiB\), spill \d+ MiB each), image",
                       page_text(page))
    assert sizing and sizing.group(1) in " ".join(proc.stdout.split()), "the page's sizing is not what deploy printed"
    password = re.search(r"^export RAPIDSHIP_REGISTRY_PASSWORD=(\S+)$",
                         (work / "build/registry/env.sh").read_text(), re.M).group(1)
    assert holding(work, password, work / "build/registry") == []   # not in compose.yaml, deploy.json, the disc ...
    assert password not in (docker_config / "config.json").read_text()   # and logged out again


def test_the_scan_pages_demo_prints_what_the_page_shows(quickstart):
    quickstart.require()
    page = "docs/scan.md"
    work = quickstart.work
    decision = work / "build/cpu-debian12/scan-amd64/decision.json"
    before = decision.read_bytes()
    blocks = runnable(page)
    proc = run_page(blocks, work, user_env(), timeout=900)
    assert compare(page, blocks, proc.stdout) == []
    assert decision.read_bytes() == before, "the demo replaced the image's own scan decision"

    text = page_text(page)
    lows = re.search(r"the two LOW rows are (\S+) \(\w+\) and (\S+) from", text)
    verdicts = json.loads((work / "build/demo-scan/decision.json").read_text())["verdicts"]
    assert lows and sorted(lows.groups()) == sorted(v["id"] for v in verdicts if v["severity"] == "LOW"), verdicts
    results = json.loads((work / "build/demo-scan/trivy.json").read_text())["Results"]
    os_pkgs = sum(len(r.get("Packages") or []) for r in results if r.get("Class") == "os-pkgs")
    py_pkgs = sum(len(r.get("Packages") or []) for r in results if r.get("Class") == "lang-pkgs")
    said = re.search(r"(\d+) packages: (\d+) Debian packages and (\d+) Python packages", text)
    assert said and [int(x) for x in said.groups()] == [os_pkgs + py_pkgs, os_pkgs, py_pkgs], (
        said and said.group(0), os_pkgs, py_pkgs)
    config = json.loads((work / "build/demo-scan/trivy-config.json").read_text())["Results"]
    passed = sum(r.get("MisconfSummary", {}).get("Successes", 0) for r in config)
    failed = sorted(m["ID"] for r in config for m in r.get("Misconfigurations") or [] if m.get("Status") == "FAIL")
    checks = re.search(r"(\d+) Dockerfile checks ran on `build/cpu-debian12/Dockerfile` with no network; (\d+) "
                       r"passed and one LOW \((DS\d+)", text)
    assert checks and (int(checks.group(1)), int(checks.group(2)), [checks.group(3)]) == (
        passed + len(failed), passed, failed), (checks and checks.group(0), passed, failed)


def test_the_monitoring_pages_cluster_smoke_runs_as_written(quickstart):
    quickstart.require()
    page = "docs/monitoring.md"
    proc = run_page(runnable(page), quickstart.work, user_env(), timeout=600)
    assert proc.returncode == 0, f"{page} failed as written:\n{proc.stdout[-5000:]}"
    records = list((quickstart.work / "build/smoke").glob("*-cluster2-*.json"))
    assert records and all(json.loads(r.read_text())["verdict"] == "PASS" for r in records), records
    assert (quickstart.work / "build/smoke/targets.json").is_file()
