"""Variant -> rendered Dockerfile and build context under build/<variant>/.

Pure core: `render_dockerfile(variant, ctx)` (templates in, text out). Thin I/O: `render()` reads
the lock files, writes the context (Dockerfile, lock/, runtime/) and a render.json record.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple
from typing import Iterator

import jinja2

from rapidship.builder.install_lock import LockInstallError
from rapidship.errors import ConfigError
from rapidship.config.matrix import Flavour, Variant
from rapidship.lock.sizes import sizes_path
from rapidship.render.layer_plan import (CONDA_REST, REST, LayerPlan, conda_lock_parts, from_conda_locks, from_sizes,
                                         lock_parts, plan_layers)
from rapidship.records import Rendered, save
from rapidship.runtime.gpu_guard import PTH_LINE, PTH_NAME, SITECUSTOMIZE

TEMPLATES = Path("templates")
LOCKS = Path("locks")
BUILD = Path("build")
PACKAGE = Path(__file__).resolve().parents[1]
RUNTIME_SRC = PACKAGE / "runtime"
BUILDER_SRC = PACKAGE / "builder"  # programs that run inside the builder stage
PRUNER_SRC = BUILDER_SRC / "prune"
PRUNER_FILES = ("__init__.py", "__main__.py", "census.py", "core.py", "elf.py", "fatbin.py", "files.py", "inplace.py",
                "cuda_rule.py", "merge.py")  # stdlib only
# Builder-side programs (stdlib, plus py-rattler for the installer), copied into the context's builder/.
BUILDER_PROGRAMS = {Flavour.conda: ("install_lock.py", "pack_layer.py", "measure_trims.py", "trims.json"),
                    Flavour.pip: ("install_layer.py", "measure_trims.py", "target_layout.py", "trims.json")}
# In builder/ too, bind-mounted by the steps that run them: no layer holds them, and a change to one
# re-runs its own step only (never the env's install).
MOUNTED_PROGRAMS = ("hash_pycs.py", "dedupe.py", "layer_record.py")
LOCK_PARTS = "parts"  # lock/parts/<layer>/<the arch's lock name>, each layer stage's own lock
TRIMS = "trims.json"  # the flavour's trims as data (pip: VENV_TRIMS, conda: PACK_EXCLUDES), in the context's builder/
LAYER_PLAN = "layer-plan.json"  # the env's layer plan, in the context's builder/ (render/layer_plan.py)

PREFIX = "/opt/rapids"
CONTEXT_DIRS = ("lock", "builder", "runtime")  # remade by every render
# Longer than PREFIX so conda-pack can rewrite binary prefixes in place (padding with NULs).
BUILD_PREFIX = "/opt/rapidship-build/envs/placeholder-prefix-for-relocation"
SPILL_DIR = "/spill"


class Trim(NamedTuple):
    """A path pattern a runtime never needs, and why: the builder records both in trims.json."""

    pattern: str
    why: str
    folder: bool = False  # the pattern names a folder (find -path takes it whole; conda-pack needs `/*`)


_BUILD_ONLY = "read only when building against the library, never by a running env"
# Paths a runtime never needs. conda-pack --exclude patterns are fnmatch on the path relative to the
# prefix (`*` crosses `/`). *.pyc stay: the env is read-only to a random uid and runs with
# PYTHONDONTWRITEBYTECODE, so without them every worker recompiles every module it imports
# (docs/sizes.md has the measured cost of both choices).
_CONDA_LAYOUT_EXCLUDES = tuple(Trim(p, why) for p, why in (
    ("include/*", "C and C++ headers: " + _BUILD_ONLY),
    ("pkgs/*", "the package cache conda installed from"), ("conda-meta/*.json.bak", "backup copies of the conda package records"),
    ("share/doc/*", "documentation"), ("share/man/*", "manual pages"), ("share/info/*", "info pages"),
    ("share/gtk-doc/*", "documentation"),
    ("lib/cmake/*", "CMake package files: " + _BUILD_ONLY), ("lib/pkgconfig/*", "pkg-config files: " + _BUILD_ONLY),
    ("share/pkgconfig/*", "pkg-config files: " + _BUILD_ONLY), ("CACHEDIR.TAG", "a cache marker"),
    ("__clobbers__/*", "copies of a path two packages of one layer both ship, which the installer set aside")))
# The same for a pip venv, as `find PREFIX -path PATTERN` (C++ headers and CMake files of the RAPIDS
# libraries; nvidia/*/include stays: NVRTC and numba-cuda compile against those at run time). The last
# four are optional giants no import, kernel or UDF of cupy, numba.cuda, cudf, dask_cudf, dask_cuda, cuml
# or ucxx loads or starts (traced on a GPU and in the image, docs/prune.md).
_UNLOADED = "traced on a GPU, no import, numba kernel or cuDF UDF loads or starts it (docs/prune.md)"
VENV_TRIMS = tuple(Trim(p, why, folder) for p, why, folder in (
    ("*/site-packages/*/tests", "test suites of the packages", True),
    ("*.a", "static libraries: " + _BUILD_ONLY, False),
    ("*/site-packages/lib*/include", "the RAPIDS C++ headers: " + _BUILD_ONLY, True),
    ("*/site-packages/pyarrow/include", "Arrow C++ headers: " + _BUILD_ONLY, True),
    ("*/site-packages/*/lib64/cmake", "CMake package files: " + _BUILD_ONLY, True),
    ("*/site-packages/*/lib/cmake", "CMake package files: " + _BUILD_ONLY, True),
    ("*/site-packages/*/lib/pkgconfig", "pkg-config files: " + _BUILD_ONLY, True),
    ("*/site-packages/nvidia/cuda_nvrtc/lib/*.alt.so*",
     "the alternate build of NVRTC and its builtins (only libnvrtc.alt names them); libnvrtc.so stays: " + _UNLOADED,
     False),
    ("*/site-packages/nvidia/cuda_nvcc/bin/ptxas",
     "the PTX assembler program; numba-cuda compiles through libnvvm and links through nvJitLink: " + _UNLOADED,
     False),
    ("*/site-packages/nvidia/libnvcomp/bin/nvlzcat",
     "the nvCOMP command-line decompressor; cuDF uses libnvcomp.so: " + _UNLOADED, False),
    ("*/site-packages/nvidia/nccl/lib/libnccl_device.*",
     "the bitcode and LTO-IR of the NCCL device API, for programs that compile their own kernels against "
     "nccl_device.h; libnccl.so and the RAPIDS comms never read them (docs/prune.md)", False)))


def as_pack_exclude(trim: Trim) -> Trim:
    """A `find -path` trim as a conda-pack exclude: files only, and `*` crosses `/` in both, so a
    pattern of site-packages reaches the same files of a conda env's site-packages."""
    return trim._replace(pattern=trim.pattern + "/*", folder=False) if trim.folder else trim


