"""The release report task: one self-contained page from every record of every variant x arch."""

from __future__ import annotations


from rapidship.cli.options import task

from rapidship.cli.options import VARIANTS_HELP
from rapidship.errors import exits_cleanly


@task(name="report", iterable=["export", "variant", "arch"],
      help={"out": "folder for index.html, the PNG charts and report.json (default build/report)",
            "build-dir": "where the records live (default build)",
            "export": "an export folder or glob holding export.json (repeatable; default <build-dir>/export-*, "
                      "export/* and every --out invoke export wrote to)",
            "variant": "a variant the release contains (repeatable; default: the push records, else what was built)",
            "arch": "an arch the release contains (repeatable; default: every arch of each variant in it)",
            "strict": "exit 1 unless every check of every image passed (the page is written either way)",
            **VARIANTS_HELP})
@exits_cleanly
def report(c, out="build/report", build_dir="build", export=None, strict=False, variants_file="variants.yaml",
           variant=None, arch=None):
    """Write the release report: verdicts, sizes, bytes, scan, smoke, signatures, discs, versions (index.html)."""
    from rapidship.stages.report import report as report_stage

    report_stage(out, build_dir, export, strict, variants_file, variant, arch)
