"""variants.yaml -> Matrix of Variant records.

The file has five parts: `defaults`, `oses` (a catalogue of OS bases), `axes` (cuda x os), an
`exclude` list of partial dicts (rapidsai/docker style) and `overrides` keyed by variant id.
Every (cuda, os) pair of the axes that no exclude entry matches is a variant. Everything that can
be wrong is reported as ONE ConfigError naming the file and the yaml path.
"""

from __future__ import annotations

import math
import os
import re
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rapidship.errors import ConfigError
from rapidship.builder.prune.fatbin import KNOWN_ARCHS
from rapidship.config.yamlconf import StrictConfig, parse_model, read_config

DEFAULT_FILE = Path("variants.yaml")
CPU = "cpu"

_RAPIDS_RE = re.compile(r"^\d{2}\.\d{2}$")
_CUDA_RE = re.compile(r"^\d{2}\.\d$")
_PYTHON_RE = re.compile(r"^3\.\d{1,2}$")
_IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/-]*(:[\w][\w.-]{0,127})?(@sha256:[0-9a-f]{64})?$")
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")

# CUDA compute capabilities, written major*10+minor (80 = sm_80 A100, 90 = sm_90 H100/H200).
KNOWN_GPU_ARCHS = KNOWN_ARCHS
ALL_GPU_ARCHS = "all"  # gpu_archs: all = keep every architecture's device code


class Arch(str, Enum):
    amd64 = "amd64"
    arm64 = "arm64"


class Flavour(str, Enum):
    conda = "conda"
    pip = "pip"



def _pattern(value: str, regex: re.Pattern, example: str) -> str:
    if not regex.match(value):
        raise ValueError(f"{value!r} is not a version like {example}")
    return value


DEFAULT_LAYER_BUDGET = 60


def _layer_budget(value: Any) -> Any:
    from rapidship.render.layer_plan import LEAST_BUDGET, MOST_BUDGET

    if value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not LEAST_BUDGET <= value <= MOST_BUDGET:
        raise ValueError(f"{value!r} is not a whole number of layers from {LEAST_BUDGET} to {MOST_BUDGET} (the env's "
                         f"layers: one group per kind and the venv at least; an image keeps within 100 layers, and "
                         f"the base and the runtime need their own)")
    return value


class Defaults(StrictConfig):
    registry_prefix: str = Field(min_length=1)
    budget_bytes: int = Field(gt=0)
    uid: int = Field(gt=0, lt=2**31)
    user: str = Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    rapids: str
    python: str
    flavour: Flavour
    image: str
    env: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    conda_builder: str  # any glibc image with python >= 3.9: conda envs do not depend on the build OS
    # The fleet's GPUs: list of compute capabilities, or "all"; checked (with its yaml path) by
    # gpu_archs_from, and replaced by the resolved tuple or None in parse_matrix.
    gpu_archs: Any = None
    # Pip envs: at most this many image layers for the env (render/layer_plan.py)
    layer_budget: int = DEFAULT_LAYER_BUDGET

    _rapids = field_validator("rapids")(lambda v: _pattern(v, _RAPIDS_RE, '"26.10"'))
    _layer_budget = field_validator("layer_budget", mode="before")(lambda v: _layer_budget(v))
    _python = field_validator("python")(lambda v: _pattern(v, _PYTHON_RE, '"3.11"'))

    @field_validator("flavour", mode="before")
    @classmethod
    def _flavour(cls, value: Any) -> Any:
        return Flavour(value) if isinstance(value, str) and value in {f.value for f in Flavour} else value

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not _IMAGE_RE.match(value) or ":" in value:
            raise ValueError(f"{value!r} is not an image repository name like rapidship/rapids (no tag)")
        return value


