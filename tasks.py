"""invoke tasks: parse flags, call the stage, print. No pipeline logic lives here."""

from __future__ import annotations

import sys
from pathlib import Path

from invoke import Task, task

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


@task(help={"variant": "variant id", "arch": "amd64 or arm64 (default: every arch of the variant)",
            "ca-bundle": "the CA bundle the build used (default as for build): its private certs must not leak",
            "pip-index": "the index URL the build used (default $RAPIDSHIP_PIP_INDEX_URL)", **VARIANTS_HELP})
@exits_cleanly
def gates(c, variant="cpu-debian12", arch=None, ca_bundle=None, pip_index=None, variants_file="variants.yaml"):
    """Run the image gates (size, labels, user, suid, secrets) on a built image; writes gates-<arch>.json."""
    from rapidship.build import BuildSecrets, read_record
    from rapidship.gates.run import run_gates, write_gates_record

    v = load_matrix(variants_file).get(variant)
    secrets = BuildSecrets.from_flags(ca_bundle, pip_index, None)
    failed = []
    for a in ([_arch(arch)] if arch else v.arches):
        out = Path("build") / v.id
        built = read_record(out, a.value)
        with console.err.status(f"gates on {built.ref}") as status:
            reports = run_gates(v, built, secrets, on_gate=lambda g: status.update(f"{built.ref}: gate {g}"))
        console.table(f"gates {built.ref}", ["gate", "result", "why"],
                      [(r.gate, "PASS" if r.passed else "FAIL", "; ".join(r.reasons) or "-") for r in reports])
        console.err.print(f"record: {write_gates_record(built, reports, out)}")
        failed += [f"{a.value}:{r.gate}" for r in reports if not r.passed]
    if failed:
        raise GateFailure("gates", f"{variant} failed {', '.join(failed)}", "see the table above and the gates record")


# ---- ci ----
# `invoke ci.<task>`: the GitLab child pipeline and the steps only CI runners need.
from invoke import Collection  # noqa: E402


@task(name="generate", iterable=["variant"],
      help={"out": "where to write the child pipeline (default build/ci/child-pipeline.yml)",
            "profile": "production (GitLab runners, Harbor) or local (shell executor, loopback registry)",
            "builder": "production builder: buildctl (rootless BuildKit, default) or kaniko",
            "registry": "local profile: loopback registry and project (default 127.0.0.1:5000/staging)",
            "variant": "variant id (repeatable; default: every variant)", **VARIANTS_HELP})
@exits_cleanly
def ci_generate(c, out="build/ci/child-pipeline.yml", profile="production", builder="buildctl",
                registry="127.0.0.1:5000/staging", variant=None, variants_file="variants.yaml"):
    """Write the GitLab child pipeline for the matrix (per variant x arch jobs, a needs: DAG)."""
    from rapidship import ci
    from rapidship.errors import ConfigError

    if profile == "production":
        try:
            chosen = ci.production(ci.Builder(builder))
        except ValueError:
            raise ConfigError("--builder", f"{builder!r} is not buildctl or kaniko", "pass --builder buildctl") from None
    elif profile == "local":
        chosen = ci.local(registry)
    else:
        raise ConfigError("--profile", f"{profile!r} is not production or local", "pass --profile production")
    m = load_matrix(variants_file)
    path = ci.write_pipeline(m, chosen, Path(out), variant or None)
    count = len(ci.jobs(m, chosen, variant or None))
    console.err.print(f"wrote {path}: {count} jobs for {', '.join(v.id for v in m.select(variant or None))} "
                      f"({chosen.name}, builder {chosen.builder.value})")


