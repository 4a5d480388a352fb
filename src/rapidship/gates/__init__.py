"""Image gates. Each gate module has a pure `check_*` over records and returns a GateReport.

`run_gates` (gates/run.py) runs them all on one built image and writes
build/<variant>/gates-<arch>.json with a top-level "passed" that push reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GateReport:
    gate: str
    passed: bool
    reasons: list[str] = field(default_factory=list)  # why it failed; empty when it passed
    details: dict = field(default_factory=dict)  # what was measured, for the record


@dataclass(frozen=True)
class GatesRecord:
    """build/<variant>/gates-<arch>.json: every image gate of one built image; push reads `passed`."""

    ref: str
    image_id: str
    arch: str
    passed: bool
    gates: list[GateReport]


def verdict(gate: str, reasons: list[str], **details) -> GateReport:
    return GateReport(gate=gate, passed=not reasons, reasons=reasons, details=details)
