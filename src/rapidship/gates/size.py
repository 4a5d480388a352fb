"""Size gate: the image must fit its budget (one DVD-5 by default), unpacked and compressed."""

from __future__ import annotations

from rapidship.gates import GateReport, verdict


def check_size(size_bytes: int, zstd_bytes: int, budget_bytes: int) -> GateReport:
    reasons = []
    if size_bytes > budget_bytes:
        reasons.append(f"uncompressed {size_bytes:,} bytes is {size_bytes - budget_bytes:,} over the budget "
                       f"of {budget_bytes:,}")
    if zstd_bytes > budget_bytes:
        reasons.append(f"zstd-compressed {zstd_bytes:,} bytes is {zstd_bytes - budget_bytes:,} over the budget")
    return verdict("size", reasons, size_bytes=size_bytes, zstd_bytes=zstd_bytes, budget_bytes=budget_bytes,
                   headroom_bytes=budget_bytes - size_bytes)
