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
from typing import Any, Literal, NoReturn

from pydantic import Field, ValidationError, field_validator

from rapidship.errors import ConfigError, RapidshipError
from rapidship.config.yamlconf import LaxConfig, load_yaml, read_config, validation_error, yaml_path

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
    path: str | None = None  # limit the entry to files (fnmatch pattern on the finding's target);
    #                          a secret is allowlisted only with one: a rule id alone covers every file

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
        if isinstance(value, datetime):
            raise ValueError(f"{value.isoformat()!r} is not a date (a day, without a time)")
        if isinstance(value, date):
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
    max_allowlist_days: int = Field(default=180, ge=1)  # how far ahead an entry may expire: acceptance is reviewed
    allowlist: tuple[AllowEntry, ...] = ()


class Override(LaxConfig):
    """Per-variant changes: scalar keys replace the defaults, allowlist entries are added."""

    threshold: Severity | None = None
    ignore_unfixed: bool | None = None
    fail_on_unknown: bool | None = None
    fail_on_secrets: bool | None = None
    require_os: bool | None = None
    max_db_age_days: int | None = Field(default=None, ge=1)
    max_allowlist_days: int | None = Field(default=None, ge=1)
    allowlist: tuple[AllowEntry, ...] = ()


class ReleaseRules(LaxConfig):
    """What `invoke verify --policy` also requires of a signed image, beside its scan: how old it
    and its scan decision may be (a signed image stays signed forever; a site decides when it is
    too old to run)."""

    min_created: datetime | date | None = None  # the image's release (its build's UTC time) at least this
    max_decision_age_days: int | None = Field(default=None, ge=1)  # the scan decision at most this old


class PolicyFile(LaxConfig):
    defaults: Rules = Rules()
    variants: dict[str, Override] = {}
    release: ReleaseRules = ReleaseRules()


@dataclass(frozen=True)
class Policy:
    """The rules in force for one scan, after the variant override is applied."""

    source: str
    variant: str | None
    rules: Rules
    release: ReleaseRules = ReleaseRules()


def parse_policy(text: str, source: str, known_variants: list[str] | None = None) -> PolicyFile:
    """Policy yaml -> PolicyFile, or one ConfigError naming the file and yaml path."""
    doc = load_yaml(text, source)  # dates YAML cannot build, nesting too deep: one ConfigError
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
    loc = tuple(first["loc"])
    key, kind = (loc[-1] if loc else None), first["type"]
    if (key in ("reason", "expires") and kind == "missing"
            or key == "reason" and kind in ("string_too_short", "value_error")):
        article = "an" if key == "expires" else "a"
        return ConfigError(f"{source}: {yaml_path(loc[:-1])}", f"allowlist entry needs {article} `{key}`"
                           + (" of at least 10 characters" if key == "reason" else " date"),
                           "every accepted finding says why (reason) and until when (expires: YYYY-MM-DD)")
    if key == "expires":
        problem = (first["msg"].removeprefix("Value error, ") if kind == "value_error"
                   else f"{first.get('input')!r} is not a date")
        return ConfigError(f"{source}: {yaml_path(loc)}", problem,
                           "write expires: YYYY-MM-DD, a real calendar day (e.g. 2027-03-31)")
    return validation_error(source, err, "policy/trivy.yaml")


def resolve(spec: PolicyFile, source: str, variant: str | None) -> Policy:
    rules = spec.defaults
    override = spec.variants.get(variant or "")
    if override:
        changes = {k: v for k, v in override.model_dump(exclude={"allowlist"}).items() if v is not None}
        rules = rules.model_copy(update=changes | {"allowlist": rules.allowlist + override.allowlist})
    return Policy(source=source, variant=variant, rules=rules, release=spec.release)


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
    image_id: str = ""  # Metadata.ImageID: the config digest of the image scanned ("" when not an image scan)
    db_age_unknown: bool = False  # the scan ran here, but the DB's metadata names no UpdatedAt


HARBOR_MIME = "application/vnd.security.vulnerability.report; version=1.1"
REPORT_FIX = ("pass the report as `trivy image --format json --output FILE` wrote it "
              "(this one was edited, cut short or made by another tool)")
