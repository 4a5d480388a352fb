"""The report stage: one self-contained page from the records, and the release's one verdict said as the page says it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rapidship import console
from rapidship.config.matrix import load_matrix
from rapidship.errors import GateFailure
from rapidship.records import Workspace


def report(out="build/report", build_dir="build", export=None, strict=False, variants_file="variants.yaml",
           variant=None, arch=None):
    """Write the release report: verdicts, sizes, bytes, scan, smoke, signatures, discs, versions (index.html)."""
    from rich.markup import escape

    from rapidship.report.collect import export_dirs, recorded_exports
    from rapidship.report.model import LABELS
    from rapidship.report.verdict import verdict
    from rapidship.report.write import report as write_report

    variants = list(load_matrix(variants_file).variants.values())
    ws = Workspace(build_dir)
    folders = export_dirs(list(export or [f"{build_dir}/export-*", "export/*"]))
    if not export:  # and every export's --out, wherever it was (the pointers invoke export leaves)
        seen = {f.resolve() for f in folders}
        folders += [f for f in recorded_exports(ws) if f.resolve() not in seen]
    with console.status(f"reading the records under {build_dir}"):
        written = write_report(ws, variants, folders, Path(out), scope=(variant or None, arch or None))
    s = written.summary
    console.err.print(f"release scope ({s.scope.source}): {', '.join(f'{v} {a}' for v, a in s.scope.images)}",
                      soft_wrap=True)
    if s.scope.out_of_scope:
        console.err.print("not in this release: " + "; ".join(f"{o.variant} {', '.join(o.arches)} ({o.why})"
                                                               for o in s.scope.out_of_scope), soft_wrap=True)
    console.table(f"release report of {s.commit}", ["image", "verdict", "checks not passed"],
                  [(f"{r.variant} {r.arch}", LABELS[r.status], _not_passed(r)) for r in s.rows])
    for r in s.corrupt:
        console.err.print(f"[bold red]CORRUPT[/] {escape(r.path)}: {escape(r.message)}  (fix: run {escape(r.writer)})",
                          emoji=False, soft_wrap=True)  # paths stay whole, one line each
    if s.missing:
        kinds = ", ".join(f"{n} {what}" for what, n in sorted(Counter(r.what for r in s.missing).items()))
        console.err.print(f"[yellow]not run[/] (no record, shown as NOT RUN): {kinds}", soft_wrap=True)
    counts = ", ".join(f"{s.count(k)} {LABELS[k]}" for k in ("pass", "fail", "corrupt", "stale", "missing", "site"))
    said = verdict(s)
    said_verdict(said)
    console.err.print(f"{counts} -> {written.index} ({written.page_bytes:,} bytes), "
                      f"{len(written.pngs)} PNG charts, {written.summary_json.name}; {written.seconds}s", soft_wrap=True)
    if strict and s.status != "pass":
        raise GateFailure("report", f"not every check passed ({counts})", f"see {written.index}")


def _not_passed(row) -> str:
    """'FAIL: trivy; NOT RUN: harbor, signature' (worst first); '-' when every check passed."""
    from rapidship.report.model import COLUMNS, LABELS, SEVERITY_OF_STATUS

    parts = []
    for status in SEVERITY_OF_STATUS[:-1]:
        names = [c for c in COLUMNS if row.cells[c].status == status]
        if names:
            parts.append(f"{LABELS[status]}: {', '.join(names)}")
    return "; ".join(parts) or "-"


def said_verdict(said, what: str = "release") -> None:
    """The verdict's words as the page says them, then each check left to a GPU runner or a site, with its command."""
    from rich.markup import escape

    colour = {"released": "green", "released pending": "yellow"}.get(said.status, "bold red")
    console.err.print(f"{escape(what)}: [{colour}]{escape(said.words)}[/]", soft_wrap=True)
    for p in said.pending:
        console.err.print(f"  pending: {escape(p.text())}", soft_wrap=True)
    for p in said.site:
        console.err.print(f"  only a site or its Harbor can run: {escape(p.text())}", soft_wrap=True)