# A conda env's excludes: its own layout's, then the venv's, stated once in VENV_TRIMS (a package that
# a conda channel builds from a wheel lays out its site-packages as the wheel does).
PACK_EXCLUDES = _CONDA_LAYOUT_EXCLUDES + tuple(as_pack_exclude(t) for t in VENV_TRIMS)

# glibc of each pip-flavour OS release: the highest manylinux_2_N tag its builder may install.
GLIBC_MINOR = {("debian", "12"): 36, ("debian", "13"): 41, ("ubuntu", "22.04"): 35, ("ubuntu", "24.04"): 39}

RUNTIME_PACKAGES = {
    ("deb", Flavour.pip): ("ca-certificates", "python{python}"),
    ("deb", Flavour.conda): ("ca-certificates",),
    ("rpm", Flavour.conda): ("ca-certificates", "shadow-utils"),
}


@dataclass(frozen=True)
class RenderContext:
    """Everything a template needs beyond the Variant."""

    lock_sha256: str
    lock_files: tuple[str, ...]
    runtime_packages: tuple[str, ...]
    description: str
    prefix: str = PREFIX
    build_prefix: str = BUILD_PREFIX
    spill_dir: str = SPILL_DIR
    gpu_archs: str = ""  # "80,90": the builder prunes device code to these (empty: keeps it all)
    pack_excludes: tuple[Trim, ...] = PACK_EXCLUDES
    venv_trims: tuple[Trim, ...] = VENV_TRIMS
    glibc_minor: int = 0  # pip flavour: wheels up to manylinux_2_<this> install
    builder_programs: tuple[str, ...] = ()  # builder/ files the install step copies
    gpu_archs_by_arch: dict[str, str] = field(default_factory=dict)  # a fleet per arch: {"arm64": "90,121"}
    layer_parts: tuple[str, ...] = ()  # the env's layers in order (render/layer_plan.py)
    rest_layer: str = REST  # the last of them: the venv itself (pip), the env's history (conda)
    builder_python: str = "python3"  # runs the builder's stdlib programs (dedupe, layer_record, measure_trims)

    @property
    def prune(self) -> bool:
        return bool(self.gpu_archs or self.gpu_archs_by_arch)

    @property
    def keep(self) -> str:
        """The pruner's --keep: the list, or a shell case on TARGETARCH for a fleet per arch."""
        if not self.gpu_archs_by_arch:
            return self.gpu_archs
        cases = " ".join(f"{arch}) echo {archs} ;;" for arch, archs in self.gpu_archs_by_arch.items())
        return f'"$(case "${{TARGETARCH}}" in {cases} esac)"'

    def trims(self, variant: Variant) -> tuple[Trim, ...]:
        """What the builder trims: conda-pack's excludes, or the venv's find patterns."""
        return self.pack_excludes if variant.flavour is Flavour.conda else self.venv_trims

    @property
    def runtime_stage(self) -> str:
        """A fleet per arch labels each arch's image in its own last stage (runtime-<arch>), picked by
        FROM runtime-${TARGETARCH}; the shared stage before them is runtime-common."""
        return "runtime-common" if self.gpu_archs_by_arch else "runtime"

    def site_packages(self, variant: Variant) -> str:
        return f"{self.prefix}/lib/python{variant.python}/site-packages"