HARBOR_FIX = "save the body of GET .../artifacts/{reference}/additions/vulnerabilities as it came"
_PACKED = {b"\x1f\x8b": "gzip-compressed", b"\x28\xb5\x2f\xfd": "zstd-compressed", b"PK\x03\x04": "a zip archive",
           b"\xfd7zXZ": "xz-compressed", b"BZh": "bzip2-compressed"}


def read_report(raw: bytes | str, source: str) -> dict[str, Any]:
    """Parse trivy JSON (or Harbor's vulnerability report, turned into the same shape) and check,
    in one pass, every part of it that findings() and scan_facts() read. Anything else fails
    closed with one RapidshipError naming the file and the JSON path of the first bad part."""
    return check_report(_parse_json(raw, source), source)


def check_report(report: Any, source: str) -> dict[str, Any]:
    """A report already parsed (Harbor's client hands over JSON it decoded) -> the checked trivy
    shape, or one RapidshipError, exactly as read_report."""
    if isinstance(report, dict) and (HARBOR_MIME in report or "vulnerabilities" in report and "scanner" in report):
        return from_harbor(report.get(HARBOR_MIME, report), source)
    if not isinstance(report, dict) or report.get("SchemaVersion") != 2:
        raise RapidshipError(source, "not a trivy JSON report of schema version 2",
                             "pass the file written by `trivy ... --format json` (trivy 0.20 or newer)")
    _check_trivy(report, _Shape(source, "not a trivy JSON report", REPORT_FIX))
    return report


