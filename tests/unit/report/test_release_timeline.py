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
