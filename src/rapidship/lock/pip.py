"""Env spec (envs/<name>.yaml) -> committed lockfile under locks/<name>/.

Pip flavour: a universal, hashed requirements file (uv pip compile), installed in the builder with
`pip --require-hashes --no-deps`. Each lock starts with the sha256 of the spec it came from, so a
lock that no longer matches its spec is reported instead of silently rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from rapidship.errors import ConfigError

ENVS = Path("envs")
LOCKS = Path("locks")
DEFAULT_PINS = ("python", "cuda-version")
_SPEC_LINE = re.compile(r"^# spec-sha256: ([0-9a-f]{64})$", re.M)


@dataclass(frozen=True)
class EnvSpec:
    name: str
    flavour: str
    requirements: tuple[str, ...]
    python: str | None = None
    channels: tuple[str, ...] = ()
    # Conda envs: which of the variant's values are pinned into the solve (python, cuda-version).
    pin: tuple[str, ...] = DEFAULT_PINS
    # Pip envs: packages the solve pulls in but the lock leaves out (size trims, each with a why).
    omit: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        doc = asdict(self)
        # Fields left at their default stay out, so older locks keep the digest they were made with.
        if self.pin == DEFAULT_PINS:
            del doc["pin"]
        if not self.omit:
            del doc["omit"]
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def load_env_spec(name: str, envs: Path = ENVS) -> EnvSpec:
    if name == TOOLS.name:
        return TOOLS
    path = envs / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in envs.glob("*.yaml")))
        raise ConfigError(str(path), "env spec not found", f"create it, or use one of: {known}")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(str(path), f"not valid YAML: {getattr(err, 'problem', err)}", "fix the syntax") from None
    if not isinstance(doc, dict):
        raise ConfigError(str(path), "must be a mapping", "see envs/dask-cpu.yaml for the layout")
    allowed = {"flavour", "python", "requirements", "channels", "pin", "omit"}
    for key in doc:
        if key not in allowed:
            raise ConfigError(f"{path}: {key}", f"unknown key {key!r}", f"allowed keys: {', '.join(sorted(allowed))}")
    flavour = doc.get("flavour")
    if flavour not in ("pip", "conda"):
        raise ConfigError(f"{path}: flavour", f"{flavour!r} is not pip or conda", "set flavour: pip or flavour: conda")
    reqs = doc.get("requirements")
    if not isinstance(reqs, list) or not reqs or not all(isinstance(r, str) and r.strip() for r in reqs):
        raise ConfigError(f"{path}: requirements", "must be a non-empty list of strings", "list the packages")
    python = doc.get("python")
    if python is not None and not (isinstance(python, str) and re.match(r"^3\.\d{1,2}$", python)):
        raise ConfigError(f"{path}: python", f"{python!r} is not a quoted version like \"3.11\"", "quote it")
    channels = doc.get("channels") or []
    if not isinstance(channels, list) or not all(isinstance(c, str) and re.match(r"^[A-Za-z0-9][\w.-]*$", c) for c in channels):
        raise ConfigError(f"{path}: channels", "must be a list of channel names (mirrors are configuration)",
                          "e.g. channels: [rapidsai, conda-forge]; pass mirror URLs with --conda-channel")
    pin = doc.get("pin", list(DEFAULT_PINS))
    if not isinstance(pin, list) or not set(pin) <= set(DEFAULT_PINS):
        raise ConfigError(f"{path}: pin", f"{pin!r} is not a subset of {list(DEFAULT_PINS)}",
                          "list which variant values the conda solve pins")
    omit = doc.get("omit") or []
    if not isinstance(omit, list) or not all(isinstance(o, str) and re.match(r"^[A-Za-z0-9][\w.-]*$", o) for o in omit):
        raise ConfigError(f"{path}: omit", "must be a list of package names", "e.g. omit: [nvidia-cufft-cu12]")
    if omit and flavour != "pip":
        raise ConfigError(f"{path}: omit", "only pip envs can omit packages", "remove omit: from this conda env")
    return EnvSpec(name=name, flavour=flavour, requirements=tuple(reqs), python=python, channels=tuple(channels),
                   pin=tuple(pin), omit=tuple(omit))


# The conda builder's own tools, installed into /opt/installer from a hashed lock (locks/tools.txt).
TOOLS = EnvSpec(name="tools", flavour="pip", python="3.11",
                requirements=("py-rattler==0.28.0", "conda-pack==0.9.2",
                              "nvidia-cuda-cuobjdump==13.5.37"))  # proves pruned device code (prune stage)


def pip_lock_path(spec: EnvSpec, locks: Path = LOCKS) -> Path:
    if spec.name == TOOLS.name:
        return locks / "tools.txt"
    return locks / spec.name / "requirements.txt"


def lock_header(spec: EnvSpec) -> str:
    return (f"# rapidship pip lock for env {spec.name}: do not edit, run `invoke lock --env {spec.name}`.\n"
            f"# spec-sha256: {spec.digest}\n")


def stale_reason(spec: EnvSpec, lock_text: str | None, lock_path: Path) -> str | None:
    """Pure: why a lock cannot be used for this spec, or None when it matches."""
    if lock_text is None:
        return f"{lock_path} does not exist"
    found = _SPEC_LINE.search(lock_text)
    if not found:
        return f"{lock_path} carries no spec-sha256 line"
    if found.group(1) != spec.digest:
        return f"{lock_path} was made from another version of envs/{spec.name}.yaml"
    return None


def check_lock(spec: EnvSpec, locks: Path = LOCKS) -> None:
    path = pip_lock_path(spec, locks)
    text = path.read_text() if path.is_file() else None
    reason = stale_reason(spec, text, path)
    if reason:
        raise ConfigError(str(path), f"lock does not match its spec: {reason}",
                          f"run `invoke lock --env {spec.name}` and review the diff")


def lock_pip(spec: EnvSpec, locks: Path = LOCKS, index_url: str | None = None) -> Path:
    """Solve with uv for every platform (universal markers, hashes of all wheels)."""
    uv = shutil.which("uv")
    if not uv:
        raise ConfigError("uv", "not found on PATH", "pip install uv (needed only to make pip locks)")
    if not spec.python:
        raise ConfigError(f"envs/{spec.name}.yaml: python", "pip envs need a python version", "add python: \"3.11\"")
    out = pip_lock_path(spec, locks)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        req_in = Path(tmp) / "requirements.in"
        req_in.write_text("\n".join(spec.requirements) + "\n")
        solved = Path(tmp) / "requirements.txt"
        cmd = [uv, "pip", "compile", "--universal", "--generate-hashes", "--only-binary", ":all:",
               "--python-version", spec.python, "--no-header", "--quiet", str(req_in), "-o", str(solved)]
        for name in spec.omit:
            cmd += ["--no-emit-package", name]
        env = dict(os.environ)
        if index_url:
            env["UV_INDEX_URL"] = index_url  # from env/flags, never written to the lock
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            raise ConfigError(f"envs/{spec.name}.yaml", f"cannot be solved: {proc.stderr.strip()[-800:]}",
                              "relax the pins or check the index")
        body = solved.read_text().replace(str(req_in), "requirements.in")
    omitted = "".join(f"# omitted (envs/{spec.name}.yaml omit:): {name}\n" for name in spec.omit)
    out.write_text(lock_header(spec) + omitted + body)
    return out


# ---- every locked package has a wheel for every arch that installs the lock ----

MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}  # Debian arch -> platform.machine()
# Marker variables whose value the build machine gives wrongly for another arch's install; pip
# evaluates markers with its own interpreter, so these are settled here, for the target.
_TARGET_VARS = {"platform_machine", "platform_system", "sys_platform", "os_name", "platform_release",
                "platform_version", "implementation_name", "platform_python_implementation"}


def lock_blocks(text: str) -> list[list[str]]:
    """Pure: a hashed lock's lines, one block per requirement (its line, then its hash and comment
    lines); the header's comment lines before the first requirement are a block each."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return blocks