def _parse_json(raw: bytes | str, source: str) -> Any:
    import json

    text = _decode(raw, source) if isinstance(raw, (bytes, bytearray)) else raw
    if not text or text.isspace():
        raise RapidshipError(source, "not a trivy JSON report (the file is empty)",
                             "the scan that wrote it did not finish: scan again")
    from rapidship import oci_json

    try:  # a key given twice (or twice but for case) is two reports in one: refused, never "the last wins"
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=oci_json.unique_keys)
    except oci_json.Ambiguous as err:
        raise RapidshipError(source, f"an ambiguous report: {err} (readers differ on which one counts)",
                             REPORT_FIX) from None
    except RecursionError:
        raise RapidshipError(source, "not a trivy JSON report (nested too deeply: trivy's reports are a few levels "
                             "deep)", REPORT_FIX) from None
    except ValueError as err:  # JSONDecodeError, NaN/Infinity, integers past Python's 4300 digits
        why = "a number too long to be one trivy writes" if "integer string conversion" in str(err) else str(err)[:120]
        raise RapidshipError(source, f"not a trivy JSON report (not valid JSON: {why})",
                             "pass the file written by `trivy ... --format json`") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _decode(raw: bytes | bytearray, source: str) -> str:
    """Trivy writes UTF-8 without a byte order mark, and `trivy convert` (the SBOM) reads nothing
    else: anything different is named, with the command that converts it."""
    import json

    encoding = json.detect_encoding(raw)
    if encoding != "utf-8":
        try:
            looks_like_json = raw.decode(encoding).lstrip("\ufeff \t\r\n")[:1] in ("{", "[")
        except UnicodeDecodeError:
            looks_like_json = False
        if looks_like_json and encoding == "utf-8-sig":
            raise RapidshipError(source, "not a trivy JSON report as trivy writes it (UTF-8 with a byte order mark, "
                                 "which `trivy convert` cannot read)",
                                 f"remove the first 3 bytes (tail -c +4 {source} > report.json), or write the report "
                                 "with trivy's --output FILE instead of an editor or a shell redirect")
        if looks_like_json:
            name = encoding.split("-")[0].upper() + "-" + encoding.split("-")[1]
            raise RapidshipError(source, f"not a trivy JSON report as trivy writes it ({name} text, not UTF-8)",
                                 f"convert it (iconv -f {encoding.upper()} -t UTF-8 {source} > report.json), or write "
                                 "the report with trivy's --output FILE (a PowerShell `>` redirect writes UTF-16)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        packed = next((what for magic, what in _PACKED.items() if raw.startswith(magic)), None)
        what = packed or f"not UTF-8 text: byte 0x{raw[err.start]:02x} at offset {err.start}"
        fix = "decompress it first" if packed else "pass the JSON file trivy wrote, not a binary or damaged copy"
        raise RapidshipError(source, f"not a trivy JSON report ({what})", fix) from None


class _Shape:
    """Checks parts of a parsed report; the first one of the wrong type (or missing) is one
    RapidshipError naming the file and its JSON path, e.g. `Results[0].Vulnerabilities[3].Severity`."""

    def __init__(self, source: str, what: str, fix: str) -> None:
        self.source, self.what, self.fix = source, what, fix

    def fail(self, path: tuple, problem: str) -> NoReturn:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        raise RapidshipError(f"{self.source}: {where}" if where else self.source, f"{self.what} ({problem})", self.fix)

    def mapping(self, value: Any, path: tuple) -> dict[str, Any]:
        """A mapping, or {} for null / absent."""
        if isinstance(value, dict):
            return value
        if value is None:
            return {}
        self.fail(path, f"expected a mapping, got {_kind(value)}")

    def entries(self, value: Any, path: tuple) -> list[dict[str, Any]]:
        """A list of mappings, or [] for null / absent."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_kind(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                self.fail((*path, i), f"expected a mapping, got {_kind(item)}")
        return value

    def texts(self, obj: dict[str, Any], keys: tuple[str, ...], path: tuple) -> None:
        """Each key a string that is text (no unpaired surrogate such as "\\ud800", which JSON
        allows and UTF-8 cannot hold), or null / absent."""
        for key in keys:
            value = obj.get(key)
            if isinstance(value, str):
                if value.isascii():
                    continue
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as err:
                    self.fail((*path, key), f"a string with the unpaired surrogate {value[err.start]!r}, which is no "
                              "character: trivy never writes one")
            elif value is not None:
                self.fail((*path, key), f"expected a string, got {_kind(value)}")

    def named(self, obj: dict[str, Any], keys: tuple[str, ...], path: tuple, what: str) -> None:
        """At least one of the keys a non-empty string: what the finding is called."""
        if not any(isinstance(obj.get(key), str) and obj[key].strip() for key in keys):
            self.fail(path, f"{what} without its `{'` or `'.join(keys)}`")


_VULN_TEXT = ("VulnerabilityID", "PkgName", "InstalledVersion", "FixedVersion", "Status", "Severity", "Title")
_SECRET_TEXT = ("RuleID", "Severity", "Title")
_MISCONF_TEXT = ("ID", "AVDID", "Status", "Severity", "Title")


def _check_trivy(report: dict[str, Any], shape: _Shape) -> None:
    """Every part of a trivy report that the gate reads: what findings(), scan_facts() and the
    gate's record rely on."""
    shape.texts(report, ("ArtifactName", "ArtifactType"), ())
    meta = shape.mapping(report.get("Metadata"), ("Metadata",))
    shape.texts(shape.mapping(meta.get("OS"), ("Metadata", "OS")), ("Family", "Name"), ("Metadata", "OS"))
    shape.texts(shape.mapping(report.get("Trivy"), ("Trivy",)), ("Version",), ("Trivy",))
    if "Results" in report and not isinstance(report["Results"], list):
        shape.fail(("Results",), f"expected a list, got {_kind(report['Results'])}")
    for r, result in enumerate(shape.entries(report.get("Results"), ("Results",))):
        shape.texts(result, ("Target",), ("Results", r))
        shape.entries(result.get("Packages"), ("Results", r, "Packages"))
        for i, v in enumerate(shape.entries(result.get("Vulnerabilities"), ("Results", r, "Vulnerabilities"))):
            at = ("Results", r, "Vulnerabilities", i)
            shape.texts(v, _VULN_TEXT, at)
            shape.named(v, ("VulnerabilityID",), at, "a vulnerability")
            shape.texts(shape.mapping(v.get("Layer"), (*at, "Layer")), ("DiffID",), (*at, "Layer"))
        for i, sec in enumerate(shape.entries(result.get("Secrets"), ("Results", r, "Secrets"))):
            at = ("Results", r, "Secrets", i)
            shape.texts(sec, _SECRET_TEXT, at)
            shape.texts(shape.mapping(sec.get("Layer"), (*at, "Layer")), ("DiffID",), (*at, "Layer"))
        for i, m in enumerate(shape.entries(result.get("Misconfigurations"), ("Results", r, "Misconfigurations"))):
            at = ("Results", r, "Misconfigurations", i)
            shape.texts(m, _MISCONF_TEXT, at)
            shape.named(m, ("Status",), at, "a check result")  # without it a failed check would pass unseen
            if m["Status"] == "FAIL":
                shape.named(m, ("ID", "AVDID"), at, "a failed check")


def _kind(value: Any) -> str:
    import reprlib

    shown = reprlib.Repr()
    shown.maxstring = shown.maxother = 40
    shown.maxlist = shown.maxdict = 3
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "true/false", type(None): "null"}
    name = names.get(type(value), "a number")
    return f"{name} ({shown.repr(value)})" if value is not None else name