@task(name="build", help={"variant": "variant id", "arch": "amd64 or arm64", **VARIANTS_HELP})
@exits_cleanly
def ci_build(c, variant, arch, variants_file="variants.yaml"):
    """CI runners without a daemon: build with $RAPIDSHIP_BUILDER (buildctl|kaniko), push a candidate tag."""
    import os

    from rapidship.build import (BuildSecrets, build_staged, cache_ref, candidate_ref, plan_build, write_staged)
    from rapidship.render import render as render_variant

    v = load_matrix(variants_file).get(variant)
    a = _arch(arch)
    secrets = BuildSecrets.from_flags(None, None, None)
    rendered = render_variant(v)
    revision = os.environ.get("CI_COMMIT_SHORT_SHA", "")
    plan = plan_build(v, a, rendered, secrets, revision)
    push_ref = candidate_ref(v, a, os.environ.get("RAPIDSHIP_REGISTRY", ""), os.environ.get("RAPIDSHIP_CANDIDATE_SUFFIX", ""))
    builder = os.environ.get("RAPIDSHIP_BUILDER", "buildctl")
    log = Path(rendered.out_dir) / f"build-{a.value}.log"
    with console.err.status(f"{builder}: building {push_ref}") as status:
        staged = build_staged(plan, secrets, builder, push_ref,
                              cache_ref(v, a, os.environ.get("RAPIDSHIP_CACHE_REPO")), log, status.update)
    console.err.print(f"pushed {staged.ref} {staged.digest} in {staged.seconds}s -> "
                      f"{write_staged(staged, Path(rendered.out_dir))}")


@task(name="pull", help={"variant": "variant id", "arch": "amd64 or arm64 (default: every arch of the variant)",
                         **VARIANTS_HELP})
@exits_cleanly
def ci_pull(c, variant, arch=None, variants_file="variants.yaml"):
    """Pull the build job's candidate into this runner's engine and write build/<variant>/build-<arch>.json."""
    from rapidship.build import pull_staged, write_record

    v = load_matrix(variants_file).get(variant)
    for a in ([_arch(arch)] if arch else v.arches):
        with console.err.status(f"pulling {v.id} {a.value}"):
            built = pull_staged(Path("build") / v.id, a.value, v)
        console.err.print(f"pulled {built.extra['digest']} as {built.ref} -> {write_record(built, Path('build') / v.id)}")


@task(name="test", help={"markers": "pytest -m expression (default: the suite's own default)",
                         "junit": "write a JUnit XML report here (GitLab shows it on the merge request)"})
def ci_test(c, markers=None, junit=None):
    """Run the test suite (what the root pipeline's test jobs call)."""
    import shlex

    args = ["python3", "-m", "pytest", "-q"]
    args += ["-m", markers] if markers else []
    args += [f"--junitxml={junit}"] if junit else []
    c.run(" ".join(shlex.quote(a) for a in args), pty=False)


@task(name="verify-export", help={"out": "the directory `invoke export --out` wrote"})
@exits_cleanly
def ci_verify_export(c, out):
    """Verify every volume an export wrote to a directory (export-verify with each ISO as --from)."""
    from rapidship.errors import ConfigError

    volumes = sorted(str(p) for p in Path(out).glob("rapidship-*.iso"))
    if not volumes:
        raise ConfigError("--out", f"no rapidship-*.iso volume in {out}", "run invoke export --out DIR first")
    export_verify(c, from_=volumes)  # noqa: F821 - the export block of this file defines it


ci_tasks = Collection("ci", ci_generate, ci_build, ci_pull, ci_test, ci_verify_export)
del ci_generate, ci_build, ci_pull, ci_test, ci_verify_export  # listed under ci.*, not at the top level


def __getattr__(name):
    """PEP 562: invoke asks for `ns` after every block of this file has run, so the root
    collection holds every top-level task and every namespace (ci.*) whichever block made it."""
    if name not in ("ns", "namespace"):
        raise AttributeError(name)
    root = Collection()
    for obj in list(globals().values()):
        if isinstance(obj, Task):
            root.add_task(obj)
        elif isinstance(obj, Collection) and obj.name:
            root.add_collection(obj)
    return root