def lock_sources(variant: Variant, locks: Path = LOCKS) -> dict[str, Path]:
    """Lock files a variant's build context needs, by their name inside the context's lock/."""
    from rapidship.lock.conda import lock_path, variant_target

    if variant.flavour is Flavour.pip:
        files = {"requirements.txt": locks / variant.env / "requirements.txt"}
        if prunes(variant):  # the prune stage's cuobjdump comes from the builder tools lock
            files["tools.txt"] = locks / "tools.txt"
        return files
    files = {f"conda-{arch.value}.lock": lock_path(variant_target(variant, arch), locks) for arch in variant.arches}
    files["tools.txt"] = locks / "tools.txt"
    return files


def prunes(variant: Variant) -> bool:
    """Whether the builder prunes this variant's device code (a CUDA variant with gpu_archs)."""
    return bool(variant.cuda and (variant.gpu_archs or variant.gpu_archs_by_arch))


def lock_digest(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name] + b"\0")
    return digest.hexdigest()


def arch_locks(variant: Variant, lock_bytes: dict[str, bytes], source: str) -> dict[str, bytes]:
    """Pip flavour: the lock once per arch, its platform markers settled for that arch (the builder
    runs on the build machine, whose pip would judge them for itself). Conda locks are per arch already."""
    from rapidship.lock.pip import for_arch

    text = lock_bytes.get("requirements.txt")
    if variant.flavour is not Flavour.pip or text is None:
        return {}
    return {f"requirements-{arch.value}.txt": for_arch(text.decode(), arch.value, variant.python, source).encode()
            for arch in variant.arches}


def arch_lock_name(variant: Variant, arch: str) -> str:
    """The name, inside the context's lock/, of the lock one arch installs."""
    return f"requirements-{arch}.txt" if variant.flavour is Flavour.pip else f"conda-{arch}.lock"


