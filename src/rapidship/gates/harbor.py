"""The Harbor-side vulnerability gate: have Harbor scan a pushed digest, wait, and apply the same
policy to Harbor's report."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable


from rapidship.errors import GateFailure
from rapidship.gates.policy import check_report, findings as policy_findings
from rapidship.publish.harbor.client import HarborClient


# ---- the Harbor-side gate ----

@dataclass(frozen=True)
class HarborScan:
    project: str
    repository: str
    digest: str
    scan_status: str
    seconds: float
    passed: bool
    decision: Any
    findings: list[dict]


def findings(report: dict, where: str) -> list[dict]:
    """Pure: Harbor's report checked by the policy's own parser (policy.check_report), as plain dicts."""
    parsed = check_report(report, where)
    return [{k: v for k, v in asdict(f).items() if v} for f in policy_findings(parsed)]


def _verdict(decision: Any) -> bool:
    passed = decision.get("passed") if isinstance(decision, dict) else getattr(decision, "passed", None)
    if not isinstance(passed, bool):
        raise GateFailure("harbor gate", f"the policy returned no passed=true/false verdict ({decision!r})",
                          "fix the decide function: a gate without a verdict fails closed")
    return passed


def scan_gate(client: HarborClient, project: str, repository: str, digest: str,
              decide: Callable[[dict], Any], timeout: float = 900, poll: float = 5.0,
              sleep: Callable[[float], None] = time.sleep) -> HarborScan:
    """Scan a pushed artifact in Harbor, wait for the report and apply the policy to it.

    Fails closed: a scan that errors, stops or outlives `timeout`, or a decision without a
    boolean verdict, is a GateFailure. `decide` receives the report exactly as Harbor serves it.
    """
    start = time.monotonic()
    client.scan(project, repository, digest)
    where = f"harbor scan {project}/{repository}@{digest[:19]}"
    while True:
        overview = client.artifact(project, repository, digest).get("scan_overview") or {}
        statuses = [s.get("scan_status", "") for s in overview.values()]
        if statuses and all(s == "Success" for s in statuses):
            break
        if any(s in ("Error", "Stopped") for s in statuses):
            raise GateFailure(where, f"scan ended with {', '.join(statuses)}", "see the scan log in Harbor, then scan again")
        if time.monotonic() - start > timeout:
            raise GateFailure(where, f"no finished scan after {timeout:.0f}s (status {statuses or 'none'})",
                              "check Harbor's scanner and job service, then run again")
        sleep(poll)
    report = client.vulnerabilities(project, repository, digest)
    decision = decide(report)
    return HarborScan(project=project, repository=repository, digest=digest, scan_status="Success",
                      seconds=round(time.monotonic() - start, 1), passed=_verdict(decision),
                      decision=decision if isinstance(decision, (dict, list, str, int, float, bool)) else repr(decision),
                      findings=findings(report, where))
