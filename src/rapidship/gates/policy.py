"""The vulnerability policy: trivy JSON + policy file -> a decision with its reasons.

Pure core, no I/O beyond reading the policy text handed in. Trivy's `--severity` flag is an exact
set of severities, not a threshold, so trivy is always asked for everything and the decision is
made here: a finding fails when its severity is at or above the threshold, unless it is unfixed
and the policy ignores unfixed findings, or a valid (unexpired) allowlist entry names it.
Secrets fail at any severity. An unreadable report, or an image whose OS trivy could not detect,
fails closed.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from rapidship.errors import ConfigError, RapidshipError
from rapidship.config.yamlconf import LaxConfig, load_yaml, read_config, validation_error

SEVERITIES = ("UNKNOWN", "LOW", "MEDIUM", "HIGH", "CRITICAL")
Severity = Literal["LOW", "MEDIUM", "HIGH", "CRITICAL"]
Kind = Literal["vulnerability", "secret", "misconfiguration"]
DEFAULT_POLICY = Path("policy/trivy.yaml")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class AllowEntry(LaxConfig):
    """One accepted finding. Both a reason and an expiry are required: acceptance is reviewed."""

    id: str = Field(min_length=1)
    reason: str = Field(min_length=10)
    expires: date
    package: str | None = None  # limit the entry to one package (fnmatch pattern)

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("reason must say why the finding is accepted")
        return value.strip()

    @field_validator("expires", mode="before")
    @classmethod
    def _expires(cls, value: Any) -> date:
        """A calendar day written YYYY-MM-DD, nothing else: pydantic alone would read the number
        86400 as 1970-01-02 (seconds since the epoch) and a date-time as its day."""
        if isinstance(value, date) and not isinstance(value, datetime):
            return value
        if isinstance(value, str) and _DAY.fullmatch(value.strip()):
            try:
                return date.fromisoformat(value.strip())
            except ValueError as err:
                raise ValueError(f"{value!r} is not a date ({err})") from None
        raise ValueError(f"{value!r} is not a date")


class Rules(LaxConfig):
    threshold: Severity = "MEDIUM"
    ignore_unfixed: bool = False
    fail_on_unknown: bool = True  # UNKNOWN severity is not proof of harmlessness
    fail_on_secrets: bool = True
    require_os: bool = True  # an image whose OS trivy cannot detect was not really scanned
    max_db_age_days: int | None = Field(default=7, ge=1)  # a mirror that stopped updating hides new CVEs
    allowlist: tuple[AllowEntry, ...] = ()


class Override(LaxConfig):
    """Per-variant changes: scalar keys replace the defaults, allowlist entries are added."""

    threshold: Severity | None = None
    ignore_unfixed: bool | None = None
    fail_on_unknown: bool | None = None
    fail_on_secrets: bool | None = None
    require_os: bool | None = None
    max_db_age_days: int | None = Field(default=None, ge=1)
    allowlist: tuple[AllowEntry, ...] = ()


class PolicyFile(LaxConfig):
    defaults: Rules = Rules()
    variants: dict[str, Override] = {}


@dataclass(frozen=True)
class Policy:
    """The rules in force for one scan, after the variant override is applied."""

    source: str
    variant: str | None
    rules: Rules


def parse_policy(text: str, source: str, known_variants: list[str] | None = None) -> PolicyFile:
    """Policy yaml -> PolicyFile, or one ConfigError naming the file and yaml path."""
    doc = load_yaml(text, source)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(source, "top level must be a mapping with `defaults` and `variants`",
                          "see policy/trivy.yaml for the layout")
    try:
        spec = PolicyFile.model_validate(doc)
    except ValidationError as err:
        raise _policy_error(source, err) from None
    if known_variants is not None:
        for vid in spec.variants:
            if vid not in known_variants:
                raise ConfigError(f"{source}: variants.{vid}", "no such variant in the matrix",
                                  f"use one of: {', '.join(known_variants)}")
    return spec


def _policy_error(source: str, err: ValidationError) -> ConfigError:
    first = err.errors()[0]
    loc = first["loc"]
    if loc and loc[-1] in ("reason", "expires") and first["type"] in ("missing", "string_too_short", "value_error"):
        entry = ".".join(str(p) for p in loc[:-1])
        return ConfigError(f"{source}: {entry}", f"allowlist entry needs a `{loc[-1]}`"
                           + (" of at least 10 characters" if first["type"] == "string_too_short" else ""),
                           "every accepted finding says why (reason) and until when (expires: YYYY-MM-DD)")
    if loc and loc[-1] == "expires":
        return ConfigError(f"{source}: {'.'.join(str(p) for p in loc)}",
                           f"{first.get('input')!r} is not a date", "write expires: YYYY-MM-DD")
    return validation_error(source, err, "policy/trivy.yaml")


def resolve(spec: PolicyFile, source: str, variant: str | None) -> Policy:
    rules = spec.defaults
    override = spec.variants.get(variant or "")
    if override:
        changes = {k: v for k, v in override.model_dump(exclude={"allowlist"}).items() if v is not None}
        rules = rules.model_copy(update=changes | {"allowlist": rules.allowlist + override.allowlist})
    return Policy(source=source, variant=variant, rules=rules)


def load_policy(path: Path | str = DEFAULT_POLICY, variant: str | None = None,
                known_variants: list[str] | None = None) -> Policy:
    path = Path(path)
    text = read_config(path, "pass --policy FILE or run from the project root")
    return resolve(parse_policy(text, str(path), known_variants), str(path), variant)


# ---- trivy JSON -> findings ----

@dataclass(frozen=True)
class Finding:
    kind: Kind
    id: str
    severity: str
    target: str
    title: str = ""
    package: str = ""
    installed: str = ""
    fixed: str = ""
    status: str = ""
    layer: str = ""

    @property
    def fixable(self) -> bool:
        return bool(self.fixed)


@dataclass(frozen=True)
class ScanFacts:
    """What a report says about the scan itself (not the findings)."""

    artifact: str
    artifact_type: str
    os: str  # "debian 12.15", or "" when trivy detected none
    packages: int
    db_updated: date | None = None  # the vulnerability DB's UpdatedAt, when the scan ran here
    results: int | None = None  # entries of the report's Results (None: not from a report)


HARBOR_MIME = "application/vnd.security.vulnerability.report; version=1.1"


def read_report(raw: bytes | str, source: str) -> dict[str, Any]:
    """Parse trivy JSON (or Harbor's vulnerability report, turned into the same shape); anything
    else fails closed with one message."""
    import json

    try:
        report = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise RapidshipError(source, f"not a trivy JSON report ({err.__class__.__name__}: {str(err)[:80]})",
                             "pass the file written by `trivy ... --format json`") from None
    if isinstance(report, dict) and (HARBOR_MIME in report or "vulnerabilities" in report and "scanner" in report):
        return from_harbor(report.get(HARBOR_MIME, report), source)
    if not isinstance(report, dict) or report.get("SchemaVersion") != 2 or not isinstance(report.get("Results", []), list):
        raise RapidshipError(source, "not a trivy JSON report of schema version 2",
                             "pass the file written by `trivy ... --format json` (trivy 0.20 or newer)")
    return report


def from_harbor(report: Any, source: str) -> dict[str, Any]:
    """Harbor's report (GET .../artifacts/{ref}/additions/vulnerabilities, scanner adapter format
    1.1) -> the trivy JSON shape. It names no OS and lists no packages: no SBOM, no OS check."""
    vulns = report.get("vulnerabilities") if isinstance(report, dict) else None
    if not isinstance(vulns, list) or not all(isinstance(v, dict) and v.get("id") for v in vulns):
        raise RapidshipError(source, "a Harbor vulnerability report without a readable `vulnerabilities` list",
                             "save the body of GET .../artifacts/{reference}/additions/vulnerabilities as it came")
    artifact = report.get("artifact") or {}
    name = "@".join(p for p in (artifact.get("repository"), artifact.get("digest")) if p) or source
    scanner = report.get("scanner") or {}
    return {"SchemaVersion": 2, "ArtifactName": name, "ArtifactType": "harbor_report",
            "Trivy": {"Version": str(scanner.get("version", "")).lstrip("v")},
            "Results": [{"Target": name, "Vulnerabilities": [
                {"VulnerabilityID": v["id"], "PkgName": v.get("package", ""), "InstalledVersion": v.get("version", ""),
                 "FixedVersion": v.get("fix_version", ""), "Severity": v.get("severity", ""),
                 "Title": (v.get("description") or "")[:200]} for v in vulns]}]}


def scan_facts(report: dict[str, Any]) -> ScanFacts:
    os_meta = (report.get("Metadata") or {}).get("OS") or {}
    os_name = f"{os_meta.get('Family', '')} {os_meta.get('Name', '')}".strip()
    packages = sum(len(r.get("Packages") or []) for r in report.get("Results") or [])
    return ScanFacts(artifact=str(report.get("ArtifactName", "")), artifact_type=str(report.get("ArtifactType", "")),
                     os=os_name, packages=packages, results=len(report.get("Results") or []))


def findings(report: dict[str, Any]) -> list[Finding]:
    """Every vulnerability, secret and failed misconfiguration in a trivy report."""
    out: list[Finding] = []
    for result in report.get("Results") or []:
        target = str(result.get("Target", ""))
        for v in result.get("Vulnerabilities") or []:
            out.append(Finding(kind="vulnerability", id=v["VulnerabilityID"], severity=_severity(v.get("Severity")),
                               target=target, title=v.get("Title", ""), package=v.get("PkgName", ""),
                               installed=v.get("InstalledVersion", ""), fixed=v.get("FixedVersion", "") or "",
                               status=v.get("Status", ""), layer=(v.get("Layer") or {}).get("DiffID", "")))
        for s in result.get("Secrets") or []:
            out.append(Finding(kind="secret", id=s.get("RuleID", "secret"), severity=_severity(s.get("Severity")),
                               target=target, title=s.get("Title", ""),
                               layer=(s.get("Layer") or {}).get("DiffID", "")))
        for m in result.get("Misconfigurations") or []:
            if m.get("Status") == "FAIL":
                out.append(Finding(kind="misconfiguration", id=m.get("ID") or m.get("AVDID", ""),
                                   severity=_severity(m.get("Severity")), target=target, title=m.get("Title", "")))
    return out


def _severity(value: Any) -> str:
    value = str(value or "UNKNOWN").upper()
    return value if value in SEVERITIES else "UNKNOWN"


# ---- the decision ----

Outcome = Literal["fail", "below-threshold", "not-gated", "unfixed-ignored", "allowlisted"]


@dataclass(frozen=True)
class Verdict:
    finding: Finding
    outcome: Outcome
    reason: str


@dataclass
class Decision:
    passed: bool
    policy: dict[str, Any]
    facts: ScanFacts
    verdicts: list[Verdict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # scan-level reasons to fail (no OS detected)
    notes: list[str] = field(default_factory=list)  # allowlist entries that matched nothing, expired entries

    @property
    def reasons(self) -> list[str]:
        return self.problems + [v.reason for v in self.verdicts if v.outcome == "fail"]

    def counts(self) -> dict[str, dict[str, int]]:
        """severity -> outcome -> count, every severity present (for the summary table)."""
        table = {sev: Counter() for sev in reversed(SEVERITIES)}
        for v in self.verdicts:
            table[v.finding.severity][v.outcome] += 1
        return {sev: dict(c) for sev, c in table.items()}


def decide(report_findings: list[Finding], facts: ScanFacts, policy: Policy, today: date) -> Decision:
    rules = policy.rules
    threshold = SEVERITIES.index(rules.threshold)
    used: set[int] = set()
    verdicts = []
    for f in report_findings:
        verdicts.append(_judge(f, rules, threshold, today, used))
    problems = _empty_scan(facts)
    if rules.require_os and facts.artifact_type == "container_image" and not facts.os:
        problems.append(f"trivy detected no operating system in {facts.artifact}: its OS packages were not "
                        "checked (unsupported distribution, or no package database in the image)")
    if rules.max_db_age_days and facts.db_updated and (today - facts.db_updated).days > rules.max_db_age_days:
        problems.append(f"the vulnerability DB was last updated {facts.db_updated}, "
                        f"{(today - facts.db_updated).days} days ago (max_db_age_days: {rules.max_db_age_days}): "
                        "refresh the DB mirror")
    notes = [f"allowlist entry {e.id} matched nothing; remove it if the finding is gone"
             for i, e in enumerate(rules.allowlist) if i not in used and e.expires >= today]
    notes += [f"allowlist entry {e.id} expired on {e.expires}" for i, e in enumerate(rules.allowlist) if e.expires < today]
    passed = not problems and all(v.outcome != "fail" for v in verdicts)
    return Decision(passed=passed, policy=_describe(policy), facts=facts, verdicts=verdicts, problems=problems,
                    notes=notes)


IMAGE_REPORTS = ("container_image", "harbor_report")


def _empty_scan(facts: ScanFacts) -> list[str]:
    """Fail closed on a report that cannot have looked at an image: a gate must never pass on
    nothing (a report with no Results, or of a filesystem, repository or unknown artifact)."""
    if facts.results is None:
        return []
    if facts.artifact_type not in IMAGE_REPORTS:
        return [f"the report is of artifact type {facts.artifact_type or '(none)'!r}, not an image scan: "
                f"it says nothing about {facts.artifact or 'the image'} (scan with `trivy image`)"]
    if facts.artifact_type == "container_image" and facts.results == 0:
        return [f"the report of {facts.artifact or 'the image'} has no Results: the scan checked nothing "
                "(an empty or cut-down report is never a pass; scan again with `trivy image`)"]
    return []


def _judge(f: Finding, rules: Rules, threshold: int, today: date, used: set[int]) -> Verdict:
    what = _name(f)
    if f.kind == "secret":
        fails = rules.fail_on_secrets
        why = f"{what}: a secret ({f.severity}) is in the image" if fails else f"{what}: secrets are not gated by this policy"
    elif f.severity == "UNKNOWN":
        fails = rules.fail_on_unknown
        why = f"{what}: severity UNKNOWN " + ("fails (fail_on_unknown)" if fails else "is not gated (fail_on_unknown: false)")
    else:
        fails = SEVERITIES.index(f.severity) >= threshold
        why = (f"{what}: {f.severity} is at or above the threshold {rules.threshold}" if fails
               else f"{what}: {f.severity} is below the threshold {rules.threshold}")
    if not fails:
        return Verdict(f, "below-threshold" if f.kind != "secret" and f.severity != "UNKNOWN" else "not-gated", why)
    if f.kind == "vulnerability" and rules.ignore_unfixed and not f.fixable:
        return Verdict(f, "unfixed-ignored", f"{what}: no fixed version published and ignore_unfixed is on")
    expired = None
    for i, entry in enumerate(rules.allowlist):
        if entry.id != f.id or (entry.package and not fnmatch.fnmatchcase(f.package, entry.package)):
            continue
        if entry.expires >= today:
            used.add(i)
            return Verdict(f, "allowlisted", f"{what}: allowlisted until {entry.expires}: {entry.reason}")
        expired = entry
    if expired:
        return Verdict(f, "fail", f"{why}; its allowlist entry expired on {expired.expires} ({expired.reason})")
    return Verdict(f, "fail", why)


def _name(f: Finding) -> str:
    if f.kind == "vulnerability":
        fix = f"fixed in {f.fixed}" if f.fixed else "no fix published"
        return f"{f.id} in {f.package} {f.installed} ({fix})"
    if f.kind == "secret":
        return f"secret {f.id} in {f.target}"
    return f"misconfiguration {f.id} in {f.target} ({f.title})"


def _describe(policy: Policy) -> dict[str, Any]:
    return {"source": policy.source, "variant": policy.variant} | policy.rules.model_dump(mode="json")


def report_decider(policy: Policy, today: date, source: str = "harbor report"):
    """The same decision over a report as Harbor serves it (keyed by MIME type) or as trivy writes
    it: what the Harbor-side gate calls after each scan. Returns a JSON-able verdict record."""
    import json

    def decide_report(report: dict[str, Any]) -> dict[str, Any]:
        parsed = read_report(json.dumps(report), source)
        decision = decide(findings(parsed), scan_facts(parsed), policy, today)
        return {"passed": decision.passed, "reasons": decision.reasons, "notes": decision.notes,
                "counts": decision.counts()}

    return decide_report
