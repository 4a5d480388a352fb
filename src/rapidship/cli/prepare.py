"""Tasks before a build: the matrix, rendering and linting, locks."""

from __future__ import annotations

from pathlib import Path

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import VARIANTS_HELP, pick
from rapidship.config.matrix import load_matrix
from rapidship.errors import ConfigError, GateFailure, exits_cleanly


@task(help={"json": "print the matrix as JSON on stdout", **VARIANTS_HELP})
@exits_cleanly
def matrix(c, json=False, variants_file="variants.yaml"):
    """Show the variants of the matrix (id, versions, GPU archs kept, OS, arches, flavour, tag)."""
    m = load_matrix(variants_file)
    if json:
        console.print_json({vid: v.model_dump(mode="json") | {"tag": v.tag()} for vid, v in m.variants.items()})
        return
    console.table("variants", ["id", "rapids", "cuda", "gpu_archs", "python", "os", "arches", "flavour", "image"],
                  [(v.id, v.rapids, v.cuda or "-", v.gpu_archs_label(), v.python,
                    f"{v.distro} {v.os_version} ({v.family})", ",".join(a.value for a in v.arches),
                    v.flavour.value, v.ref()) for v in m.variants.values()], stdout=True)


@task(iterable=["variant"], help={"variant": "variant id (repeatable)", "all": "every variant", **VARIANTS_HELP})
@exits_cleanly
def render(c, variant=None, all=False, variants_file="variants.yaml"):
    """Render build/<variant>/ (Dockerfile + context) from templates/ and locks/."""
    from rapidship.render.dockerfile import missing_locks, render as render_variant

    for v in pick(load_matrix(variants_file), variant, all):
        rec = render_variant(v)
        note = "" if not missing_locks(v) else "  [yellow](no lock yet: run invoke lock; conda envs need their channels, or a mirror of them: --conda-channel NAME=URL)[/]"
        console.err.print(f"rendered {rec.dockerfile}  lock {rec.lock_sha256[:12]}{note}")


@task(iterable=["variant"], help={"variant": "variant id (repeatable; default: every variant)", **VARIANTS_HELP})
@exits_cleanly
def lint(c, variant=None, variants_file="variants.yaml"):
    """Render, then run hadolint on every rendered Dockerfile (committed .hadolint.yaml)."""
    from rapidship.render.lint import lint as hadolint
    from rapidship.render.dockerfile import render as render_variant

    failed = []
    for v in pick(load_matrix(variants_file), variant, not variant):
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
            "wheels": "with --check: every locked pip package has a wheel for every arch the matrix builds the env "
                      "for (asks the index: PyPI, or --index-url)",
            "index-url": "the pip index (mirror) --wheels and the wheel sizes (locks/<env>/wheel-sizes.json) ask "
                         "(default PyPI; credentials never printed)",
            "conda-channel": "conda channel mirror, NAME=URL or a URL ending in the channel name (repeatable; "
                             "default $RAPIDSHIP_CONDA_CHANNELS, else conda.anaconda.org); credentials never reach the lock",
            **VARIANTS_HELP})
@exits_cleanly
def lock(c, env=None, check=False, conda_channel=None, variants_file="variants.yaml", wheels=False, index_url=None):
    """Solve env specs into committed, hashed lockfiles under locks/ (pip: uv; conda: py-rattler per platform)."""
    from rapidship.lock.conda import check_conda_locks, lock_conda
    from rapidship.lock.pip import ENVS, LOCKS, TOOLS, check_lock, load_env_spec, lock_pip, pip_lock_path

    names = env or ([TOOLS.name] + sorted(p.stem for p in ENVS.glob("*.yaml")))
    specs = sorted((load_env_spec(n) for n in names), key=lambda s: s.flavour == "conda")  # pip first: no channel needed
    if wheels and not check:
        raise ConfigError("--wheels", "is a check of the committed locks", "add --check")
    matrix = load_matrix(variants_file) if wheels or any(s.flavour == "conda" for s in specs) else None
    for spec in specs:
        if spec.flavour == "pip" and check:
            check_lock(spec)
            check_pip_pins(spec, pip_lock_path(spec), load_matrix(variants_file))
            arches = sorted({a.value for v in (matrix.variants.values() if wheels else ()) if v.env == spec.name
                             for a in v.arches})
            if arches:
                from rapidship.lock.pip import check_wheels

                with console.status(f"{spec.name}: a wheel for every locked package on {', '.join(arches)}"):
                    check_wheels(spec, arches, ["--index-url", index_url] if index_url else [])
            console.err.print(f"ok {spec.name}" + (f" (wheels for {', '.join(arches)})" if arches else ""))
        elif spec.flavour == "pip":
            console.err.print(f"locked {lock_pip(spec)}")
            if spec.name != TOOLS.name:  # the builder's tools are no image layers
                from rapidship.lock.sizes import write_sizes

                with console.status(f"{spec.name}: wheel sizes from the index"):
                    console.err.print(f"recorded {write_sizes(spec.name, pip_lock_path(spec), LOCKS, index_url)}")
        elif check:
            for path in check_conda_locks(spec, matrix):
                console.err.print(f"ok {spec.name} {path}")
        else:
            with console.status(f"solving {spec.name} with py-rattler"):
                paths = lock_conda(spec, matrix, conda_channel or None)
            for path in paths:
                console.err.print(f"locked {path}")


def check_pip_pins(spec, path, matrix) -> None:
    """A pip env has one lock for all its variants: it must honour every pin they make (variants.yaml pins:)."""
    from rapidship.lock.pip import unmet_pins

    for v in matrix.variants.values():
        if v.env != spec.name or not v.pins:
            continue
        for name, why in unmet_pins(path.read_text(), v.pins):
            raise ConfigError(v.pins_at[name], f"{v.id}'s pin is not honoured by {path}: {why}",
                              f"add the constraint to envs/{spec.name}.yaml and run `invoke lock --env {spec.name}`, "
                              "or fix the pin")


@task(name="lock-sizes", iterable=["env"],
      help={"env": "pip env spec name under envs/ (repeatable; default: every pip env)",
            "index-url": "the pip index (mirror) to ask (default PyPI; credentials never printed or written)"})
@exits_cleanly
def lock_sizes(c, env=None, index_url=None):
    """Record the wheel sizes of committed pip locks (locks/<env>/wheel-sizes.json): the layer plan reads them."""
    from rapidship.lock.pip import ENVS, LOCKS, check_lock, load_env_spec, pip_lock_path
    from rapidship.lock.sizes import write_sizes

    specs = [load_env_spec(n) for n in (env or sorted(p.stem for p in ENVS.glob("*.yaml")))]
    for spec in (s for s in specs if s.flavour == "pip"):
        check_lock(spec)
        with console.status(f"{spec.name}: wheel sizes from the index"):
            console.err.print(f"recorded {write_sizes(spec.name, pip_lock_path(spec), LOCKS, index_url)}")
