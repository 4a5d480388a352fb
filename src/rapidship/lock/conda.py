"""Conda env spec x variant -> solved, hashed, per-platform lockfiles (py-rattler).

A conda env (envs/<name>.yaml, flavour conda) is solved once per distinct (python, cuda) pair of the
variants that use it, per arch, into locks/<env>/py<python>-<cuda|cpu>/conda-<arch>.lock:

    # rapidship conda lock for env rapids (python 3.11, cuda 12.9, linux-64): do not edit, ...
    # lock-format: 1
    # platform: linux-64
    # spec-sha256: <sha256 of the spec, the variant pins, the platform and the channel names>
    {"name": ..., "version": ..., "build": ..., "channel": "conda-forge", "url": ..., "sha256": ..., ...}

One JSON object per package and line, sorted by name, so a re-lock reviews as a per-package diff.
Channels are names in the spec; where they are fetched from is configuration (mirror URLs, which
may carry credentials): the lock keeps only the credential-free URL, and the builder rewrites the
channel base to its own mirror (install_lock.py) and verifies every sha256.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from rapidship.errors import ConfigError, RapidshipError
from rapidship.builder.install_lock import LOCK_FORMAT, LockInstallError, parse_channels, public_url, read_lock
from rapidship.lock.pip import LOCKS, EnvSpec
from rapidship.config.matrix import Arch, Flavour, Matrix, Variant

PLATFORMS = {Arch.amd64: "linux-64", Arch.arm64: "linux-aarch64"}
ARCHSPEC = {Arch.amd64: "x86_64", Arch.arm64: "aarch64"}
DEFAULT_CHANNEL_BASE = "https://conda.anaconda.org"
# The oldest glibc of the OS bases (Kylin V10 ships 2.28): packages needing newer are not picked.
GLIBC = "2.28"
LINUX = "5.10"


@dataclass(frozen=True)
class LockTarget:
    """One solve: an env for a python (and cuda) line on one platform."""

    env: str
    python: str
    cuda: str | None
    arch: Arch
    pins: tuple[tuple[str, str], ...] = ()   # the variant's pinned packages (variants.yaml pins:)

    @property
    def platform(self) -> str:
        return PLATFORMS[self.arch]

    @property
    def line(self) -> str:
        line = f"py{self.python}-{'cuda' + self.cuda if self.cuda else 'cpu'}"
        if self.pins:   # a lock of its own: variants without the pins keep theirs
            line += "-pins-" + hashlib.sha256(json.dumps(self.pins).encode()).hexdigest()[:8]
        return line


def lock_path(target: LockTarget, locks: Path = LOCKS) -> Path:
    return locks / target.env / target.line / f"conda-{target.arch.value}.lock"


def variant_target(variant: Variant, arch: Arch) -> LockTarget:
    return LockTarget(env=variant.env, python=variant.python, cuda=variant.cuda, arch=arch, pins=variant.pins)


def targets_for(spec: EnvSpec, matrix: Matrix) -> list[LockTarget]:
    """Every distinct solve the matrix needs from this env spec."""
    found = {variant_target(v, a) for v in matrix.variants.values()
             if v.env == spec.name and v.flavour is Flavour.conda for a in v.arches}
    return sorted(found, key=lambda t: (t.python, t.cuda or "", t.arch.value, t.pins))


def solve_specs(spec: EnvSpec, target: LockTarget) -> list[str]:
    """The spec's requirements plus the variant's pins (python, cuda-version)."""
    pins = [f"python {target.python}.*"] if "python" in spec.pin else []
    if target.cuda and "cuda-version" in spec.pin:
        pins.append(f"cuda-version {target.cuda}.*")
    return list(spec.requirements) + pins + [f"{name} {constraint}" for name, constraint in target.pins]


def virtual_packages(target: LockTarget) -> list[tuple[str, str, str]]:
    """What the solve may assume of the machine: (name, version, build)."""
    found = [("__unix", "0", "0"), ("__linux", LINUX, "0"), ("__glibc", GLIBC, "0"),
             ("__archspec", "1", ARCHSPEC[target.arch])]
    if target.cuda:
        found.append(("__cuda", target.cuda, "0"))
    return found


def target_digest(spec: EnvSpec, target: LockTarget) -> str:
    """Changes when anything that decides the solve changes (spec, pins, platform, channel names)."""
    doc = {"spec": spec.digest, "specs": solve_specs(spec, target), "platform": target.platform,
           "channels": list(spec.channels), "virtual": virtual_packages(target)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def channel_bases(spec: EnvSpec, configured: list[str]) -> list[tuple[str, str]]:
    """(name, URL to solve from) per spec channel, in priority order: mirror or the public default."""
    if not spec.channels:
        raise ConfigError(f"envs/{spec.name}.yaml: channels", "a conda env needs channels",
                          "list channel names, e.g. channels: [rapidsai, conda-forge]")
    try:
        mirrors = parse_channels(configured)
    except LockInstallError as err:
        raise ConfigError("--conda-channel", str(err), "pass NAME=URL or a URL ending in the channel name") from None
    return [(name, mirrors.get(name, f"{DEFAULT_CHANNEL_BASE}/{name}")) for name in spec.channels]


def lock_records(solved: list, bases: list[tuple[str, str]]) -> list[dict]:
    """Pure: py-rattler RepoDataRecords -> lock records (credential-free URLs, hex hashes)."""
    by_base = {public_url(url): name for name, url in bases}
    out = []
    for rec in solved:
        base = public_url(str(rec.channel))
        name = by_base.get(base) or next((n for b, n in by_base.items() if public_url(str(rec.url)).startswith(b + "/")), None)
        if name is None:
            raise ConfigError("solve", f"{rec.file_name} came from an unknown channel {base}", "report this")
        if rec.sha256 is None:
            raise ConfigError(f"channel {name}", f"{rec.file_name} has no sha256 in the repodata",
                              "index the channel with a current conda-index / rattler-index")
        out.append({
            "name": rec.name.normalized, "version": str(rec.version), "build": str(rec.build),
            "build_number": rec.build_number, "subdir": str(rec.subdir),
            "noarch": _noarch(rec), "depends": list(rec.depends), "constrains": list(rec.constrains),
            "license": rec.license, "size": rec.size, "md5": rec.md5.hex() if rec.md5 else None,
            "sha256": rec.sha256.hex(), "channel": name, "fn": rec.file_name,
            "url": f"{public_url(dict(bases)[name])}/{rec.subdir}/{rec.file_name}",
        })
    return sorted(out, key=lambda r: (r["name"], r["version"], r["build"]))


def _noarch(rec) -> str | None:
    kind = rec.noarch
    if kind is None or not (kind.python or kind.generic):
        return None
    return "python" if kind.python else "generic"


def lock_text(spec: EnvSpec, target: LockTarget, records: list[dict]) -> str:
    head = [f"# rapidship conda lock for env {spec.name} (python {target.python}, "
            f"{'cuda ' + target.cuda if target.cuda else 'no cuda'}, {target.platform}"
            f"{''.join(f', {n} {c}' for n, c in target.pins)}): "
            f"do not edit, run `invoke lock --env {spec.name}`.",
            f"# lock-format: {LOCK_FORMAT}",
            f"# platform: {target.platform}",
            f"# spec-sha256: {target_digest(spec, target)}",
            f"# packages: {len(records)}"]
    return "\n".join(head + [json.dumps(r, sort_keys=True) for r in records]) + "\n"


def stale_reason(spec: EnvSpec, target: LockTarget, text: str | None, path: Path) -> str | None:
    """Pure: why this lock cannot be used for the target, or None when it matches."""
    if text is None:
        return f"{path} does not exist"
    try:
        header, _ = read_lock(text)
    except LockInstallError as err:
        return f"{path}: {err}"
    if header.get("spec-sha256") != target_digest(spec, target):
        return f"{path} was made from another version of envs/{spec.name}.yaml or of its variant pins"
    return None


def check_conda_locks(spec: EnvSpec, matrix: Matrix, locks: Path = LOCKS) -> list[Path]:
    """Raise on the first lock that is missing or stale; return the checked paths."""
    checked = []
    for target in targets_for(spec, matrix):
        path = lock_path(target, locks)
        reason = stale_reason(spec, target, path.read_text() if path.is_file() else None, path)
        if reason:
            raise ConfigError(str(path), f"lock does not match its spec: {reason}",
                              f"run `invoke lock --env {spec.name}` and review the diff")
        checked.append(path)
    return checked


def solve(spec: EnvSpec, target: LockTarget, bases: list[tuple[str, str]]) -> list:
    """py-rattler solve against the channel URLs (network I/O: repodata)."""
    import rattler

    virtual = [rattler.GenericVirtualPackage(rattler.PackageName(n), rattler.Version(v), rattler.BuildString(b))
               for n, v, b in virtual_packages(target)]
    channels = [rattler.Channel(url) for _, url in bases]
    try:
        return asyncio.run(rattler.solve(sources=channels, specs=solve_specs(spec, target),
                                         platforms=[target.platform, "noarch"], virtual_packages=virtual))
    except Exception as err:  # rattler raises its own exception types per failure kind
        where = ", ".join(f"{n} ({public_url(u)})" for n, u in bases)
        raise ConfigError(f"envs/{spec.name}.yaml ({target.line}, {target.platform})",
                          f"cannot be solved from {where}: {type(err).__name__}: {str(err).strip()[-600:]}",
                          "check the channel mirrors (--conda-channel / RAPIDSHIP_CONDA_CHANNELS) and the pins") from None


def solved_records(spec: EnvSpec, target: LockTarget, bases: list[tuple[str, str]]) -> list[dict]:
    """The solve and its records, in the child process `isolated` runs."""
    return lock_records(solve(spec, target, bases), bases)


def _answer(conn, fn, args) -> None:
    """In the child: fn's value or its error, sent once."""
    try:
        conn.send(("value", fn(*args)))
    except RapidshipError as err:
        conn.send(("error", err))
    except BaseException as err:  # noqa: BLE001 - any other failure crosses as its text
        conn.send(("crash", f"{type(err).__name__}: {err}"))
    finally:
        conn.close()