def from_harbor(report: Any, source: str) -> dict[str, Any]:
    """Harbor's report (GET .../artifacts/{ref}/additions/vulnerabilities, scanner adapter format
    1.1) -> the trivy JSON shape. It names no OS and lists no packages: no SBOM, no OS check."""
    vulns = report.get("vulnerabilities") if isinstance(report, dict) else None
    if not isinstance(vulns, list):
        raise RapidshipError(source, "a Harbor vulnerability report without a readable `vulnerabilities` list", HARBOR_FIX)
    shape = _Shape(source, "not a Harbor vulnerability report", HARBOR_FIX)
    for i, v in enumerate(shape.entries(vulns, ("vulnerabilities",))):
        shape.texts(v, ("id", "package", "version", "fix_version", "severity", "description"), ("vulnerabilities", i))
        shape.named(v, ("id",), ("vulnerabilities", i), "a vulnerability")
    artifact = shape.mapping(report.get("artifact"), ("artifact",))
    shape.texts(artifact, ("repository", "digest"), ("artifact",))
    scanner = shape.mapping(report.get("scanner"), ("scanner",))
    shape.texts(scanner, ("version",), ("scanner",))
    name = "@".join(p for p in (artifact.get("repository"), artifact.get("digest")) if p) or source
    return {"SchemaVersion": 2, "ArtifactName": name, "ArtifactType": "harbor_report",
            "Trivy": {"Version": (scanner.get("version") or "").lstrip("v")},
            "Results": [{"Target": name, "Vulnerabilities": [
                {"VulnerabilityID": v["id"], "PkgName": v.get("package") or "", "InstalledVersion": v.get("version") or "",
                 "FixedVersion": v.get("fix_version") or "", "Severity": v.get("severity") or "",
                 "Title": (v.get("description") or "")[:200]} for v in vulns]}]}


def scan_facts(report: dict[str, Any]) -> ScanFacts:
    """What the report says about the scan; `report` is what read_report returned."""
    os_meta = (report.get("Metadata") or {}).get("OS") or {}
    os_name = f"{os_meta.get('Family') or ''} {os_meta.get('Name') or ''}".strip()
    results = report.get("Results") or []
    packages = sum(len(r.get("Packages") or []) for r in results)
    image_id = (report.get("Metadata") or {}).get("ImageID")
    return ScanFacts(artifact=report.get("ArtifactName") or "", artifact_type=report.get("ArtifactType") or "",
                     os=os_name, packages=packages, results=len(results),
                     image_id=image_id if isinstance(image_id, str) else "")


def findings(report: dict[str, Any]) -> list[Finding]:
    """Every vulnerability, secret and failed misconfiguration in a trivy report (as read_report
    returned it: every part read here has the right type)."""
    out: list[Finding] = []
    for result in report.get("Results") or []:
        target = result.get("Target") or ""
        for v in result.get("Vulnerabilities") or []:
            out.append(Finding(kind="vulnerability", id=v["VulnerabilityID"], severity=_severity(v.get("Severity")),
                               target=target, title=v.get("Title") or "", package=v.get("PkgName") or "",
                               installed=v.get("InstalledVersion") or "", fixed=v.get("FixedVersion") or "",
                               status=v.get("Status") or "", layer=(v.get("Layer") or {}).get("DiffID") or ""))
        for s in result.get("Secrets") or []:
            out.append(Finding(kind="secret", id=s.get("RuleID") or "secret", severity=_severity(s.get("Severity")),
                               target=target, title=s.get("Title") or "",
                               layer=(s.get("Layer") or {}).get("DiffID") or ""))
        for m in result.get("Misconfigurations") or []:
            if m.get("Status") == "FAIL":
                out.append(Finding(kind="misconfiguration", id=m.get("ID") or m.get("AVDID") or "",
                                   severity=_severity(m.get("Severity")), target=target, title=m.get("Title") or ""))
    return out


