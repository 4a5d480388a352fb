"""Image gates. Each gate module has a pure `check_*` over records and returns a GateReport.

`run_gates` (gates/run.py) runs them all on one built image and writes
build/<variant>/gates-<arch>.json with a top-level "passed" that push reads.
"""

from __future__ import annotations

from rapidship.records import GateReport, GatesRecord

__all__ = ["GateReport", "GatesRecord", "verdict"]  # the record types live in records.py


def verdict(gate: str, reasons: list[str], **details) -> GateReport:
    return GateReport(gate=gate, passed=not reasons, reasons=reasons, details=details)


def figure(report: GateReport) -> str:
    """One line for a gate's row: its reasons when it failed, else what it measured (the record's
    figure), so a PASS says how far it is from failing."""
    if report.reasons:
        return "; ".join(report.reasons)
    d = report.details
    mb = lambda n: f"{int(n) / 1e6:,.1f} MB"  # noqa: E731
    try:
        if report.gate == "size":
            return f"{mb(d['size_bytes'])} of the {mb(d['budget_bytes'])} budget ({mb(d['zstd_bytes'])} zstd)"
        if report.gate == "labels":
            return f"{len(d['labels'])} labels present"
        if report.gate == "user":
            return f"runs as {d['configured']}, and as random uid {d['random_uid']}"
        if report.gate == "suid":
            return (f"{d['count']} setuid/setgid files, {d['capabilities']} file capabilities, "
                    f"{d['writable_path_dirs']} writable PATH dirs")
        if report.gate == "secrets":
            read = f" (layers read {d['layers_read']})" if d.get("layers_read") else ""
            return f"{d['needles']} needles searched for{read}, none found"
    except (KeyError, TypeError, ValueError):   # a record of another shape: show what it holds
        pass
    return "; ".join(f"{k} {v}" for k, v in d.items() if isinstance(v, (int, float, str)) and len(str(v)) < 60) or "passed"