def glibc_minor(variant: Variant) -> int:
    if variant.flavour is not Flavour.pip:
        return 0
    found = GLIBC_MINOR.get((variant.distro, variant.os_version))
    if found is None:
        known = ", ".join(f"{d} {v}" for d, v in GLIBC_MINOR)
        raise ConfigError(f"variants.yaml: oses.{variant.os}", f"no glibc version known for {variant.distro} "
                          f"{variant.os_version}, so the pip builder cannot tell which manylinux wheels fit",
                          f"use a pip-flavour OS rapidship knows ({known}) or the conda flavour")
    return found


def plan_env_layers(variant: Variant, lock_bytes: dict[str, bytes], locks: Path = LOCKS) -> LayerPlan | None:
    """The env's layers, planned per package (render/layer_plan.py): a pip lock's distributions by
    their committed wheel sizes (None before the lock exists), a conda env's packages by the sizes
    its locks record (before they exist: the rest layer alone, so the Dockerfile still shows the
    stages a lock fills)."""
    from rapidship.lock.sizes import read_sizes

    if variant.flavour is Flavour.conda:
        texts = [lock_bytes[n].decode() for n in sorted(lock_bytes) if n.startswith("conda-") and n.endswith(".lock")]
        try:
            packages = from_conda_locks(texts)
        except LockInstallError as err:
            raise ConfigError(f"conda lock of {variant.id}", str(err), f"run invoke lock --env {variant.env} again") from None
        return plan_layers(packages, variant.layer_budget, rest=CONDA_REST)
    lock = lock_bytes.get("requirements.txt")
    if lock is None:
        return None
    return plan_layers(from_sizes(read_sizes(locks, variant.env, lock)), variant.layer_budget)


def make_context(variant: Variant, lock_bytes: dict[str, bytes], plan: LayerPlan | None = None) -> RenderContext:
    packages = RUNTIME_PACKAGES[(variant.family, variant.flavour)]
    what = f"RAPIDS {variant.rapids} on CUDA {variant.cuda}" if variant.cuda else "Dask spill runtime (no CUDA)"
    return RenderContext(
        lock_sha256=lock_digest(lock_bytes) if lock_bytes else "unlocked",
        lock_files=tuple(sorted(lock_bytes)),
        runtime_packages=tuple(p.format(python=variant.python) for p in packages),
        description=f"{what}, {variant.distro} {variant.os_version}, Python {variant.python}",
        gpu_archs=",".join(map(str, variant.gpu_archs)) if prunes(variant) and variant.gpu_archs else "",
        gpu_archs_by_arch={a: variant.gpu_archs_label(a) for a in variant.gpu_archs_by_arch},
        glibc_minor=glibc_minor(variant),
        builder_programs=BUILDER_PROGRAMS[variant.flavour],
        layer_parts=plan.names if plan else (),
        rest_layer=plan.rest if plan else REST,
        # the conda builder's base python made the installer venv; the pip builder installs the variant's
        builder_python="/opt/installer/bin/python" if variant.flavour is Flavour.conda else f"python{variant.python}",
    )


def _environment(templates: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - Dockerfiles, not HTML
    )


def render_dockerfile(variant: Variant, ctx: RenderContext, templates: Path = TEMPLATES) -> str:
    """Pure: variant + context -> Dockerfile text."""
    name = f"{variant.family}/Dockerfile.j2"
    try:
        template = _environment(templates).get_template(name)
        text = template.render(v=variant, ctx=ctx)
    except jinja2.TemplateNotFound:
        raise ConfigError(str(templates / name), "template not found",
                          f"add a template for OS family {variant.family!r}") from None
    except jinja2.UndefinedError as err:
        raise ConfigError(str(templates / name), f"template uses an undefined value ({err.message})",
                          "fix the template or add the value to the render context") from None
    except jinja2.TemplateSyntaxError as err:
        raise ConfigError(f"{err.filename or templates / name} line {err.lineno}", f"template syntax: {err.message}",
                          "fix the template") from None
    lines = [line.rstrip() for line in text.splitlines()]
    return "\n".join(lines).strip("\n") + "\n"


