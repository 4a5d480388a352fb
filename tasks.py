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


# ---- smoke ----

@task(iterable=["env"],
      help={"variant": "variant id", "arch": "amd64 or arm64 (default: this machine's)",
            "mode": "cpu (host -> disk), gpu (CuPy device -> host -> disk) or cudf (cuDF + dask-cudf)",
            "memory": "container memory cap, also --memory-swap (default 1g)", "shm-size": "/dev/shm size (default 256m)",
            "uid": "run uid: a number or 'random' (default: the variant's uid)",
            "gpus": "GPUs to pass: all or a device list like 0,1 (needs the NVIDIA container toolkit)",
            "data": "dataset size passed to rapids-smoke --data-bytes (default: 2 x the cap)",
            "spill-mount": "bind-mount a fresh host spill dir (default); --no-spill-mount to test the failure",
            "spill-owner": "owner uid of the host spill dir (default: the run uid; another uid tests the failure)",
            "env": "KEY=VALUE set in the container (repeatable)",
            "image": "image to run (default: the image id in build/<variant>/build-<arch>.json, else the tag)",
            "out": "where records go (default build/smoke)", **VARIANTS_HELP})
@exits_cleanly
def smoke(c, variant="cpu-debian12", arch=None, mode="cpu", memory="1g", shm_size="256m", uid=None, gpus=None,
          data=None, spill_mount=True, spill_owner=None, env=None, image=None, out="build/smoke",
          variants_file="variants.yaml"):
    """Run rapids-smoke spill in the image with the hardened profile; fail on no spill, wrong result or OOM kill."""
    from rapidship.base import _host_arch
    from rapidship.errors import ConfigError
    from dataclasses import replace

    from rapidship.smoke import (built_image, host_memlock, memlock_for, pick_uid, plan_smoke, raise_on_failure,
                                 smoke as run_smoke, write_record)

    v = load_matrix(variants_file).get(variant)
    pairs = {}
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError("--env", f"{item!r} is not KEY=VALUE", "pass --env NAME=value")
        pairs[key] = value
    args = ("--data-bytes", data) if data else ()
    a = _arch(arch or _host_arch()).value
    plan = plan_smoke(v, a, mode, pick_uid(uid, v.uid), memory, shm_size, gpus,
                      Path(out).resolve() / "spill" if spill_mount else None,
                      int(spill_owner) if spill_owner not in (None, "") else None, pairs, args,
                      image=image or built_image(Path("build") / v.id, a))
    memlock, notes = memlock_for(mode, *host_memlock())
    plan = replace(plan, memlock=memlock, notes=notes)
    for note in notes:
        console.err.print(f"[yellow]note:[/] {note}")
    with console.err.status(f"smoke {plan.ref} ({mode}, uid {plan.uid}, --memory {memory})"):
        result = run_smoke(plan)
    record = write_record(result, Path(out))
    report = result.report or {}
    for stage in report.get("stages", []):
        tiers = ", ".join(f"{t['name']} {t['keys']} keys/{t['bytes'] / 2**20:.0f} MiB" for t in stage["tiers"])
        console.err.print(f"{stage['name']}: {stage['data_bytes'] / 2**20:.0f} MiB -> {tiers}; "
                          f"{stage['spill_files']} spill files, {stage['spill_file_bytes'] / 2**20:.0f} MiB; "
                          f"result {'ok' if stage['result_ok'] else ('WRONG' if not stage['error'] else 'none: ' + stage['error'][:60])}; "
                          f"{stage['seconds']}")
    console.err.print(f"{result.verdict} in {result.seconds}s (exit {result.exit_code}, OOMKilled {result.oom_killed}) "
                      f"-> {record}")
    raise_on_failure(result, record)
