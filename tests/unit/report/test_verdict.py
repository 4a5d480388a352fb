"""The release's one verdict, from the summary the report makes of real records (samples): released,
released pending a GPU smoke, or not released naming what; site and Harbor checks named with their
command, never passed."""

from __future__ import annotations

from unit.report.samples import ARCH, VARIANT, smoke

from rapidship.records import ReleaseRecord, ReleaseStage
from rapidship.release.plan import STAGES
from rapidship.report.page import render
from rapidship.report.verdict import verdict


def chain(**verdicts: str) -> ReleaseRecord:
    return ReleaseRecord(variant=VARIANT, arches=[ARCH], started_at="2026-12-01T10:00:00+00:00",
                         stages=[ReleaseStage(name=s, verdict=verdicts.get(s.replace("-", "_"), "pass")) for s in STAGES])


def test_every_check_passed_is_released_and_harbor_is_named_with_its_command(records):
    v = verdict(records.full().summary())
    assert v.words == "released" and v.released
    assert [x.command for x in v.site] == [f"invoke harbor.scan --variant {VARIANT}"]
    assert "only the site's Harbor" in v.site[0].where


def test_a_failed_smoke_is_not_released(records):
    records.full(smoke=smoke("FAIL", ["no spill reached disk"]))
    v = verdict(records.summary())
    assert not v.released and v.words == f"not released: smoke FAIL ({VARIANT} {ARCH})"


def test_a_cuda_image_without_a_smoke_is_released_pending_a_gpu(records):
    records.variants = [v.model_copy(update={"cuda": "12.9"}) if v.id == VARIANT else v for v in records.variants]
    records.full()
    (records.ws.smoke_dir() / f"{VARIANT}-{ARCH}-cpu-uid1001.json").unlink()
    v = verdict(records.summary())
    assert v.words == "released pending: smoke on a GPU" and v.released
    assert v.pending[0].command == f"invoke smoke --variant {VARIANT} --arch {ARCH} --mode gpu --gpus all"
    assert v.pending[0].where.startswith(f"CI job smoke:{VARIANT}:{ARCH}")


def test_a_chain_that_stopped_is_not_released_though_every_record_passed(records):
    records.full()
    records.put(records.ws.release(VARIANT), chain(scan="FAIL", push="not run"))
    v = verdict(records.summary())
    assert v.words == f"not released: invoke release --variant {VARIANT}: stage scan FAIL"
    records.put(records.ws.release(VARIANT), chain(report="running"))  # the page is written by the report stage
    assert verdict(records.summary()).words == "released"


def test_the_page_says_the_verdict_in_the_same_words(records):
    records.full(smoke=smoke("FAIL", ["no spill reached disk"]))
    summary = records.summary()
    html = render(summary, {})
    assert verdict(summary).words in html
    assert f"invoke harbor.scan --variant {VARIANT}" in html