def render(variant: Variant, out_root: Path = BUILD, templates: Path = TEMPLATES, locks: Path = LOCKS) -> Rendered:
    """Write build/<variant>/ : Dockerfile, lock/, runtime/, render.json."""
    spec = locks.parent / "envs" / f"{variant.env}.yaml"  # envs/ and locks/ sit side by side
    if not spec.is_file():
        raise ConfigError(f"variants.yaml: env of {variant.id}", f"{variant.env!r} has no env spec ({spec})",
                          "correct the env name, or add the spec and run invoke lock --env NAME")
    sources = lock_sources(variant, locks)
    lock_bytes = {name: path.read_bytes() for name, path in sources.items() if path.is_file()}
    lock_bytes |= arch_locks(variant, lock_bytes, str(sources.get("requirements.txt", "")))
    if prunes(variant):  # a listed GPU the locked wheels carry no code for: refused before any build
        from rapidship.render import coverage

        for arch in variant.arches:
            coverage.check(variant, arch.value, lock_bytes.get(arch_lock_name(variant, arch.value)), locks)
    plan = plan_env_layers(variant, lock_bytes, locks)
    ctx = make_context(variant, lock_bytes, plan)
    dockerfile = render_dockerfile(variant, ctx, templates)

    out = out_root / variant.id
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(str(out), "is a file, where the build context directory goes",
                          f"move it away (build records live in {out_root}/<variant>/)") from None
    # One render of a variant at a time (a lock file), each written into a fresh folder first and
    # swapped in: a concurrent render waits, an interrupted one leaves the old context or none, and
    # render.json is written last, so it never lists files that are not there.
    with _exclusive(out / ".render.lock"):
        staging = Path(tempfile.mkdtemp(prefix=".render-", dir=out))
        try:
            files = _write_context(staging, variant, ctx, dockerfile, lock_bytes,
                                   plan.to_json(str(sizes_path(locks, variant.env))) if plan else None,
                                   _parts(variant, lock_bytes, plan) if plan else {})
            (out / "render.json").unlink(missing_ok=True)
            for name in (*CONTEXT_DIRS, "Dockerfile"):
                old = out / name
                if old.is_dir():
                    old.rename(staging / f"old-{name}")
                os.replace(staging / name, old)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        record = Rendered(variant=variant.id, out_dir=str(out), dockerfile=str(out / "Dockerfile"),
                          dockerfile_sha256=hashlib.sha256(dockerfile.encode()).hexdigest(),
                          lock_sha256=ctx.lock_sha256, files=files)
        save(out / "render.json", record)
    return record


def _parts(variant: Variant, lock_bytes: dict[str, bytes], plan: LayerPlan) -> dict[str, str]:
    """lock/parts/<layer>/requirements-<arch>.txt -> text: each arch's lock split by the plan's layers
    (a layer an arch installs nothing into gets no file: its stage makes an empty layer)."""
    out = {}
    for arch in variant.arches:
        name = arch_lock_name(variant, arch.value)
        if name not in lock_bytes:  # a conda arch not locked yet: build refuses it before any step
            continue
        split = conda_lock_parts if variant.flavour is Flavour.conda else lock_parts
        try:
            parts = split(lock_bytes[name].decode(), plan)
        except ValueError as err:
            raise ConfigError(f"lock/{name} of {variant.id}", f"{err}: the wheel sizes the plan is made from are "
                              "older than the lock", f"run invoke lock --env {variant.env} again") from None
        out |= {f"{LOCK_PARTS}/{layer}/{name}": text for layer, text in parts.items() if text}
    return out