# Harbor's scale (pkg/scan/vuln: None < Unknown < Negligible < Low < ...) has two levels trivy's
# lacks: Negligible ("technically a vulnerability, theoretical") and None (graded, no impact). Both
# rank below Low there; the lowest graded level here is LOW, so a LOW threshold still sees them.
HARBOR_SEVERITIES = {"NEGLIGIBLE": "LOW", "NONE": "LOW"}


def _severity(value: Any) -> str:
    value = str(value or "UNKNOWN").upper()
    value = HARBOR_SEVERITIES.get(value, value)
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
    by_id: dict[str, list[tuple[int, AllowEntry]]] = {}  # one look-up per finding, not a walk of the allowlist
    for i, entry in enumerate(rules.allowlist):
        by_id.setdefault(entry.id, []).append((i, entry))
    verdicts = [_judge(f, rules, threshold, today, used, by_id) for f in report_findings]
    problems = _empty_scan(facts)
    if rules.require_os and facts.artifact_type == "container_image" and not facts.os:
        problems.append(f"trivy detected no operating system in {facts.artifact}: its OS packages were not "
                        "checked (unsupported distribution, or no package database in the image)")
    if rules.max_db_age_days and facts.db_age_unknown:  # a DB of unknown age is never "fresh"
        problems.append(f"the vulnerability DB's metadata.json names no UpdatedAt: its age is unknown "
                        f"(max_db_age_days: {rules.max_db_age_days}): refresh the DB mirror, or write a DB with "
                        "its metadata")
    if rules.max_db_age_days and facts.db_updated and (today - facts.db_updated).days > rules.max_db_age_days:
        problems.append(f"the vulnerability DB was last updated {facts.db_updated}, "
                        f"{(today - facts.db_updated).days} days ago (max_db_age_days: {rules.max_db_age_days}): "
                        "refresh the DB mirror")
    problems += [f"allowlist entry {e.id} expires {e.expires}, {(e.expires - today).days} days ahead: more than "
                 f"max_allowlist_days ({rules.max_allowlist_days}); accept it for a shorter time and review it again"
                 for e in rules.allowlist if (e.expires - today).days > rules.max_allowlist_days]
    notes = [f"allowlist entry {e.id} matched nothing; remove it if the finding is gone"
             for i, e in enumerate(rules.allowlist) if i not in used and e.expires >= today]
    notes += [f"allowlist entry {e.id} expired on {e.expires}" for i, e in enumerate(rules.allowlist) if e.expires < today]
    passed = not problems and all(v.outcome != "fail" for v in verdicts)
    return Decision(passed=passed, policy=describe(policy), facts=facts, verdicts=verdicts, problems=problems,
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


def _judge(f: Finding, rules: Rules, threshold: int, today: date, used: set[int],
           by_id: dict[str, list[tuple[int, AllowEntry]]]) -> Verdict:
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
    for i, entry in by_id.get(f.id, ()):
        if entry.package and not fnmatch.fnmatchcase(f.package, entry.package):
            continue
        if f.kind == "secret" and not entry.path:  # a rule id alone would accept the secret in every file
            continue
        if entry.path and not fnmatch.fnmatchcase(f.target, entry.path):
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


def describe(policy: Policy) -> dict[str, Any]:
    """The decision's `policy` block: what a scan was decided under (the release chain compares it)."""
    return {"source": policy.source, "variant": policy.variant} | policy.rules.model_dump(mode="json")


def report_decider(policy: Policy, today: date, source: str = "harbor report"):
    """The same decision over a report as Harbor serves it (keyed by MIME type) or as trivy writes
    it: what the Harbor-side gate calls after each scan. Returns a JSON-able verdict record."""
    def decide_report(report: dict[str, Any]) -> dict[str, Any]:
        parsed = check_report(report, source)
        decision = decide(findings(parsed), scan_facts(parsed), policy, today)
        return {"passed": decision.passed, "reasons": decision.reasons, "notes": decision.notes,
                "counts": decision.counts()}

    return decide_report
