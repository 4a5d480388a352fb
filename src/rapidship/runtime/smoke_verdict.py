"""What a spill smoke stage held and where it ended up, and the pure verdict over it; the exact result
check (chunk sums added as Python ints, so a sum never overflows int64 at any size). Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


INT64_MAX = 2**63 - 1


# ---- records and the pure verdict ----

@dataclass
class Tier:
    name: str           # device, host (memory), disk
    keys: int
    bytes: int


@dataclass
class Stage:
    """One workload: what it held, where it ended up, and whether the answer was right."""

    name: str
    data_bytes: int
    limits: dict                    # tier name -> bytes it may hold
    tiers: list[Tier] = field(default_factory=list)
    spill_files: int = 0
    spill_file_bytes: int = 0
    result_ok: bool = False
    expected: int | None = None
    got: int | None = None
    seconds: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    error: str | None = None
    spill_tier: str = "disk"        # the tier data must reach: disk, or host for cuDF's own spilling
    expect_spill: bool = True       # False for a negative probe that documents no-spill behaviour
    problems: list[str] = field(default_factory=list)


def judge(stage: Stage) -> list[str]:
    """Pure: why this stage fails (empty = pass).

    The dataset must exceed what the in-memory tiers may hold (else the test proves nothing),
    data must have reached the stage's spill tier (disk: files really written under the spill
    dir; cuDF's own spilling has no disk tier and must reach host memory), and the answer read
    back must be right.
    """
    problems = []
    if stage.error:
        return [f"{stage.name}: the workload failed: {stage.error}"]
    in_memory = sum(v for k, v in stage.limits.items() if k != stage.spill_tier)
    if stage.data_bytes <= in_memory:
        problems.append(f"{stage.name}: dataset {stage.data_bytes} B fits the limits ({in_memory} B): "
                        "it proves nothing; make it larger")
    tiers = {t.name: t for t in stage.tiers}
    reached = tiers.get(stage.spill_tier)
    files_ok = stage.spill_tier != "disk" or (stage.spill_files > 0 and stage.spill_file_bytes > 0)
    if not reached or reached.keys == 0 or reached.bytes == 0 or not files_ok:
        held = max(stage.tiers, key=lambda t: t.bytes).name if stage.tiers else "first"
        problems.append(f"{stage.name}: NO SPILL: {stage.data_bytes} B exceeded the limits ({in_memory} B) but "
                        f"nothing reached the {stage.spill_tier} tier ({stage.spill_files} spill files, "
                        f"{stage.spill_file_bytes} B); the data stayed in the {held} tier")
    stage.result_ok = stage.expected is not None and stage.got == stage.expected
    if not stage.result_ok:
        problems.append(f"{stage.name}: WRONG RESULT: expected {stage.expected}, got {stage.got}")
    return problems


def verdict(stages: list[Stage]) -> tuple[str, list[str]]:
    problems: list[str] = []
    for s in stages:
        s.problems = judge(s)
        if s.expect_spill:
            problems += s.problems
    return ("PASS" if stages and not problems else "FAIL"), problems or ([] if stages else ["no workload ran"])


# ---- the exact result check (pure) ----
#
# The data are the integers 0 .. n-1 (int64) and the check is their sum, n(n-1)/2. One int64 sum
# over all of them overflows once n(n-1)/2 > 2**63 - 1, that is above n = 4.29e9 values (34 GB of
# data), and then reads as WRONG RESULT though the data came back intact. So no int64 sum ever
# spans more than one chunk: each chunk (array chunk, dataframe partition, cuDF frame) is summed
# where it lives and the chunk sums are added as Python ints, which do not overflow. A chunk holds
# at most INT64_MAX // (n - 1) values (`exact_chunk_len`); all values are >= 0 and below n, so the
# chunk's sum, and every partial sum inside whatever reduction order the library picks, stays at
# or below INT64_MAX. The expected value is the closed form, in Python ints. Exact at any size.

def arange_sum(start: int, stop: int) -> int:
    """Pure: the exact sum of start .. stop-1."""
    n = stop - start
    return (start + stop - 1) * n // 2 if n > 0 else 0


def exact_chunk_len(total: int, want: int) -> int:
    """Pure: the longest chunk (at most `want` values) of 0 .. total-1 whose int64 sum cannot overflow."""
    return max(1, min(want, INT64_MAX // (total - 1))) if total > 1 else max(1, want)


def exact_partition_rows(parts: int, want: int) -> int:
    """Pure: rows per partition (at most `want`) so that `parts` partitions of 0 .. parts*rows-1 each sum exactly."""
    # rows * (parts * rows - 1) < parts * rows**2 <= INT64_MAX
    return max(1, min(want, math.isqrt(INT64_MAX // max(1, parts))))


def chunk_bounds(total: int, chunk_len: int) -> list[tuple[int, int]]:
    """Pure: [start, stop) of each chunk of 0 .. total-1."""
    return [(start, min(start + chunk_len, total)) for start in range(0, total, chunk_len)]


def combine(chunk_sums) -> int:
    """Pure: the total of per-chunk sums, as a Python int (numpy / CuPy scalars are converted first)."""
    return sum(int(v) for v in chunk_sums)
