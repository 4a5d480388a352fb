"""`invoke report` as a user runs it, on hand-made records: what it writes and what it says."""

from __future__ import annotations

import json
import re

from support.commands import invoke
from unit.report.samples import ARCH, VARIANT, gates


def test_the_task_writes_the_page_pngs_and_summary_and_names_what_is_broken(records, tmp_path):
    records.full(gates=gates(failing={"user": "runs as root"}))
    records.ws.decision(VARIANT, ARCH).write_text('{"passed": true')
    out = tmp_path / "report"
    proc = invoke("report", "--build-dir", str(records.root), "--out", str(out), "--export", str(records.root / "export-*"))
    assert proc.returncode == 0
    err = " ".join(proc.stderr.split())
    assert f"CORRUPT {records.ws.decision(VARIANT, ARCH)}: corrupt scan decision: not JSON" in err
    assert f"fix: run invoke scan --variant {VARIANT} --arch {ARCH}" in err
    assert f"release scope (push records): {VARIANT} {ARCH}" in err
    assert "not in this release: " in err and "cpu-debian12 arm64 (no push record names it)" in err
    assert "9 build record" not in err
    assert (f"only a site or its Harbor can run: Harbor's scan ({VARIANT} {ARCH}, only the site's Harbor): "
            f"invoke harbor.scan --variant {VARIANT}") in err
    said = f"not released: user FAIL ({VARIANT} {ARCH}); trivy CORRUPT ({VARIANT} {ARCH})"
    assert f"release: {said}" in err and "1 FAIL" in err and str(out / "index.html") in err
    assert said in (out / "index.html").read_text()  # the page's words
    # outside a terminal one tab-separated line per row (no box folding a long cell over lines)
    assert re.search(r"^cpu-debian12 amd64\tFAIL\tFAIL: user; CORRUPT: trivy;", proc.stderr, re.M), proc.stderr
    assert proc.stdout == ""
    summary = json.loads((out / "report.json").read_text())
    assert summary["schema_version"] == 1 and summary["verdict"] == "fail" and summary["release"] == said
    assert summary["counts"]["fail"] == 1 and summary["counts"]["corrupt"] == 1
    assert sorted(summary["charts"]) == sorted(p.name for p in out.glob("*.png"))
    row = next(r for r in summary["rows"] if (r["variant"], r["arch"]) == (VARIANT, ARCH))
    assert row["cells"]["user"] == {"status": "fail", "detail": "runs as root", "note": ""}
    assert (out / "index.html").stat().st_size > 10_000
    assert [e["export_id"] for e in summary["exports"]] == ["0123456789abcdef"]


def test_strict_exits_1_unless_everything_passed_and_still_writes_the_page(records, tmp_path):
    out = tmp_path / "report"
    proc = invoke("report", "--build-dir", str(records.root), "--out", str(out), "--strict", check=False)
    assert proc.returncode == 1
    assert "error: report: not every check passed" in proc.stderr and (out / "index.html").is_file()


def test_a_bad_variants_file_is_one_clear_error(tmp_path):
    proc = invoke("report", "--variants-file", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "r"), check=False)
    assert proc.returncode == 2 and "error:" in proc.stderr and "Traceback" not in proc.stderr


def test_the_quickstart_disc_under_build_disc_is_found_without_a_flag(records, tmp_path):
    from rapidship.export.write import record_location
    from unit.report.samples import export

    records.put(records.root / "disc" / "export.json", export())
    record_location(records.ws, records.root / "disc", "0123456789abcdef")
    out = tmp_path / "report"
    invoke("report", "--build-dir", str(records.root), "--out", str(out))
    summary = json.loads((out / "report.json").read_text())
    assert [(e["export_id"], e["state"]["path"]) for e in summary["exports"]] == [
        ("0123456789abcdef", str(records.root / "disc" / "export.json"))]


def test_report_json_carries_the_scope_the_site_checks_and_the_findings(records, tmp_path):
    records.full()
    out = tmp_path / "report"
    invoke("report", "--build-dir", str(records.root), "--out", str(out), "-v", VARIANT, "-a", ARCH)
    summary = json.loads((out / "report.json").read_text())
    assert summary["verdict"] == "site" and summary["counts"]["site"] == 1
    assert summary["scope"]["source"] == "flags" and summary["scope"]["images"] == [[VARIANT, ARCH]]
    assert {o["variant"] for o in summary["scope"]["out_of_scope"]} >= {"cuda12-ubuntu22", VARIANT}
    assert summary["site_checks"] == [f"harbor ({VARIANT} {ARCH})"]
    (scan,) = summary["scans"]
    assert "findings" in scan and "sbom" in scan
    bad = invoke("report", "--build-dir", str(records.root), "--out", str(out), "--variant", "nope", check=False)
    assert bad.returncode == 2 and "--variant: unknown variant 'nope'" in " ".join(bad.stderr.split())
    assert "Traceback" not in bad.stderr