class OsEntry(StrictConfig):
    family: Literal["deb", "rpm"]
    distro: str = Field(pattern=r"^[a-z]+$")
    version: str = Field(min_length=1)
    arches: tuple[Arch, ...] = Field(min_length=1)
    image: str
    registry_prefix: str | None = None  # e.g. the internal Kylin registry instead of the proxy cache
    python: str | None = None  # the OS's own python3: the pip flavour's venv runs on it
    # packages pinned for every variant on this OS (a vendor kernel's need): {name: version constraint}
    pins: Any = None

    _python = field_validator("python")(lambda v: v if v is None else _pattern(v, _PYTHON_RE, '"3.11"'))

    @field_validator("arches", mode="before")
    @classmethod
    def _arches(cls, value: Any) -> Any:
        if isinstance(value, list):
            return tuple(Arch(a) if isinstance(a, str) and a in {x.value for x in Arch} else a for a in value)
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not _IMAGE_RE.match(value):
            raise ValueError(f"{value!r} is not an image reference like library/ubuntu:22.04[@sha256:...]")
        return value


class Axes(StrictConfig):
    cuda: tuple[str, ...] = Field(min_length=1)
    os: tuple[str, ...] = Field(min_length=1)

    @field_validator("cuda", "os", mode="before")
    @classmethod
    def _as_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("cuda")
    @classmethod
    def _cuda(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            if value != CPU:
                _pattern(value, _CUDA_RE, '"12.9" (or "cpu")')
        return values


class StageBasesOverride(StrictConfig):
    builder: str | None = None
    runtime: str | None = None


class Override(StrictConfig):
    rapids: str | None = None
    python: str | None = None
    flavour: Flavour | None = None
    arches: tuple[Arch, ...] | None = None
    env: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    image: str | None = None
    budget_bytes: int | None = Field(default=None, gt=0)
    layer_budget: int | None = None
    base: StageBasesOverride | None = None
    gpu_archs: Any = None  # a list of compute capabilities, or "all"; checked by gpu_archs_from
    pins: Any = None       # {name: version constraint}, over the OS's; checked by pins_from

    _rapids = field_validator("rapids")(lambda v: v if v is None else _pattern(v, _RAPIDS_RE, '"26.10"'))
    _python = field_validator("python")(lambda v: v if v is None else _pattern(v, _PYTHON_RE, '"3.11"'))
    _layer_budget = field_validator("layer_budget", mode="before")(lambda v: _layer_budget(v))

    @field_validator("flavour", mode="before")
    @classmethod
    def _flavour(cls, value: Any) -> Any:
        return Flavour(value) if isinstance(value, str) and value in {f.value for f in Flavour} else value

    @field_validator("arches", mode="before")
    @classmethod
    def _arches(cls, value: Any) -> Any:
        return OsEntry._arches(value)


class VariantsFile(StrictConfig):
    defaults: Defaults
    oses: dict[str, OsEntry] = Field(min_length=1)
    axes: Axes
    exclude: tuple[dict[str, str], ...] = ()
    overrides: dict[str, Override] = {}

    @field_validator("exclude", mode="before")
    @classmethod
    def _exclude(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value


class StageBases(BaseModel):
    model_config = ConfigDict(frozen=True)
    builder: str
    runtime: str


class Variant(BaseModel):
    """One buildable image line: everything render/build/push need, already resolved."""

    model_config = ConfigDict(frozen=True)

    id: str
    rapids: str
    cuda: str | None  # None for CPU-only variants
    python: str
    os: str
    distro: str
    os_version: str
    family: Literal["deb", "rpm"]
    arches: tuple[Arch, ...]
    flavour: Flavour
    env: str
    image: str
    bases: StageBases
    budget_bytes: int
    uid: int
    user: str
    layer_budget: int = DEFAULT_LAYER_BUDGET
    # Compute capabilities (major*10+minor) whose device code the image keeps, sorted; None = all
    # of it (and always None for CPU variants).
    gpu_archs: tuple[int, ...] | None = None
    # A fleet per arch (`gpu_archs: {amd64: [80, 90], arm64: [90, 121]}`): each arch's list; empty
    # when one list serves every arch (then gpu_archs holds it).
    gpu_archs_by_arch: dict[str, tuple[int, ...]] = Field(default_factory=dict)
    # Packages pinned for this variant (its OS's pins, then its override's), sorted: (name, constraint).
    # The conda lock solves them in (a lock of its own); a pip env's one lock must satisfy them.
    pins: tuple[tuple[str, str], ...] = ()
    pins_at: dict[str, str] = Field(default_factory=dict)   # name -> the yaml path that pinned it

    def gpu_archs_for(self, arch: "Arch | str") -> tuple[int, ...] | None:
        """The compute capabilities whose device code `arch`'s image keeps (None: all of it)."""
        return self.gpu_archs_by_arch.get(Arch(arch).value, self.gpu_archs) if self.gpu_archs_by_arch else self.gpu_archs

    def gpu_archs_label(self, arch: "Arch | str | None" = None) -> str:
        """Label form: '80,90'; 'all' when nothing is pruned; 'none' for a CPU variant (no device code).
        A variant with a fleet per arch and no arch given: 'amd64 80,90; arm64 90,121' (tables only)."""
        if self.cuda is None:
            return "none"
        if self.gpu_archs_by_arch and arch is None:
            return "; ".join(f"{a} {','.join(map(str, archs))}" for a, archs in self.gpu_archs_by_arch.items())
        archs = self.gpu_archs_for(arch) if arch is not None else self.gpu_archs
        return ALL_GPU_ARCHS if archs is None else ",".join(map(str, archs))

    @property
    def cuda_major(self) -> str | None:
        return self.cuda.split(".")[0] if self.cuda else None

    def tag(self, arch: Arch | str | None = None) -> str:
        """RAPIDS-style tag: <rapids>-cuda<cuda>-<os><ver>-py<py>[-<arch>]."""
        accel = f"cuda{self.cuda}" if self.cuda else CPU
        osver = re.sub(r"[^a-z0-9.]", "", f"{self.distro}{self.os_version}".lower())
        tag = f"{self.rapids}-{accel}-{osver}-py{self.python}"
        return f"{tag}-{Arch(arch).value}" if arch else tag

    def ref(self, arch: Arch | str | None = None) -> str:
        """Local image reference (no registry): image:tag."""
        return f"{self.image}:{self.tag(arch)}"

    def local_ref(self, arch: Arch | str, run: str = "") -> str:
        """The name `invoke build` gives the image in the engine: the ref, and the run's identity
        when one is set (run_id), so that runs sharing one engine never name each other's images.
        Registries get the plain tags (push reads the build record's image id, not this name)."""
        return self.ref(arch) + (f"-{run}" if run else "")


RUN_ID_ENV = "RAPIDSHIP_RUN_ID"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


def run_id(env: dict[str, str] | None = None) -> str:
    """This run's identity from $RAPIDSHIP_RUN_ID (the CI pipeline's id, or the test suite's own),
    '' when unset: every image a run builds carries it in its engine name."""
    value = (os.environ if env is None else env).get(RUN_ID_ENV, "")
    if value and not _RUN_ID.match(value):
        raise ConfigError(RUN_ID_ENV, f"{value!r} cannot end an image tag",
                          "use up to 40 letters, digits, '.', '_' or '-', starting with a letter or digit "
                          "(the CI pipeline sets ci$CI_PIPELINE_ID)")
    return value


class Matrix(BaseModel):
    model_config = ConfigDict(frozen=True)

    source: str
    defaults: Defaults
    variants: dict[str, Variant]

    def get(self, variant_id: str, flag: str = "--variant") -> Variant:
        if variant_id not in self.variants:
            known = ", ".join(self.variants)
            raise ConfigError(flag, f"unknown variant {variant_id!r}", f"use one of: {known}")
        return self.variants[variant_id]

    def select(self, ids: list[str] | None) -> list[Variant]:
        return [self.get(i) for i in ids] if ids else list(self.variants.values())


def variant_id(cuda: str, os_key: str) -> str:
    return f"{CPU}-{os_key}" if cuda == CPU else f"cuda{cuda.split('.')[0]}-{os_key}"


def load_matrix(path: Path | str = DEFAULT_FILE) -> Matrix:
    path = Path(path)
    return parse_matrix(read_config(path, "run from the project root or pass --variants-file"), str(path))


def parse_matrix(text: str, source: str = str(DEFAULT_FILE)) -> Matrix:
    """Pure core: yaml text -> Matrix, or ConfigError naming source and yaml path."""
    spec = parse_model(VariantsFile, text, source, "docs/variants.md", enums=(Arch, Flavour))
    if "gpu_archs" in spec.defaults.model_fields_set:
        archs = fleet_from(spec.defaults.gpu_archs, f"{source}: defaults.gpu_archs")
        spec = spec.model_copy(update={"defaults": spec.defaults.model_copy(update={"gpu_archs": archs})})
    return Matrix(source=source, defaults=spec.defaults, variants=_expand(spec, source))


def fleet_from(value: Any, where: str) -> tuple[int, ...] | None | dict[str, tuple[int, ...]]:
    """Pure: a yaml `gpu_archs` value: one list (or `all`) for every arch, or a mapping of arch ->
    list for fleets that differ per arch (an amd64 fleet of A100 + H100, an arm64 one of GH200 + GB10)."""
    if not isinstance(value, dict):
        return gpu_archs_from(value, where)
    if not value:
        raise ConfigError(where, "the mapping is empty", "map each arch to its fleet, e.g. {amd64: [80, 90], arm64: [90]}")
    out = {}
    for key, archs in value.items():
        if key not in {a.value for a in Arch}:
            raise ConfigError(f"{where}.{key}", f"{key!r} is not an arch (amd64 or arm64)",
                              "map each arch the variant builds to its fleet's compute capabilities")
        resolved = gpu_archs_from(archs, f"{where}.{key}")
        if resolved is None:
            raise ConfigError(f"{where}.{key}", "`all` is for the whole variant, not one arch",
                              "write gpu_archs: all, or list this arch's fleet")
        out[key] = resolved
    return out


def gpu_archs_from(value: Any, where: str) -> tuple[int, ...] | None:
    """Pure: a yaml `gpu_archs` value -> sorted compute capabilities, None for `all`, or ConfigError."""
    known = ", ".join(map(str, sorted(KNOWN_GPU_ARCHS)))
    how = "write compute capabilities as ints major*10+minor, e.g. [80, 90] (A100, H100/H200), or `all`"
    if value == ALL_GPU_ARCHS:
        return None
    if value is None:
        raise ConfigError(where, "has no value (null)", how)
    if not isinstance(value, list):
        raise ConfigError(where, f"expected a list of compute capabilities or `all`, got {value!r}", how)
    if not value:
        raise ConfigError(where, "the list is empty: no GPU could run the image",
                          "list the fleet's compute capabilities, e.g. [80, 90], or write `all` to keep every one")
    seen: dict[int, int] = {}
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if isinstance(item, bool):
            raise ConfigError(at, f"{str(item).lower()} is a boolean, not a compute capability", how)
        if not isinstance(item, int):
            hint = ""
            digits = re.fullmatch(r"(?:sm_?)?(\d+)", item.strip()) if isinstance(item, str) else None
            if isinstance(item, float) and math.isfinite(item) and 0 < item < 100:
                hint = f" (write {round(item * 10)} for {item})"
            elif digits:
                hint = f" (a string: write the bare int {digits.group(1)})"
            elif isinstance(item, str):
                hint = " (a string)"
            raise ConfigError(at, f"{item!r} is not an int compute capability{hint}", how)
        if item not in KNOWN_GPU_ARCHS:
            raise ConfigError(at, f"{item} is not a known compute capability (known: {known})",
                              "use major*10+minor of a real GPU, e.g. 86 for 8.6 or 120 for 12.0")
        if item in seen:
            raise ConfigError(at, f"{item} is listed twice (also at [{seen[item]}])", "list each capability once")
        seen[item] = i
    return tuple(sorted(value))


def _matches(entry: dict[str, str], cuda: str, os_key: str) -> bool:
    combo = {"cuda": cuda, "os": os_key}
    return all(combo[k] == v for k, v in entry.items())


def _resolve_image(prefix: str, image: str) -> str:
    return f"{prefix.rstrip('/')}/{image}"


_KEY_RE = re.compile(r"^[a-z][a-z0-9]{0,31}$")  # OS keys become parts of variant ids, paths, image tags, job names


def _expand(spec: VariantsFile, source: str) -> dict[str, Variant]:
    for os_key in spec.oses:
        if not _KEY_RE.match(os_key):
            raise ConfigError(f"{source}: oses.{os_key!r}", "an OS key must be lowercase ASCII letters and digits, "
                              "starting with a letter (it becomes part of variant ids, paths and image tags)",
                              "rename it, e.g. ubuntu22 or kylin10")
    for i, os_key in enumerate(spec.axes.os):
        if os_key not in spec.oses:
            raise ConfigError(f"{source}: axes.os[{i}]", f"unknown os {os_key!r}",
                              f"add it under oses: or use one of {', '.join(spec.oses)}")
    for i, entry in enumerate(spec.exclude):
        for key, value in entry.items():
            axis = getattr(spec.axes, key, None) if key in ("cuda", "os") else None
            if axis is None:
                raise ConfigError(f"{source}: exclude[{i}].{key}", f"{key!r} is not an axis",
                                  "exclude entries use the axis names cuda and os")
            if value not in axis:
                raise ConfigError(f"{source}: exclude[{i}].{key}", f"{value!r} is not on axis {key} ({', '.join(axis)})",
                                  "correct the value or remove the entry")

    variants: dict[str, Variant] = {}
    excluded: dict[str, int] = {}
    origin: dict[str, str] = {}
    for cuda in spec.axes.cuda:
        for os_key in spec.axes.os:
            vid = variant_id(cuda, os_key)
            hit = next((i for i, e in enumerate(spec.exclude) if _matches(e, cuda, os_key)), None)
            if vid in origin:
                raise ConfigError(f"{source}: axes.cuda", f"{origin[vid]!r} and {cuda!r} both make variant id {vid!r}",
                                  "keep one CUDA version per major on the cuda axis")
            origin[vid] = cuda
            if hit is not None:
                excluded[vid] = hit
                continue
            variants[vid] = _variant(spec, cuda, os_key, source)

    for vid in spec.overrides:
        if vid in excluded:
            raise ConfigError(f"{source}: overrides.{vid}", f"this variant is removed by exclude[{excluded[vid]}]",
                              "drop the override, or drop the exclude entry to build the variant")
        if vid not in variants:
            raise ConfigError(f"{source}: overrides.{vid}", "no such variant in the matrix",
                              f"variants are: {', '.join(variants)}")
    if not variants:
        raise ConfigError(f"{source}: exclude", "every combination of the axes is excluded", "leave at least one")
    return variants


def _variant(spec: VariantsFile, cuda: str, os_key: str, source: str) -> Variant:
    vid = variant_id(cuda, os_key)
    d, os_entry = spec.defaults, spec.oses[os_key]
    o = spec.overrides.get(vid, Override())
    where = f"{source}: overrides.{vid}"
    arches = o.arches if o.arches is not None else os_entry.arches
    for i, arch in enumerate(arches):
        if arch not in os_entry.arches:
            offered = ", ".join(a.value for a in os_entry.arches)
            raise ConfigError(f"{where}.arches[{i}]", f"os {os_key!r} offers no base for {arch.value} (oses.{os_key}.arches: {offered})",
                              f"drop {arch.value} or add it to oses.{os_key}.arches once the base exists")
    flavour = o.flavour or d.flavour
    python = o.python or d.python
    if flavour is Flavour.pip and (os_entry.family != "deb" or tuple(map(int, python.split("."))) < (3, 11)):
        raise ConfigError(f"{where}.flavour", "the pip flavour needs a Debian-family OS and Python >= 3.11",
                          "use flavour: conda for this variant")
    if flavour is Flavour.pip and os_entry.python != python:
        raise ConfigError(f"{where}.python", f"the pip flavour runs on the OS python ({os_entry.python or 'unset'} in "
                          f"oses.{os_key}.python), not {python}", "match the versions or use flavour: conda")
    base_image = _resolve_image(os_entry.registry_prefix or d.registry_prefix, os_entry.image)
    builder_image = base_image if flavour is Flavour.pip else _resolve_image(d.registry_prefix, d.conda_builder)
    bases = StageBases(builder=(o.base.builder if o.base and o.base.builder else builder_image),
                       runtime=(o.base.runtime if o.base and o.base.runtime else base_image))
    for stage in ("builder", "runtime"):
        ref = getattr(bases, stage)
        if not _IMAGE_RE.match(ref.split("/", 1)[-1]) and not _IMAGE_RE.match(ref):
            raise ConfigError(f"{where}.base.{stage}", f"{ref!r} is not an image reference", "write registry/repo:tag")
    image = o.image or d.image
    if not _IMAGE_RE.match(image) or ":" in image:
        raise ConfigError(f"{where}.image", f"{image!r} is not an image repository name", "write e.g. rapidship/rapids")
    gpu_archs = d.gpu_archs
    if "gpu_archs" in o.model_fields_set:
        if cuda == CPU:
            raise ConfigError(f"{where}.gpu_archs", "cpu variants have no device code",
                              "remove gpu_archs from this override")
        gpu_archs = fleet_from(o.gpu_archs, f"{where}.gpu_archs")
    by_arch: dict[str, tuple[int, ...]] = {}
    if isinstance(gpu_archs, dict) and cuda != CPU:
        at = f"{where}.gpu_archs" if "gpu_archs" in o.model_fields_set else f"{source}: defaults.gpu_archs"
        for arch in arches:
            if arch.value not in gpu_archs:
                raise ConfigError(at, f"names no fleet for {arch.value}, which {vid} is built for",
                                  f"add {arch.value}: [...] to the mapping")
        by_arch = {a.value: gpu_archs[a.value] for a in arches}
        gpu_archs = None
    os_pins, own_pins = pins_from(os_entry.pins, f"{source}: oses.{os_key}.pins"), pins_from(o.pins, f"{where}.pins")
    pins = {**os_pins, **own_pins}
    pins_at = {n: f"{where}.pins.{n}" if n in own_pins else f"{source}: oses.{os_key}.pins.{n}" for n in pins}
    return Variant(
        id=vid, rapids=o.rapids or d.rapids, cuda=None if cuda == CPU else cuda, python=python,
        os=os_key, distro=os_entry.distro, os_version=os_entry.version, family=os_entry.family, arches=arches,
        flavour=flavour, env=o.env or d.env, image=image, bases=bases,
        budget_bytes=o.budget_bytes or d.budget_bytes, uid=d.uid, user=d.user,
        layer_budget=o.layer_budget or d.layer_budget,
        gpu_archs=None if cuda == CPU else gpu_archs, gpu_archs_by_arch=by_arch, pins=tuple(sorted(pins.items())),
        pins_at=pins_at,
    )


_PIN_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_PIN_ONE = r"(?:==|!=|<=|>=|<|>|~=|=)?[0-9][0-9a-z.*+!_-]*"
_PIN_SPEC = re.compile(rf"^{_PIN_ONE}(?:,{_PIN_ONE})*$")


def pins_from(value: Any, where: str) -> dict[str, str]:
    """Pure: a `pins:` mapping {package: version constraint} checked, each refusal naming its yaml path."""
    if value is None:
        return {}
    example = 'pins: {nvidia-ml-py: "<12.560"}'
    if not isinstance(value, dict) or not value:
        raise ConfigError(where, f"{value!r} is not a mapping of package names to version constraints", f"write {example}")
    out = {}
    for name, spec in value.items():
        if not isinstance(name, str) or not _PIN_NAME.match(name):
            raise ConfigError(f"{where}.{name}", f"{name!r} is not a package name (lower-case letters, digits, . _ -)",
                              f"write {example}")
        text = str(spec).replace(" ", "") if isinstance(spec, (str, int, float)) and not isinstance(spec, bool) else ""
        if not _PIN_SPEC.match(text):
            raise ConfigError(f"{where}.{name}", f"{spec!r} is not a version constraint (==1.2, <12.560, >=11,<12)",
                              f"quote it: {example}")
        out[name] = text
    return out