def isolated(fn, *args, what: str):
    """fn(*args) in a fresh (spawned) process; its value or its RapidshipError, here. py-rattler's
    native threads outliving a failed solve crashed the interpreter at exit now and then
    (`PyGILState_Release`, exit 134; a segfault, 139) after the clear error was printed; in a
    child that can only end the child, never the exit code the user gets. A child that dies before
    it answers is one error naming how it died."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    mine, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_answer, args=(theirs, fn, args), daemon=True)
    child.start()
    theirs.close()
    try:
        kind, value = mine.recv()
    except EOFError:
        child.join()
        raise RapidshipError(what, f"the solver's process died before it answered (exit {child.exitcode})",
                             "run the same command again; if it keeps dying, report the py-rattler version "
                             "(pip show py-rattler) with the command") from None
    finally:
        mine.close()
    child.join(timeout=60)   # how it exits after answering changes nothing
    if kind == "error":
        raise value
    if kind == "crash":
        raise RapidshipError(what, f"the solver failed: {value}", "run the same command again")
    return value


def lock_conda(spec: EnvSpec, matrix: Matrix, configured: list[str] | None = None,
               locks: Path = LOCKS) -> list[Path]:
    """Solve every target the matrix needs from this spec and write its lock."""
    configured = configured if configured is not None else os.environ.get("RAPIDSHIP_CONDA_CHANNELS", "").split()
    bases = channel_bases(spec, configured)
    targets = targets_for(spec, matrix)
    if not targets:
        raise ConfigError(f"envs/{spec.name}.yaml", "no conda variant in the matrix uses this env",
                          "set env: and flavour: conda on a variant, or remove the spec")
    written = []
    for target in targets:
        records = isolated(solved_records, spec, target, bases,
                           what=f"envs/{spec.name}.yaml ({target.line}, {target.platform})")
        path = lock_path(target, locks)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(lock_text(spec, target, records))
        written.append(path)
    return written
