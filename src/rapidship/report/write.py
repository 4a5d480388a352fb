"""The edge of the report: read the workspace, write index.html, the PNG charts and report.json.

`report(ws, variants, export_dirs, out)` is what `invoke report` calls: collect (every record, its
state kept), summarize (pure), draw, render, then write atomically into `out`.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from rapidship.records import Workspace, save, write_atomic
from rapidship.report.charts import charts as draw
from rapidship.report.collect import collect
from rapidship.report.model import Summary
from rapidship.report.page import TIMELINE_MARKS, render, timeline
from rapidship.report.summary import release_run, summarize
from rapidship.report.verdict import verdict

INDEX, SUMMARY = "index.html", "report.json"
CHART_FILES = ("sizes.png", "saved.png", "scan.png", "smoke.png", "paths-*.png")


@dataclass(frozen=True)
class Written:
    summary: Summary
    index: Path
    summary_json: Path
    pngs: list[Path]
    page_bytes: int
    seconds: float


def source_commit(cwd: Path | None = None) -> str:
    """The commit the report is about: git's HEAD (marked when the tree has uncommitted changes),
    else GitLab's CI_COMMIT_SHA, else 'unknown'."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=False, timeout=10)
        if head.returncode == 0 and head.stdout.strip():
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                   capture_output=True, text=True, check=False, timeout=30).stdout.strip()
            return head.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        pass
    return os.environ.get("CI_COMMIT_SHA") or "unknown"


def summary_json(summary: Summary, charts: list[str]) -> dict:
    """report.json: the summary, plus the verdict and counts a script would otherwise recompute."""
    counts = {s: summary.count(s) for s in ("pass", "fail", "corrupt", "stale", "missing", "site")}
    said = verdict(summary)
    return {"verdict": summary.status, "release": said.words, "pending": [asdict(p) for p in said.pending],
            "site_only": [asdict(p) for p in said.site], "counts": counts, "site_checks": summary.site_checks,
            "charts": charts, **asdict(summary)}


def write(summary: Summary, out: Path) -> tuple[Path, Path, list[Path]]:
    drawn = draw(summary)
    out.mkdir(parents=True, exist_ok=True)
    for pattern in CHART_FILES:  # charts of an earlier report that this one does not draw
        for old in out.glob(pattern):
            old.unlink()
    pngs = []
    for name, chart in drawn.items():
        path = out / f"{name}.png"
        path.write_bytes(chart.png)
        pngs.append(path)
    index = out / INDEX
    write_atomic(index, render(summary, drawn))
    js = save(out / SUMMARY, summary_json(summary, [p.name for p in pngs]))
    return index, js, pngs


def report(ws: Workspace, variants, export_dirs: list[Path], out: Path, today: date | None = None,
           commit: str | None = None, scope: tuple[list[str] | None, list[str] | None] = (None, None)) -> Written:
    """`scope`: the --variant and --arch flags (None: from the push records, else the builds)."""
    start = time.monotonic()
    summary = summary_of(ws, variants, export_dirs, today, commit, scope)
    index, js, pngs = write(summary, out)
    return Written(summary, index, js, pngs, index.stat().st_size, round(time.monotonic() - start, 2))


def retime(ws: Workspace, out: Path) -> bool:
    """Bring the page in `out` to the latest release records: its timeline (and report.json's) drawn
    again from each chain record of its variants as it is now, the rest of the page as it was written.
    The chain calls it when it ends: a run that skipped the report stage (its records current) would
    otherwise leave the page showing the run that wrote it. False when there is no such page."""
    import json

    from rapidship.records import RecordError, ReleaseRecord, load

    index, js = out / INDEX, out / SUMMARY
    try:
        data = json.loads(js.read_text())
        page = index.read_text()
        shown = [r["variant"] for r in data.get("releases") or []]
        latest = [load(ws.release(v), ReleaseRecord, f"invoke release --variant {v}", "release record") for v in shown]
    except (OSError, ValueError, KeyError, TypeError, RecordError):
        return False
    start, end = TIMELINE_MARKS
    if not shown or page.count(start) != 1 or page.count(end) != 1:
        return False
    runs = [release_run(r) for r in latest]
    head, rest = page.split(start)
    write_atomic(index, head + start + timeline(runs) + end + rest.split(end, 1)[1])
    save(js, {**data, "releases": [asdict(r) for r in runs]})
    return True


def summary_of(ws: Workspace, variants, export_dirs: list[Path], today: date | None = None, commit: str | None = None,
               scope: tuple[list[str] | None, list[str] | None] = (None, None)) -> Summary:
    """The summary of the records as they are now: what the page is made from, and the verdict (report/verdict.py)."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    records = collect(ws, variants, export_dirs)
    return summarize(records, today=today or now.date(), generated_at=now.isoformat(),
                     commit=commit if commit is not None else source_commit(), variants=scope[0], arches=scope[1])
