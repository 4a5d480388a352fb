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