def for_arch(text: str, arch: str, python: str, source: str = "lock") -> str:
    """Pure: the lock as one arch installs it. A requirement whose marker asks about the platform is
    kept (marker settled, so removed) or dropped for `arch`; markers on the Python version alone stay
    for pip (the builder runs the target's minor). ConfigError when a platform marker also turns on a
    patch release of Python, which the render cannot know."""
    from packaging.markers import InvalidMarker, Marker

    out: list[str] = []
    for block in lock_blocks(text):
        head = block[0]
        requirement, sep, rest = head.partition(";")
        marker_text = rest.rstrip(" \\").strip()
        if not sep or head.startswith("#") or not any(var in marker_text for var in _TARGET_VARS):
            out += block
            continue
        try:
            marker = Marker(marker_text)
        except InvalidMarker as err:
            raise ConfigError(f"{source}: {requirement.strip()}", f"marker does not parse ({err})",
                              "regenerate the lock with invoke lock") from None
        env = {"platform_machine": MACHINES[arch], "platform_system": "Linux", "sys_platform": "linux",
               "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython",
               "python_version": python}
        verdicts = {marker.evaluate(dict(env, python_full_version=f"{python}.{patch}")) for patch in (0, 99)}
        if len(verdicts) > 1:
            raise ConfigError(f"{source}: {requirement.strip()}",
                              f"marker {marker_text!r} depends on Python's patch release and the platform",
                              "lock for one Python minor (python: in the env spec) so the marker settles")
        if verdicts.pop():
            out += [requirement.rstrip() + (" \\" if head.rstrip().endswith("\\") else "")] + block[1:]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


