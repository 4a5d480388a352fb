"""The release chain's walk over its stages: skip what is current, stop at the first stage that says no."""

from __future__ import annotations

import itertools

import pytest

from rapidship.release.plan import (FAIL, NOT_RUN, PASS, PENDING, SKIPPED, STAGES, Check, Ran, StageFailed, fresh, rows,
                                   timeline_line, walk)


def clock():
    ticks = itertools.count()
    return lambda: float(next(ticks))


def chain(current: set[str], fails: str | None = None, leaves_stale: str | None = None):
    """check/run over in-memory records: `current` stages have a current record; a stage that runs
    makes its record current, except `leaves_stale`; `fails` says no."""
    made, ran, saved = set(current), [], []

    def check(stage):
        return Check(f"build/x/{stage}.json", [] if stage in made else [f"no {stage} record"], {"amd64": "sha256:ab"})

    def run(stage):
        ran.append(stage)
        if stage == fails:
            raise StageFailed(f"{stage}: said no")
        if stage != leaves_stale:
            made.add(stage)
        return Ran(10, 20)

    record = walk(fresh("cpu-debian12", ["amd64"]), check, run, clock(), saved.append)
    return record, ran, saved


def test_every_stage_runs_in_order_on_a_fresh_workspace():
    record, ran, _ = chain(set())
    assert ran == list(STAGES)
    assert [s.verdict for s in record.stages] == [PASS] * len(STAGES)
    assert record.passed is True and record.stopped_at == ""
    assert all(s.read_bytes == 10 and s.written_bytes == 20 for s in record.stages)


def test_current_stages_are_skipped_and_say_what_they_are_bound_to():
    record, ran, _ = chain(set(STAGES))
    assert ran == []
    assert [s.verdict for s in record.stages] == [SKIPPED] * len(STAGES)
    assert all(s.why == "current: amd64 sha256:ab" for s in record.stages)


@pytest.mark.parametrize("failing", STAGES)
def test_the_first_stage_that_says_no_stops_the_chain_and_is_named(failing):
    i = STAGES.index(failing)
    record, ran, saved = chain(set(), fails=failing)
    assert ran == list(STAGES[:i + 1])  # nothing after it ran
    assert record.passed is False and record.stopped_at == failing
    assert [s.verdict for s in record.stages] == [PASS] * i + [FAIL] + [NOT_RUN] * (len(STAGES) - i - 1)
    assert record.stages[i].why == f"{failing}: said no" and record.stages[i].record == f"build/x/{failing}.json"
    assert saved[-1] == record  # the record on disk is the one that names it


@pytest.mark.parametrize("failing", STAGES)
def test_a_rerun_resumes_at_the_stage_that_failed(failing):
    i = STAGES.index(failing)
    record, ran, _ = chain(set(STAGES[:i]))  # what the failed run left current
    assert ran == list(STAGES[i:])
    assert [s.verdict for s in record.stages] == [SKIPPED] * i + [PASS] * (len(STAGES) - i)


def test_a_stage_that_returns_without_a_current_record_said_no():
    record, ran, _ = chain(set(), leaves_stale="sign")
    assert record.stopped_at == "sign" and ran[-1] == "sign"
    assert record.stages[STAGES.index("sign")].why == "it ran, but its record is not current: no sign record"


def test_the_table_has_a_row_per_stage_with_time_bytes_and_verdict():
    record, _, _ = chain(set(STAGES[:2]), fails="push")
    table = rows(record)
    assert [r[:2] for r in table] == [("build", SKIPPED), ("gates", SKIPPED), ("scan", PASS), ("push", FAIL),
                                      ("smoke", NOT_RUN), ("sign", NOT_RUN), ("export", NOT_RUN),
                                      ("export-verify", NOT_RUN), ("report", NOT_RUN)]
    assert float(table[2][2]) > 0 and table[2][3:5] == ("10 B", "20 B") and table[4][2:5] == ("-", "-", "-")


def test_a_stage_that_runs_elsewhere_is_pending_named_and_the_walk_goes_on():
    """A CUDA image's smoke: not current here, and not runnable here: pending, with its job and command."""
    ran = []

    def check(stage):
        if stage == "smoke":
            return Check("build/smoke", ["amd64: SITE ONLY: GPU smoke"], {}, "smoke on a GPU (CI job smoke:x:amd64)")
        return Check(f"build/x/{stage}.json", [])

    record = walk(fresh("cuda12-ubuntu22", ["amd64"]), check, lambda s: ran.append(s) or Ran(), clock())
    assert ran == [] and record.passed is True
    smoke = record.stages[STAGES.index("smoke")]
    assert smoke.verdict == PENDING and smoke.why.startswith("smoke on a GPU (CI job smoke:x:amd64)")
    assert timeline_line(smoke, STAGES.index("smoke"), len(STAGES)).endswith("pending, smoke on a GPU (CI job "
                                                                                 "smoke:x:amd64) (amd64: SITE ONLY: GPU smoke)")
