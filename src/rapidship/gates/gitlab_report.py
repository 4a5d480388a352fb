"""trivy findings -> GitLab container-scanning report (security report schema 15.x).

Pure. GitLab reads the file named by `artifacts:reports:container_scanning`. Required by the 15.x
schema: top level `version`, `scan`, `vulnerabilities`; `scan.{analyzer,scanner}.{id,name,version,
vendor.name}`, `scan.{type,start_time,end_time,status}` (times without zone or fraction); each
vulnerability `id`, `identifiers` (>= 1 of type/name/value), `location.{dependency.package.name,
dependency.version, operating_system, image}`; `severity` one of Info/Unknown/Low/Medium/High/
Critical. Only package vulnerabilities fit this report type: secrets and misconfigurations stay in
the trivy JSON and the decision record.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from rapidship.gates.policy import Finding

SCHEMA_VERSION = "15.0.7"
_NS = uuid.UUID("6f1c1d0e-5b7a-4e55-9a3e-0d7f1f6a2b10")  # stable ids: same finding, same id


def gitlab_report(found: list[Finding], image: str, os_name: str, trivy_version: str,
                  start: datetime, end: datetime) -> dict[str, Any]:
    tool = {"id": "trivy", "name": "Trivy", "version": trivy_version or "unknown",
            "vendor": {"name": "Aqua Security"}, "url": "https://github.com/aquasecurity/trivy"}
    analyzer = {"id": "rapidship", "name": "rapidship scan", "version": _own_version(), "vendor": {"name": "rapidship"}}
    return {
        "version": SCHEMA_VERSION,
        "scan": {"analyzer": analyzer, "scanner": tool, "type": "container_scanning",
                 "start_time": _stamp(start), "end_time": _stamp(end), "status": "success"},
        "vulnerabilities": [_vulnerability(f, image, os_name) for f in found if f.kind == "vulnerability"],
    }


def _vulnerability(f: Finding, image: str, os_name: str) -> dict[str, Any]:
    identifier = {"type": "cve" if f.id.startswith("CVE-") else "trivy", "name": f.id, "value": f.id}
    if f.id.startswith("CVE-"):
        identifier["url"] = f"https://nvd.nist.gov/vuln/detail/{f.id}"
    solution = f"Upgrade {f.package} to {f.fixed}" if f.fixed else "No fixed version published yet"
    return {
        "id": str(uuid.uuid5(_NS, f"{image}|{f.target}|{f.package}|{f.installed}|{f.id}")),
        "name": (f.title or f"{f.id} in {f.package}")[:255],
        "description": (f.title or f.id)[:1048576],
        "severity": f.severity.capitalize() if f.severity != "UNKNOWN" else "Unknown",
        "solution": solution,
        "identifiers": [identifier],
        "location": {"dependency": {"package": {"name": f.package}, "version": f.installed},
                     "operating_system": os_name or "unknown", "image": image},
    }


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S")


def _own_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rapidship")
    except PackageNotFoundError:
        return "0"
