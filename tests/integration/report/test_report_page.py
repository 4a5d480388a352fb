"""The release report of a real cpu-debian12 run, opened in a real headless Chromium.

The run: the session's real cpu-debian12 image, then the real tasks as a user runs them, in a
project folder of their own (the checkout's code and data linked in, its own build/): `invoke
render`, `gates`, `size-report`, `scan` (the real trivy, offline, with a DB planted for packages
the image really has, under a policy that accepts one finding until 12 days from now), `smoke`
(2 x 768 MiB of data through a 768 MiB container), `export --unsigned` onto a DVD-sized volume,
and `invoke report`. The build record is the session's, with its ref moved to a tag of this test
(the same image id): parallel builds move the shared tag, and a gate on another image than the
build record would rightly read STALE.

Chromium is Debian's (`chromium`), driven by Playwright with `executable_path` (no browser
download). Every request is routed: anything other than the page's own file:// URL fails the
test; DNS and the proxy point nowhere, so nothing can leave the machine anyway. The screenshot is
kept under build/report-screenshot/ (a CI artifact).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from datetime import date, timedelta
from pathlib import Path

import pytest

from rapidship.config.matrix import load_matrix
from rapidship.records import Workspace, save
from support.commands import CPU_VARIANT, ROOT

pytestmark = pytest.mark.docker

ARCH = "amd64"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = ROOT / "build" / "report-screenshot"
LINKED = ("src", "templates", "envs", "locks", "policy", "variants.yaml", "ci", ".hadolint.yaml")
OFFLINE = ("--skip-db-update", "--offline-scan")
EXPIRING_IN = 12


def run(cwd: Path, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(["invoke", *args], cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"invoke {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def project(engine, cpu_image, tmp_path_factory):
    """A project folder of this test: the checkout linked in, tasks.py copied, its own build/."""
    folder = tmp_path_factory.mktemp("release")
    for name in LINKED:
        if (ROOT / name).exists():
            (folder / name).symlink_to(ROOT / name)
    shutil.copy2(ROOT / "tasks.py", folder / "tasks.py")
    v = load_matrix(ROOT / "variants.yaml").get(CPU_VARIANT)
    repository = f"rapidship-test-{uuid.uuid4().hex[:10]}/dask"
    assert engine.images.get(cpu_image.image_id).tag(repository, v.tag(ARCH))
    pinned = f"{repository}:{v.tag(ARCH)}"
    save(Workspace(folder / "build").build(CPU_VARIANT, ARCH), cpu_image.model_copy(update={"ref": pinned}))
    yield folder, pinned
    subprocess.run(["docker", "rmi", pinned], capture_output=True, check=False)  # the tag only: the image stays


@pytest.fixture(scope="module")
def release(project, engine, cpu_image, tmp_path_factory):
    """Every stage of a cpu-debian12 release that runs here, then the report: its records and timings."""
    from integration.gates.test_scan import dpkg_sources

    folder, pinned = project
    timings = {}

    def stage(name, *args, env=None):
        start = time.monotonic()
        proc = run(folder, *args, env=env)
        timings[name] = round(time.monotonic() - start, 2)
        return proc

    stage("render", "render", "--variant", CPU_VARIANT)
    stage("gates", "gates", "--variant", CPU_VARIANT, "--arch", ARCH)
    stage("size-report", "size-report", "--variant", CPU_VARIANT, "--arch", ARCH)

    status = engine.containers.run(pinned, entrypoint=["cat"], command=["/var/lib/dpkg/status"], remove=True,
                                   name=f"rapidship-test-{uuid.uuid4().hex[:10]}", network_disabled=True).decode()
    sources = dpkg_sources(status)
    fixable = next(s for s in ("gzip", "tar", "sed", "grep", *sorted(sources)) if s in sources)
    unfixed = next(s for s in ("zlib", "bzip2", "xz-utils", *sorted(sources)) if s in sources and s != fixable)
    cache = tmp_path_factory.mktemp("trivy-cache")
    (cache / "advisories.yaml").write_text(json.dumps([
        {"source": "debian 12", "package": fixable, "id": "CVE-2099-1001", "severity": "MEDIUM",
         "fixed": f"{sources[fixable][2]}+fix1"},
        {"source": "debian 12", "package": fixable, "id": "CVE-2099-1003", "severity": "LOW",
         "fixed": f"{sources[fixable][2]}+fix1"},
        {"source": "debian 12", "package": unfixed, "id": "CVE-2099-1002", "severity": "HIGH"}]))
    run(folder, "trivy-db", "--advisories", str(cache / "advisories.yaml"), "--cache-dir", str(cache))
    expiring = (date.today() + timedelta(days=EXPIRING_IN)).isoformat()
    policy = cache / "release-policy.yaml"
    policy.write_text(json.dumps({"defaults": {"threshold": "MEDIUM", "ignore_unfixed": True, "allowlist": [
        {"id": "CVE-2099-1001", "reason": "planted by the test suite: gzip is never fed untrusted input here",
         "expires": expiring},
        {"id": "CVE-2099-1004", "reason": "planted by the test suite: an entry that matches nothing",
         "expires": (date.today() + timedelta(days=170)).isoformat()}]}}))
    stage("scan", "scan", "--variant", CPU_VARIANT, "--arch", ARCH, "--image", pinned, "--policy", str(policy),
          "--cache-dir", str(cache), *OFFLINE)
    stage("smoke", "smoke", "--variant", CPU_VARIANT, "--arch", ARCH, "--memory", "768m")
    stage("export", "export", "--variant", CPU_VARIANT, "--arch", ARCH, "--unsigned", "--media", "dvd",
          "--out", "build/export-release")
    # this folder is no git checkout: the commit comes the way GitLab hands it to a job
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    proc = stage("report", "report", "--out", "build/report", env={"CI_COMMIT_SHA": head or "unknown"})
    out = folder / "build" / "report"
    return {"folder": folder, "out": out, "proc": proc, "timings": timings, "expiring": expiring,
            "summary": json.loads((out / "report.json").read_text())}


def open_in_chromium(page_file: Path, screenshot: Path | None = None) -> dict:
    """Open the page offline; every request routed (only the page's own file passes), the
    console and page errors collected, the matrix and the allowlist read back as text."""
    from playwright.sync_api import sync_playwright

    own = page_file.resolve().as_uri()
    facts: dict = {"requests": [], "blocked": [], "console": [], "errors": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
            "--disable-background-networking", "--disable-component-update", "--no-first-run"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1100}, service_workers="block")

            def route(r):
                if r.request.url == own:
                    r.continue_()
                else:
                    facts["blocked"].append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            page = context.new_page()
            page.on("request", lambda req: facts["requests"].append(req.url))
            page.on("console", lambda m: facts["console"].append((m.type, m.text)))
            page.on("pageerror", lambda e: facts["errors"].append(str(e)))
            page.on("requestfailed", lambda req: facts["errors"].append(f"request failed: {req.url}"))
            page.goto(own, wait_until="load")
            page.wait_for_load_state("networkidle")
            facts["rows"] = page.eval_on_selector_all(
                "table.matrix tbody tr",
                "rows => rows.map(r => [r.dataset.variant + ' ' + r.dataset.arch, "
                "Array.from(r.children).map(c => c.innerText.trim())])")
            facts["columns"] = page.eval_on_selector_all("table.matrix thead th", "hs => hs.map(h => h.innerText.trim())")
            facts["expiring"] = page.eval_on_selector_all("tr.expiring", "rows => rows.map(r => r.innerText)")
            facts["expiring_background"] = page.eval_on_selector_all(
                "tr.expiring td", "cells => cells.map(c => getComputedStyle(c).backgroundColor)")
            facts["verdict"] = page.inner_text("#verdict")
            facts["scope"] = page.inner_text("#scope")
            facts["overall_right"] = page.eval_on_selector("table.matrix", "t => t.getBoundingClientRect().right")
            facts["viewport"] = page.evaluate("document.documentElement.clientWidth")
            facts["text"] = page.inner_text("body")
            facts["svgs"] = page.eval_on_selector_all(
                "svg.chart", "s => s.map(x => [x.getBoundingClientRect().width, x.getBoundingClientRect().height])")
            if screenshot:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=True)
                page.screenshot(path=str(screenshot.with_name(screenshot.stem + "-top.png")))
        finally:
            browser.close()
    return facts


def cells(facts: dict, image: str) -> dict[str, str]:
    row = dict(facts["rows"])[image]
    return {col: text.split("\n")[0] for col, text in zip(facts["columns"], row)}


def test_the_report_of_a_real_run_in_chromium(release):
    facts = open_in_chromium(release["out"] / "index.html", SCREENSHOTS / "report.png")
    # self-contained: the page is the only request, nothing blocked, nothing went wrong
    assert facts["requests"] == [(release["out"] / "index.html").resolve().as_uri()]
    assert facts["blocked"] == [] and facts["errors"] == []
    assert [m for m in facts["console"] if m[0] in ("error", "warning")] == []
    # no push here: the release is what was built; the rest of the matrix is listed once, not as rows
    v = load_matrix(ROOT / "variants.yaml")
    assert [image for image, _ in facts["rows"]] == [f"{CPU_VARIANT} {ARCH}"]
    others = [x.id for x in v.variants.values() if x.id != CPU_VARIANT]
    assert "from the build records" in facts["scope"] and all(o in facts["scope"] for o in others)
    mine = cells(facts, f"{CPU_VARIANT} {ARCH}")
    passed = ("build", "size", "labels", "user", "suid", "secrets", "trivy", "smoke")
    assert {c: mine[c] for c in passed} == {c: "\u2713 PASS" for c in passed}, mine
    assert mine["harbor"] == "\u25c7 SITE ONLY"  # only a site's Harbor scans: named so, never passed
    assert mine["signature"] == "\u2013 NOT RUN"  # no key here: not run, never passed
    # at 1400 px the whole matrix, its overall column too, is inside the window
    assert facts["overall_right"] <= facts["viewport"], (facts["overall_right"], facts["viewport"])
    said = f"not released: signature NOT RUN ({CPU_VARIANT} {ARCH})"  # the one verdict, as the terminal says it
    assert said in facts["verdict"] and release["summary"]["commit"] in facts["text"]
    # the allowlist entry that expires within 30 days is highlighted, with its reason
    (expiring,) = facts["expiring"]
    assert "CVE-2099-1001" in expiring and f"EXPIRES IN {EXPIRING_IN} DAY(S)" in expiring and "gzip is never fed" in expiring
    assert set(facts["expiring_background"]) == {"rgb(255, 245, 177)"}
    # the charts drew, at the page's width
    assert len(facts["svgs"]) >= 5 and all(w > 600 and h > 80 for w, h in facts["svgs"])
    # what the records say is on the page
    s = release["summary"]
    (export,) = s["exports"]
    (volume,) = export["volumes"]
    assert volume["iso"] in facts["text"] and volume["iso_sha256"] in facts["text"] and "UNSIGNED" in facts["text"]
    (run_,) = s["smoke"]
    (stage,) = run_["stages"]
    assert stage["disk_bytes"] > 0 and stage["spill_files"] > 0 and run_["cell"]["status"] == "pass"
    (version,) = [x for x in s["versions"] if x["variant"] == CPU_VARIANT]
    assert version["images"][0]["lock_sha256"] in facts["text"]
    assert version["rendered_lock_sha256"] == version["images"][0]["lock_sha256"]
    assert (SCREENSHOTS / "report.png").stat().st_size > 50_000


def test_a_failing_gate_and_a_corrupt_record_read_as_such(release, tmp_path):
    broken = tmp_path / "build"
    shutil.copytree(release["folder"] / "build", broken, symlinks=True,
                    ignore=shutil.ignore_patterns("*.iso", "images.tar.zst*", "spill", "report", "builder", "runtime"))
    ws = Workspace(broken)
    gates_path = ws.gates(CPU_VARIANT, ARCH)
    doc = json.loads(gates_path.read_text())
    suid = next(g for g in doc["gates"] if g["gate"] == "suid")
    suid.update(passed=False, reasons=["/usr/local/bin/planted has the setuid bit (planted by the report test)"])
    doc["passed"] = False
    gates_path.write_text(json.dumps(doc))
    (smoke_record,) = ws.smoke_dir().glob("*.json")
    smoke_record.write_text(smoke_record.read_text()[:200])  # cut short: not JSON any more
    out = tmp_path / "report"
    proc = subprocess.run(["invoke", "report", "--build-dir", str(broken), "--out", str(out),
                           "--export", str(broken / "export-*")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"CORRUPT {smoke_record}: corrupt smoke record: not JSON" in proc.stderr  # the command says so
    facts = open_in_chromium(out / "index.html", SCREENSHOTS / "report-failing.png")
    assert facts["blocked"] == [] and facts["errors"] == []
    mine = cells(facts, f"{CPU_VARIANT} {ARCH}")
    assert mine["suid"] == "\u2717 FAIL" and mine["smoke"] == "! CORRUPT" and mine["user"] == "\u2713 PASS"
    row = dict(facts["rows"])[f"{CPU_VARIANT} {ARCH}"]
    assert "planted has the setuid bit" in row[facts["columns"].index("suid")]
    assert "FAIL" in row[facts["columns"].index("overall")]
    assert "Records that could not be read" in facts["text"] and str(smoke_record) in facts["text"]


def test_report_time_and_page_size_on_the_real_records(release):
    """Measured, printed for docs/report.md: the report reads records only, so it is quick."""
    proc, out = release["proc"], release["out"]
    page = (out / "index.html").stat().st_size
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert {"sizes.png", "saved.png", "scan.png", "smoke.png", f"paths-{CPU_VARIANT}-{ARCH}.png"} <= set(pngs)
    assert page < 3_000_000 and release["timings"]["report"] < 30
    print(f"\ninvoke report: {release['timings']['report']} s wall (whole task), page {page:,} bytes, "
          f"PNGs {sum((out / p).stat().st_size for p in pngs):,} bytes; stages {release['timings']}")
    assert "release: not released: signature NOT RUN" in proc.stderr
