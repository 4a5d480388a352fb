"""The release chain's pure core: the one ordered list of stages, and the walk over it.

`STAGES` names each stage once, in order: `invoke release` runs them, the report draws them.
`walk` asks each stage's rule whether its record is current; a current stage is skipped and says
so, any other runs. The first stage that says no stops the walk: the stages before it keep their
records (a re-run skips them and resumes there), the ones after it are `not run`. A stage that
returns without an error must leave a current record behind, or it said no without saying so and
the walk stops there too (fail closed). A stage whose check cannot run here (a CUDA image's smoke
needs a GPU) is `pending`: it names where it runs and the command, and the walk goes on; the
release's verdict (report/verdict.py) then says what it waits for.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from rapidship.records import ReleaseRecord, ReleaseStage

STAGES: tuple[str, ...] = ("build", "gates", "scan", "push", "smoke", "sign", "export", "export-verify", "report")
PASS, SKIPPED, FAIL, NOT_RUN, RUNNING, PENDING = "pass", "skipped", "FAIL", "not run", "running", "pending"


class StageFailed(Exception):
    """A stage said no: its own message (a gate's verdict, a refused input)."""


@dataclass(frozen=True)
class Check:
    """A stage's record and why it is not current (empty: current, so the stage is skipped)."""

    record: str
    stale: list[str]
    bound: dict[str, str] = field(default_factory=dict)
    elsewhere: str = ""  # not current, and it runs elsewhere: where, and the command (the stage is pending)


@dataclass(frozen=True)
class Ran:
    """What a stage that ran measured of itself: bytes it had to read and the bytes it wrote."""

    read_bytes: int | None = None
    written_bytes: int | None = None


def now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def walk(record: ReleaseRecord, check: Callable[[str], Check], run: Callable[[str], Ran],
         clock: Callable[[], float], saved: Callable[[ReleaseRecord], None] = lambda _: None) -> ReleaseRecord:
    """Walk STAGES from `record` (every stage `not run`); `saved` gets the record after every step,
    so a reader (the report, a person) sees the chain where it is."""
    start = clock()
    stages = list(record.stages)

    def step(i: int, **fields) -> ReleaseRecord:
        stages[i] = stages[i].model_copy(update=fields)
        out = record.model_copy(update={"stages": list(stages), "seconds": round(clock() - start, 2)})
        if fields.get("verdict") == FAIL:  # the record on disk names the stage that stopped the chain
            out = out.model_copy(update={"passed": False, "stopped_at": stages[i].name})
        saved(out)
        return out

    for i, stage in enumerate(stages):
        t0, at = clock(), now()
        try:
            before = check(stage.name)
        except StageFailed as err:  # the rule itself could not read what it needs
            return step(i, verdict=FAIL, why=str(err), started_at=at, seconds=round(clock() - t0, 2))
        if before.stale and before.elsewhere:
            step(i, verdict=PENDING, record=before.record, started_at=at, seconds=round(clock() - t0, 2),
                 why=f"{before.elsewhere} ({'; '.join(before.stale)})", read_bytes=0, written_bytes=0)
            continue
        if not before.stale:
            step(i, verdict=SKIPPED, record=before.record, bound=before.bound, started_at=at,
                 why="current: " + _bound_text(before.bound), seconds=round(clock() - t0, 2), read_bytes=0,
                 written_bytes=0)
            continue
        step(i, verdict=RUNNING, record=before.record, why="; ".join(before.stale), started_at=at)
        try:
            ran = run(stage.name)
            after = check(stage.name)
        except StageFailed as err:
            return step(i, verdict=FAIL, why=str(err), seconds=round(clock() - t0, 2))
        if after.stale:
            return step(i, verdict=FAIL, record=after.record, seconds=round(clock() - t0, 2),
                        why="it ran, but its record is not current: " + "; ".join(after.stale))
        step(i, verdict=PASS, record=after.record, bound=after.bound, seconds=round(clock() - t0, 2),
             read_bytes=ran.read_bytes, written_bytes=ran.written_bytes)
    out = record.model_copy(update={"stages": list(stages), "seconds": round(clock() - start, 2), "passed": True})
    saved(out)
    return out


def _bound_text(bound: dict[str, str]) -> str:
    return ", ".join(f"{k} {v[:19]}" for k, v in bound.items()) or "its record"


def fresh(variant: str, arches: list[str], since: str = "") -> ReleaseRecord:
    return ReleaseRecord(variant=variant, arches=arches, since=since, started_at=now(),
                         stages=[ReleaseStage(name=s, verdict=NOT_RUN) for s in STAGES])


def disc_folder(image_ids: list[str], since_id: str = "") -> str:
    """The default --out of a release's disc: named by what it carries, so a re-run finds the disc it
    wrote and a new image (or another --since) gets a folder of its own."""
    key = "\n".join(sorted(image_ids) + [since_id])
    return "disc-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def records_digest(files: dict[str, bytes | None]) -> str:
    """One digest over the records a stage read (name -> bytes, None: absent): the report's binding."""
    h = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        h.update(f"{name}\0{'-' if data is None else hashlib.sha256(data).hexdigest()}\n".encode())
    return "sha256:" + h.hexdigest()


def rows(record: ReleaseRecord) -> list[tuple[str, str, str, str, str, str]]:
    """The end-of-chain table: stage, verdict, seconds, read, written, why."""
    def size(n: int | None) -> str:
        return "-" if n is None else f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n:,} B"

    return [(s.name, s.verdict, f"{s.seconds:.1f}" if s.verdict not in (NOT_RUN,) else "-",
             size(s.read_bytes) if s.verdict != NOT_RUN else "-", size(s.written_bytes) if s.verdict != NOT_RUN else "-",
             s.why) for s in record.stages]


MARKS = {PASS: "[green]✓[/]", SKIPPED: "[cyan]↷[/]", FAIL: "[bold red]✗[/]", RUNNING: "[yellow]▶[/]", NOT_RUN: "·",
         PENDING: "[yellow]◇[/]"}


def timeline_line(stage: ReleaseStage, index: int, total: int) -> str:
    """One line of the live timeline (rich markup), printed as a stage starts, is skipped, passes or fails."""
    head = f"{MARKS.get(stage.verdict, '?')} release {index + 1}/{total} [bold]{stage.name}[/]"
    if stage.verdict == RUNNING:
        return f"{head}: runs ({_cut(stage.why)})"
    if stage.verdict == SKIPPED:
        return f"{head}: skipped, its record is {stage.why} ({stage.record})"
    if stage.verdict == PASS:
        return f"{head}: pass in {stage.seconds:.1f} s -> {stage.record}"
    if stage.verdict == FAIL:
        return f"{head}: [bold red]FAIL[/] after {stage.seconds:.1f} s ({stage.record or 'no record'})"
    if stage.verdict == PENDING:
        return f"{head}: pending, {_cut(stage.why, 400)}"
    return f"{head}: not run"


def _cut(text: str, n: int = 160) -> str:
    from rich.markup import escape

    return escape(text if len(text) <= n else text[:n] + "...")
