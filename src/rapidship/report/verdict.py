"""The release's one verdict (pure): `invoke release`, `invoke report` and the page say it in these words.

Made from the summary of the records, the chain's own record among them:
- `released`: every check of every image in scope passed, and the chain (where one ran) passed
  every stage before the report (the report cannot vouch for itself: it is written from the verdict);
- `released pending: smoke on a GPU`: all that is left is a CUDA image's smoke, which runs on a
  GPU runner (the CI job named, and the command);
- `not released: ...`: any other check failed, is stale, corrupt or not run.
Checks only a site or its Harbor can run are named with their command; they do not hold the
release back here (the site runs them before it loads), and they are never shown as passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rapidship.report.model import LABELS, PASS, SITE, Summary

RELEASED, PENDING, NOT_RELEASED = "released", "released pending", "not released"
GPU_SMOKE = "smoke on a GPU"
CHAIN_DONE = ("pass", "skipped", "pending")  # stage verdicts of a chain that went through


@dataclass(frozen=True)
class Later:
    """A check that is not run here: what it is, where it runs, the command that runs it."""

    check: str
    where: str
    command: str

    def text(self) -> str:
        return f"{self.check} ({self.where}): {self.command}"


@dataclass(frozen=True)
class Verdict:
    status: str                      # released, released pending, not released
    blocking: list[str] = field(default_factory=list)
    pending: list[Later] = field(default_factory=list)   # on a GPU runner, before it counts as released
    site: list[Later] = field(default_factory=list)      # only a site or its Harbor runs them

    @property
    def words(self) -> str:
        if self.status == NOT_RELEASED:
            shown = "; ".join(self.blocking[:6]) + (f"; and {len(self.blocking) - 6} more" if len(self.blocking) > 6 else "")
            return f"{NOT_RELEASED}: {shown}"
        if self.status == PENDING:
            return f"{PENDING}: {', '.join(dict.fromkeys(p.check for p in self.pending))}"
        return RELEASED

    @property
    def released(self) -> bool:
        return self.status != NOT_RELEASED


def gpu_smoke(variant: str, arch: str) -> Later:
    """A CUDA image's spill smoke: the GPU runner's CI job (ci/pipeline.py names it so), and the command."""
    return Later(GPU_SMOKE, f"CI job smoke:{variant}:{arch}, a runner tagged gpu",
                 f"invoke smoke --variant {variant} --arch {arch} --mode gpu --gpus all")


def verdict(s: Summary) -> Verdict:
    blocking: list[str] = []
    pending: list[Later] = []
    site: list[Later] = []
    for row in s.rows:
        for column, cell in row.cells.items():
            if cell.status == PASS:
                continue
            if cell.status == SITE and column == "smoke":
                pending.append(gpu_smoke(row.variant, row.arch))
            elif cell.status == SITE:
                site.append(Later(cell.detail or column, f"{row.variant} {row.arch}, only the site's Harbor",
                                  f"invoke harbor.scan --variant {row.variant}"))
            else:
                blocking.append(f"{column} {LABELS[cell.status]} ({row.variant} {row.arch})")
    for chain in s.releases:
        stopped = [st for st in chain.steps if st.name != "report" and st.verdict not in CHAIN_DONE]
        if stopped:
            blocking.append(f"invoke release --variant {chain.variant}: stage {stopped[0].name} {stopped[0].verdict}")
    if not s.rows:
        blocking.append("no image in scope")
    status = NOT_RELEASED if blocking else PENDING if pending else RELEASED
    return Verdict(status, blocking, pending, site)
