"""When a stage's record is current, over the records the stages write (tests/support/gated_records:
the one writer of render, build, gates, scan and content records for tests): bound to the image id,
never trusted for another image."""

from __future__ import annotations

from pathlib import Path

import pytest

from rapidship.config.matrix import load_matrix
from rapidship.release.current import Release, check
from rapidship.release.plan import StageFailed
from support.commands import ROOT
from support.gated_records import write_gated

VARIANT, ARCH, LOCK = "cpu-debian12", "amd64", "5e" * 32
IMAGE, OTHER = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def decided_under(path: str) -> dict:
    """The policy block scan writes into its decision, by scan's own code."""
    from rapidship.gates.policy import describe, load_policy

    return describe(load_policy(path, VARIANT))


@pytest.fixture
def rel(tmp_path):
    v = load_matrix(ROOT / "variants.yaml").get(VARIANT)
    return Release(variant=v, arch_flag=ARCH, arches=(ARCH,), ws=None, registry="127.0.0.1:5000/staging",
                   key="keys/cosign.key", public_key="keys/cosign.pub", policy=str(ROOT / "policy/trivy.yaml"))


def fresh_db(rel) -> None:
    """The scan decision names the DB it used as trivy's metadata.json states it: updated today."""
    from datetime import datetime, timezone

    from rapidship.records import read_decision

    decision = read_decision(rel.ws, VARIANT, ARCH)
    db = {"Version": 2, "UpdatedAt": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    rel.ws.save(rel.ws.decision(VARIANT, ARCH), decision.model_copy(update={"db": db}))


def at(rel, build: Path):
    from dataclasses import replace
    from rapidship.records import Workspace

    return replace(rel, ws=Workspace(build))


def test_gates_and_scan_records_of_the_built_image_are_current(rel, tmp_path):
    write_gated(tmp_path, VARIANT, {ARCH: ("rapidship/dask:x", IMAGE)}, lock=LOCK, policy=decided_under(rel.policy))
    r = at(rel, tmp_path)
    fresh_db(r)
    gates, scan = check("gates", r), check("scan", r)
    assert gates.stale == [] and gates.bound == {ARCH: IMAGE}
    assert scan.stale == [] and scan.record.endswith(f"{VARIANT}/scan-{ARCH}/decision.json")


def test_records_of_another_image_are_never_current(rel, tmp_path):
    """A later build (another image id) makes the gate and scan records of the earlier one stale."""
    write_gated(tmp_path, VARIANT, {ARCH: ("rapidship/dask:x", OTHER)}, lock=LOCK)
    r = at(rel, tmp_path)
    build = r.ws.build(VARIANT, ARCH)
    build.write_text(build.read_text().replace(OTHER, IMAGE))  # the build record now names the new image
    for stage, what in (("gates", "gate record"), ("scan", "scan decision")):
        stale = check(stage, r).stale
        assert any(f"STALE {what}: it names image {OTHER[:19]}" in p for p in stale), stale


def test_a_gate_that_failed_is_not_current(rel, tmp_path):
    write_gated(tmp_path, VARIANT, {ARCH: ("rapidship/dask:x", IMAGE)}, lock=LOCK, passed=False)
    stale = check("gates", at(rel, tmp_path)).stale
    assert any("passed is false" in p for p in stale), stale


def test_a_scan_decided_under_other_policy_rules_is_not_current(rel, tmp_path):
    strict = tmp_path / "strict.yaml"
    strict.write_text('{"defaults": {"threshold": "LOW"}}')
    write_gated(tmp_path, VARIANT, {ARCH: ("rapidship/dask:x", IMAGE)}, lock=LOCK, policy=decided_under(str(strict)))
    stale = check("scan", at(rel, tmp_path)).stale
    assert stale and "decided under other policy rules" in stale[0]


def test_a_stage_after_build_without_a_build_record_cannot_be_checked(rel, tmp_path):
    with pytest.raises(StageFailed, match="no record"):
        check("gates", at(rel, tmp_path))


def test_a_scan_against_a_db_that_grew_too_old_is_not_current():
    from datetime import date

    from rapidship.release.current import db_too_old

    db = {"UpdatedAt": "2026-12-01T00:00:00Z"}
    assert db_too_old(db, 7, date(2026, 12, 8)) == ""
    assert db_too_old(db, 7, date(2026, 12, 9)) == "the DB it was decided with is 8 days old (max_db_age_days: 7)"
    assert db_too_old(db, None, date(2027, 1, 1)) == ""
    assert db_too_old({}, 7, date(2026, 12, 9)) == "the DB it was decided with states no update time"


def test_smoke_is_current_only_for_a_passing_run_of_the_built_image(rel, tmp_path):
    """The report's own rule over the records `invoke smoke` writes; a CUDA image's is pending on a GPU."""
    from dataclasses import replace

    from unit.report.samples import smoke

    write_gated(tmp_path, VARIANT, {ARCH: ("rapidship/dask:x", IMAGE)}, lock=LOCK)
    r = at(rel, tmp_path)
    assert check("smoke", r).stale == [f"{ARCH}: NOT RUN: no smoke run of this image: run invoke smoke"]
    assert check("smoke", r).elsewhere == ""
    record = r.ws.smoke_dir() / f"{VARIANT}-{ARCH}-cpu-uid1001.json"
    r.ws.save(record, smoke(ref=OTHER))
    assert "STALE" in check("smoke", r).stale[0]
    r.ws.save(record, smoke(ref=IMAGE))
    assert check("smoke", r).stale == []
    r.ws.save(record, smoke("FAIL", ["no spill reached disk"], ref=IMAGE))
    assert "no spill reached disk" in check("smoke", r).stale[0]
    record.unlink()
    gpu = replace(r, variant=r.variant.model_copy(update={"cuda": "12.9"}))
    pending = check("smoke", gpu)
    assert pending.stale and pending.elsewhere == (f"smoke on a GPU (CI job smoke:{VARIANT}:{ARCH}, a runner tagged "
                                                   f"gpu): invoke smoke --variant {VARIANT} --arch {ARCH} --mode gpu "
                                                   "--gpus all")
