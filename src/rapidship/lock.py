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
_SPEC_LINE = re.compile(r"^# spec-sha256: ([0-9a-f]{64})$", re.M)


@dataclass(frozen=True)
class EnvSpec:
    name: str
    flavour: str
    requirements: tuple[str, ...]
    python: str | None = None
    channels: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


def load_env_spec(name: str, envs: Path = ENVS) -> EnvSpec:
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
    allowed = {"flavour", "python", "requirements", "channels"}
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
    return EnvSpec(name=name, flavour=flavour, requirements=tuple(reqs), python=python, channels=tuple(channels))


def pip_lock_path(spec: EnvSpec, locks: Path = LOCKS) -> Path:
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
        env = dict(os.environ)
        if index_url:
            env["UV_INDEX_URL"] = index_url  # from env/flags, never written to the lock
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            raise ConfigError(f"envs/{spec.name}.yaml", f"cannot be solved: {proc.stderr.strip()[-800:]}",
                              "relax the pins or check the index")
        body = solved.read_text().replace(str(req_in), "requirements.in")
    out.write_text(lock_header(spec) + body)
    return out
