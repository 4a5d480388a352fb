"""The scan stage: trivy on an image (and its Dockerfile), the policy applied, the verdict printed."""

from __future__ import annotations

from pathlib import Path

from rapidship import console
from rapidship.config.matrix import load_matrix
from rapidship.errors import GateFailure
from rapidship.records import Workspace


def scan(variant=None, arch=None, image=None, tar=None, dockerfile=None, policy="policy/trivy.yaml", out=None,
         trivy=None, cache_dir=None, db_repository=None, skip_db_update=False, offline_scan=False,
         variants_file="variants.yaml"):
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
        a = arch or host_arch()
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
