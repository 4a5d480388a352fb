"""The report shows the release's stage timeline from the chain's own record (build/<variant>/release.json),
as `plan.walk` writes it: every stage, its verdict, time and bytes; a stopped chain names its stage."""

from __future__ import annotations

import itertools
import re
from datetime import date

from rapidship.config.matrix import load_matrix
from rapidship.records import Workspace
from rapidship.release.plan import STAGES, Check, Ran, StageFailed, fresh, walk
from rapidship.report.write import report
from support.commands import ROOT

VARIANT = "cpu-debian12"


def chain_record(ws: Workspace, fails: str | None = None) -> None:
    """Walk the chain with the workspace as its store: the record lands where invoke release puts it."""
    made: set[str] = set()
    ticks = itertools.count()

    def run(stage):
        if stage == fails:
            raise StageFailed(f"scan of {stage}: 1 finding(s) fail the policy <b>policy/trivy.yaml</b>")
        made.add(stage)
        return Ran(254_000_000, 1_000)

    walk(fresh(VARIANT, ["amd64"]), lambda s: Check(f"build/{VARIANT}/{s}.json", [] if s in made else ["no record"]),
         run, lambda: float(next(ticks)), lambda r: ws.save(ws.release(VARIANT), r))


def page_of(tmp_path, ws):
    variants = list(load_matrix(ROOT / "variants.yaml").variants.values())
    written = report(ws, variants, [], tmp_path / "report", today=date(2026, 12, 5), commit="c0ffee",
                     scope=([VARIANT], ["amd64"]))
    return written, written.index.read_text()


def test_every_stage_of_the_chain_is_a_row_with_its_verdict(tmp_path):
    ws = Workspace(tmp_path / "build")
    chain_record(ws)
    written, html = page_of(tmp_path, ws)
    rows = re.findall(r'<tr data-stage="([^"]+)">.*?<b>([^<]+)</b>', html, re.S)
    assert rows == [(s, "pass") for s in STAGES]
    assert "every stage passed or was current" in html
    assert [s.name for s in written.summary.releases[0].steps] == list(STAGES)


def test_a_stopped_chain_names_its_stage_and_escapes_its_words(tmp_path):
    ws = Workspace(tmp_path / "build")
    chain_record(ws, fails="scan")
    _, html = page_of(tmp_path, ws)
    rows = dict(re.findall(r'<tr data-stage="([^"]+)">.*?<b>([^<]+)</b>', html, re.S))
    assert rows == {"build": "pass", "gates": "pass", "scan": "FAIL", "push": "not run", "smoke": "not run",
                    "sign": "not run", "export": "not run", "export-verify": "not run", "report": "not run"}
    assert "stopped at scan" in html
    assert "<b>policy/trivy.yaml</b>" not in html and "&lt;b&gt;policy/trivy.yaml&lt;/b&gt;" in html


def test_no_chain_record_no_timeline(tmp_path):
    ws = Workspace(tmp_path / "build")
    written, html = page_of(tmp_path, ws)
    assert 'id="release"' not in html and written.summary.releases == []


def timeline(html: str) -> dict[str, tuple[str, str]]:
    """stage -> (the verdict cell's class, the time cell) of the page's timeline."""
    return {name: (cls, time) for name, cls, time in re.findall(
        r'<tr data-stage="([^"]+)">.*?<td class="st (\w+)">.*?<td class="time">(.*?)</td>', html, re.S)}


def test_a_no_op_run_does_not_look_like_work(tmp_path):
    """Every stage skipped (its record current): a hollow marker labelled skipped, never a bar as long
    as a stage that worked, nor the green of a pass."""
    ws = Workspace(tmp_path / "build")
    ticks = itertools.count()
    walk(fresh(VARIANT, ["amd64"]), lambda s: Check(f"build/{VARIANT}/{s}.json", []), lambda s: Ran(),
         lambda: next(ticks) / 100, lambda r: ws.save(ws.release(VARIANT), r))
    _, html = page_of(tmp_path, ws)
    rows = timeline(html)
    assert list(rows) == list(STAGES)
    for name, (cls, time) in rows.items():
        assert cls == "skipped", name
        assert 'class="bar skipped"' in time and "width:" not in time and "skipped" in re.sub(r"<[^>]+>", "", time)
    assert 'class="bar pass"' not in html
    assert "nothing to do" in html


def test_a_stage_that_worked_gets_the_bar_the_skipped_ones_a_marker(tmp_path):
    ws = Workspace(tmp_path / "build")
    clock = iter([0, 0, 0, 30, *range(31, 60)])  # build runs 30 s, every other stage is current
    made: list[str] = []
    walk(fresh(VARIANT, ["amd64"]), lambda s: Check(f"build/{VARIANT}/{s}.json", ["no record"] if s == "build" and not made
                                                   else []),
         lambda s: made.append(s) or Ran(1, 2), lambda: float(next(clock)), lambda r: ws.save(ws.release(VARIANT), r))
    _, html = page_of(tmp_path, ws)
    rows = timeline(html)
    assert rows["build"][0] == "pass" and 'class="bar pass" style="width:100.0%' in rows["build"][1]
    assert all(rows[s][0] == "skipped" and 'class="bar skipped"' in rows[s][1] for s in STAGES[1:])


def test_the_page_shows_the_latest_release_record_not_the_run_that_wrote_it(tmp_path):
    """Run 1 wrote the page (its report stage ran); run 2, a minute later, found every record current
    and skipped the report stage. At its end the chain brings the page's timeline to its own record:
    the page shows run 2, the latest, not run 1."""
    from rapidship.records import ReleaseRecord
    from rapidship.report.write import retime

    ws = Workspace(tmp_path / "build")
    chain_record(ws)
    first = ws.load(ws.release(VARIANT), ReleaseRecord, "invoke release", "release record")
    written, _ = page_of(tmp_path, ws)
    later = first.model_copy(update={"started_at": "2026-12-05T10:01:00+00:00", "stages": [
        s.model_copy(update={"verdict": "skipped", "seconds": 0.01, "started_at": "2026-12-05T10:01:00+00:00"})
        for s in first.stages]})
    ws.save(ws.release(VARIANT), later)
    assert first.started_at != later.started_at
    retime(ws, written.index.parent)
    html = written.index.read_text()
    assert "started 2026-12-05T10:01:00+00:00" in html and f"started {first.started_at}" not in html
    assert set(dict(re.findall(r'<tr data-stage="([^"]+)">.*?<b>([^<]+)</b>', html, re.S)).values()) == {"skipped"}
    assert html.count('<section id="release">') == 1 and '<section id="matrix">' in html
    import json

    assert [r["started_at"] for r in json.loads((written.index.parent / "report.json").read_text())["releases"]] == [
        later.started_at]