def _write_context(dest: Path, variant: Variant, ctx: RenderContext, dockerfile: str,
                   lock_bytes: dict[str, bytes], plan: dict | None, parts: dict[str, str]) -> list[str]:
    """The build context (Dockerfile, lock/ with each layer's part of it, builder/ with the layer plan,
    runtime/) in `dest`; its file list."""
    (dest / "lock").mkdir()
    (dest / "Dockerfile").write_text(dockerfile)
    for name, data in lock_bytes.items():
        (dest / "lock" / name).write_bytes(data)
    for layer in (n for n in ctx.layer_parts if n != ctx.rest_layer):  # every folder, so each COPY has a source
        (dest / "lock" / LOCK_PARTS / layer).mkdir(parents=True, exist_ok=True)
    for name, text in parts.items():
        (dest / "lock" / name).write_text(text)
    (dest / "builder").mkdir()
    for name in BUILDER_PROGRAMS[variant.flavour] + MOUNTED_PROGRAMS:
        if name == TRIMS:  # the trims as data for the layer programs (what each removes, and why)
            (dest / "builder" / name).write_text(json.dumps([{"pattern": t.pattern, "why": t.why}
                                                             for t in ctx.trims(variant)], indent=1) + "\n")
        else:
            shutil.copy2(BUILDER_SRC / name, dest / "builder" / name)
    if plan is not None:  # bind-mounted by the records stage: a new plan re-runs that stage only
        (dest / "builder" / LAYER_PLAN).write_text(json.dumps(plan, indent=1) + "\n")
    if ctx.prune:  # the pruner runs in the builder as `python -m prune` (stdlib only)
        (dest / "builder" / "prune").mkdir()
        for name in PRUNER_FILES:
            shutil.copy2(PRUNER_SRC / name, dest / "builder" / "prune" / name)
    _copy_runtime(dest / "runtime")
    return ["Dockerfile"] + sorted(str(p.relative_to(dest)) for d in CONTEXT_DIRS for p in (dest / d).rglob("*")
                                   if p.is_file())


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def missing_locks(variant: Variant, locks: Path = LOCKS) -> list[str]:
    return [str(p) for p in lock_sources(variant, locks).values() if not p.is_file()]


def check_locks(variant: Variant, matrix) -> None:
    """Before a build: the variant's locks exist and match their env spec (pip: one lock; conda:
    one per platform plus the builder tools lock). ConfigError naming the lock otherwise."""
    from rapidship.lock.pip import check_lock, load_env_spec

    if variant.flavour is Flavour.pip:
        check_lock(load_env_spec(variant.env))
    else:
        from rapidship.config.needs import needs_sentence
        from rapidship.lock.conda import check_conda_locks

        try:
            check_conda_locks(load_env_spec(variant.env), matrix)
        except ConfigError as err:   # the lock is the last of what such a variant lacks: say the rest first
            raise ConfigError(f"--variant {variant.id}", f"{needs_sentence(variant)}; until then {err.where}: "
                              f"{err.problem}", f"with the mirror, {err.fix} (docs/conda.md, docs/bases.md)") from None
    if missing := missing_locks(variant):
        raise ConfigError(missing[0], "lock file missing", f"run invoke lock --env {variant.env} (and --env tools)")


def _copy_runtime(dest: Path) -> None:
    """The in-image programs: the rapids_runtime package and its small sh launchers."""
    pkg = dest / "rapids_runtime"
    pkg.mkdir(parents=True)
    for src in sorted(RUNTIME_SRC.glob("*.py")):
        shutil.copy2(src, pkg / src.name)
    bin_dir = dest / "bin"
    bin_dir.mkdir()
    for src in sorted((RUNTIME_SRC / "bin").iterdir()):
        target = bin_dir / src.name
        shutil.copy2(src, target)
        target.chmod(0o755)  # COPY keeps the mode; no --chmod needed (older BuildKit frontends lack it)
    # the env's site-packages gets this one line: the GPU guard at every interpreter start; and a
    # sitecustomize for interpreters that reach the env through PYTHONPATH (no .pth is read there)
    (dest / PTH_NAME).write_text(PTH_LINE)
    (dest / "sitecustomize.py").write_text(SITECUSTOMIZE)
