"""Image gates. Each gate module has a pure `check_*` over records and returns a GateReport.

`run_gates` (gates/run.py) runs them all on one built image and writes
build/<variant>/gates-<arch>.json with a top-level "passed" that push reads.
"""

from __future__ import annotations

from rapidship.records import GateReport, GatesRecord

__all__ = ["GateReport", "GatesRecord", "verdict"]  # the record types live in records.py


def verdict(gate: str, reasons: list[str], **details) -> GateReport:
    return GateReport(gate=gate, passed=not reasons, reasons=reasons, details=details)
