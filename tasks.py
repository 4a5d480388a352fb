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


@task(iterable=["env", "conda_channel"],
      help={"env": "env spec name under envs/, or tools (repeatable; default: every env and tools)",
            "check": "only report locks that no longer match their spec",
            "conda-channel": "conda channel mirror, NAME=URL or a URL ending in the channel name (repeatable; "
                             "default $RAPIDSHIP_CONDA_CHANNELS, else conda.anaconda.org); credentials never reach the lock",
            **VARIANTS_HELP})
@exits_cleanly
def lock(c, env=None, check=False, conda_channel=None, variants_file="variants.yaml"):
    """Solve env specs into committed, hashed lockfiles under locks/ (pip: uv; conda: py-rattler per platform)."""
    from rapidship.conda_lock import check_conda_locks, lock_conda
    from rapidship.lock import ENVS, TOOLS, check_lock, load_env_spec, lock_pip

    names = env or ([TOOLS.name] + sorted(p.stem for p in ENVS.glob("*.yaml")))
    specs = sorted((load_env_spec(n) for n in names), key=lambda s: s.flavour == "conda")  # pip first: no channel needed
    matrix = load_matrix(variants_file) if any(s.flavour == "conda" for s in specs) else None
    for spec in specs:
        if spec.flavour == "pip" and check:
            check_lock(spec)
            console.err.print(f"ok {spec.name}")
        elif spec.flavour == "pip":
            console.err.print(f"locked {lock_pip(spec)}")
        elif check:
            for path in check_conda_locks(spec, matrix):
                console.err.print(f"ok {spec.name} {path}")
        else:
            with console.err.status(f"solving {spec.name} with py-rattler"):
                paths = lock_conda(spec, matrix, conda_channel or None)
            for path in paths:
                console.err.print(f"locked {path}")


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
            "network": "network of the RUN steps: host reaches mirrors on this machine's 127.0.0.1 (default: the engine's)",
            **VARIANTS_HELP})
@exits_cleanly
def build(c, variant="cpu-debian12", arch=None, ca_bundle=None, pip_index=None, conda_channel=None, network=None,
          variants_file="variants.yaml"):
    """Render and build a variant with BuildKit; writes build/<variant>/build-<arch>.json."""
    from rapidship.build import BuildSecrets, build as build_image, plan_build, write_record
    from rapidship.lock import check_lock, load_env_spec
    from rapidship.matrix import Flavour
    from rapidship.render import missing_locks, render as render_variant

    m = load_matrix(variants_file)
    v = m.get(variant)
    if v.flavour is Flavour.pip:
        check_lock(load_env_spec(v.env))
    else:
        from rapidship.conda_lock import check_conda_locks
        check_conda_locks(load_env_spec(v.env), m)
        if missing := missing_locks(v):
            from rapidship.errors import ConfigError
            raise ConfigError(missing[0], "lock file missing", "run invoke lock --env tools")
    secrets = BuildSecrets.from_flags(ca_bundle, pip_index, conda_channel)
    rendered = render_variant(v)
    revision = c.run("git rev-parse --short HEAD", hide=True, warn=True).stdout.strip()
    for a in ([_arch(arch)] if arch else v.arches):
        plan = plan_build(v, a, rendered, secrets, revision, network)
        log = Path(rendered.out_dir) / f"build-{a.value}.log"
        with console.err.status(f"building {plan.ref}") as status:
            built = build_image(plan, secrets, v, log, on_step=lambda s: status.update(f"{plan.ref}: {s}"))
        record = write_record(built, Path(rendered.out_dir))
        console.err.print(f"built {built.ref} in {built.seconds}s: {built.size_bytes / 1e6:.0f} MB, "
                          f"zstd {built.zstd_bytes / 1e6:.0f} MB, {built.layers} layers, "
                          f"{built.cached_steps}/{built.total_steps} steps cached -> {record}")


# ---- sizes ----


@task(name="size-report",
      help={"variant": "variant id", "arch": "amd64 or arm64 (default: every arch of the variant with a build record)",
            "top": "how many of the largest paths to list (default 25)", "json": "print the report as JSON on stdout",
            **VARIANTS_HELP})
@exits_cleanly
def size_report(c, variant, arch=None, top=25, json=False, variants_file="variants.yaml"):
    """Largest paths of a built image, what the trims saved, uncompressed and zstd sizes against the budget."""
    from rapidship.build import read_record
    from rapidship.size_report import report, write_report

    v = load_matrix(variants_file).get(variant)
    out_dir = Path("build") / v.id
    arches = [_arch(arch)] if arch else [a for a in v.arches if (out_dir / f"build-{a.value}.json").is_file()]
    if not arches:
        from rapidship.errors import ConfigError
        raise ConfigError(str(out_dir), "no build record", f"run invoke build --variant {v.id} first")
    failed = []
    for a in arches:
        built = read_record(out_dir, a.value)
        with console.err.status(f"reading {built.ref} (docker export)"):
            rep = report(built.ref, variant=v.id, arch=a.value, image_bytes=built.size_bytes,
                         zstd_bytes=built.zstd_bytes, budget_bytes=v.budget_bytes, top=int(top))
        path = write_report(rep, out_dir)
        if json:
            console.print_json(rep.to_json())
        else:
            _print_size_report(rep)
        console.err.print(f"record: {path}")
        if not rep.within_budget:
            failed.append(f"{v.id} {a.value}")
    if failed:
        raise GateFailure("size-report", f"over the budget: {', '.join(failed)}", "trim the env (docs/sizes.md)")


def _print_size_report(rep):
    gb = lambda n: f"{n / 1e9:.3f} GB" if n is not None else "-"  # noqa: E731
    console.table(f"{rep.ref}: largest directories", ["path", "size"], [(p.path, gb(p.bytes)) for p in rep.largest_dirs])
    console.table("largest files", ["path", "size"], [(p.path, gb(p.bytes)) for p in rep.largest_files])
    if rep.trims:
        t = rep.trims
        rows = [(pattern, gb(size)) for pattern, size in sorted(t["patterns"].items(), key=lambda kv: -kv[1])]
        console.table(f"trims ({t['style']}): {gb(t['trimmed_bytes'])} of {gb(t['before_bytes'])} saved; "
                      f"*.pyc kept: {gb(t['pyc_bytes'])}", ["pattern", "saved"], rows)
    verdict = "[green]within[/]" if rep.within_budget else "[red]OVER[/]"
    console.err.print(f"image {gb(rep.image_bytes)} (uncompressed), zstd -3 {gb(rep.zstd_bytes)}, budget "
                      f"{gb(rep.budget_bytes)}: {verdict}, headroom {rep.headroom_bytes:,} bytes")