PLATFORMS = {"amd64": "x86_64-manylinux_2_28", "arm64": "aarch64-manylinux_2_28"}  # the RAPIDS wheels' floor
_NO_WHEEL = re.compile(r"Because (\S+)==(\S+) has no wheels with a matching platform tag \(e\.g\., `([^`]+)`\)")


def locked_pins(text: str) -> list[str]:
    """Pure: `name==version[ ; marker]` of every package a hashed lock installs."""
    pins = []
    for line in text.splitlines():
        line = line.strip().removesuffix("\\").strip()
        if line and not line.startswith(("#", "--")) and "==" in line:
            pins.append(line)
    return pins


def unmet_pins(text: str, pins: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """Pure: (name, why) for each pin (variants.yaml pins:) the hashed lock does not honour. A conda
    `=1.2` reads as PEP 440 `==1.2.*`."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # noqa: PLC0415
    from packaging.utils import canonicalize_name  # noqa: PLC0415

    locked: dict[str, list[str]] = {}
    for line in locked_pins(text):
        name, _, rest = line.partition("==")
        locked.setdefault(canonicalize_name(name.split("[")[0].strip()), []).append(rest.split(";")[0].split()[0])
    out = []
    for name, constraint in pins:
        parts = [f"=={c[1:]}.*" if c.startswith("=") and not c.startswith("==") else c for c in constraint.split(",")]
        try:
            wanted = SpecifierSet(",".join(parts))
        except InvalidSpecifier:
            out.append((name, f"{constraint!r} is no PEP 440 version constraint, which a pip lock needs"))
            continue
        versions = locked.get(canonicalize_name(name))
        if not versions:
            out.append((name, "the lock installs no such package: the pin pins nothing"))
        elif bad := [v for v in versions if v not in wanted]:
            out.append((name, f"the lock has {name}=={', '.join(bad)}, outside {constraint}"))
    return out


def wheel_gaps(lock: Path, python: str, arch: str, index_args: list[str], max_gaps: int = 50) -> list[tuple[str, str, str]]:
    """(package, version, platform tag) of each locked package with no wheel for `arch`, as uv
    resolves the lock's exact pins for that platform (markers applied). Each missing one is named
    by uv and set aside, then the rest is tried again, so every gap is listed, not only the first."""
    uv = shutil.which("uv")
    if not uv:
        raise ConfigError("uv", "not found on PATH", "pip install uv (the wheel check resolves with it)")
    pins = locked_pins(lock.read_text())
    gaps: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        while pins and len(gaps) < max_gaps:
            req = Path(tmp) / "pins.txt"
            req.write_text("\n".join(pins) + "\n")
            proc = subprocess.run([uv, "pip", "compile", "--no-deps", "--only-binary", ":all:", "--python-version", python,
                                   "--python-platform", PLATFORMS[arch], "--quiet", "--no-header", *index_args,
                                   str(req), "-o", str(Path(tmp) / "out.txt")], capture_output=True, text=True)
            if proc.returncode == 0:
                break
            found = _NO_WHEEL.search(" ".join(proc.stderr.split()))   # uv wraps its lines
            if not found:
                raise ConfigError(str(lock), f"the {arch} check could not resolve the lock: "
                                  f"{' '.join(proc.stderr.split())[:500]}", "check the index (--index-url) and the lock")
            name, version, tag = found.groups()
            gaps.append((name, version, tag))
            pins = [p for p in pins if not re.match(rf"{re.escape(name)}==", p, re.I)]
    return gaps


def check_wheels(spec: EnvSpec, arches: list[str], index_args: list[str], locks: Path = LOCKS) -> None:
    """One clear error listing every locked package without a wheel for an arch that installs it."""
    path = pip_lock_path(spec, locks)
    missing = [f"{arch}: {name} {version} has no wheel for {tag}"
               for arch in arches for name, version, tag in wheel_gaps(path, spec.python or "3.11", arch, index_args)]
    if missing:
        raise ConfigError(str(path), "locked packages without a wheel for an arch the matrix builds:\n  "
                          + "\n  ".join(missing),
                          "pin a version that ships those wheels, move the package behind a platform marker, or "
                          "drop the arch from the variants that use this env")
