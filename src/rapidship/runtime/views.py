"""What the container sees, read once into one Facts: the memory and CPUs (cgroup_view), the GPUs
(gpu_view), the spill directory and dask's spill configuration (spill_view), the image's prune
record, the caches libraries write, the working directory, a declared memory limit. `collect`
gathers them. Standard library only at import time.
"""

from __future__ import annotations

import json
import os
import resource
from dataclasses import dataclass, field
from pathlib import Path

from .cgroup_view import CgroupMemory, available_cpus, host_memory, read_cgroup
from .gpu_view import GpuView, read_gpus
from .spill_view import SpillConfig, SpillDir, read_spill_config, read_spill_dir, spill_path_from_env
from .units import parse_bytes


# The build's prune record: {"keep": [80, 90], ...} lists the compute capabilities (major*10+minor)
# whose device code the image kept; "keep": null, or no file, means nothing was pruned.
PRUNE_RECORD_ENV = "RAPIDSHIP_PRUNE_RECORD"


DEFAULT_PRUNE_RECORD = "/opt/rapidship/prune.json"


@dataclass(frozen=True)
class PruneRecord:
    """Which GPU architectures' device code the image kept (read from the build's prune record)."""

    path: str
    present: bool = False           # the file exists
    keep: list[int] | None = None   # compute capabilities major*10+minor; None = nothing was pruned
    error: str | None = None        # why the record could not be used (unreadable, corrupt)


@dataclass(frozen=True)
class Facts:
    uid: int
    gid: int
    groups: list[int]
    cgroup: CgroupMemory
    host_total: int | None
    host_available: int | None
    shm_bytes: int | None
    memlock_soft: int | None        # None = unlimited
    cpus: int
    gpu: GpuView
    spill_dir: SpillDir
    spill_config: SpillConfig
    prune: PruneRecord = field(default_factory=lambda: PruneRecord(DEFAULT_PRUNE_RECORD))
    cwd: str = ""
    cwd_usable: bool = True         # the working directory can be entered and listed by this uid
    declared_limit: int | None = None  # $RAPIDS_MEMORY_LIMIT: a limit the cgroup view cannot show (a parent's)
    cuda_image: bool = True         # False: the image carries no CUDA (no NVIDIA_REQUIRE_CUDA): no device code
    caches: list[CacheDir] = field(default_factory=list)  # where libraries write at run time, writable or not


def prune_record_path(environ: dict | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(PRUNE_RECORD_ENV) or DEFAULT_PRUNE_RECORD


def read_prune_record(path: str | None = None) -> PruneRecord:
    """The image's prune record. No file: nothing was pruned. Unreadable or malformed: `error` says why."""
    path = path or prune_record_path()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return PruneRecord(path)
    except (OSError, UnicodeDecodeError) as err:
        return PruneRecord(path, True, error=f"cannot be read ({err.__class__.__name__}: {err})")
    return parse_prune_record(text, path)


def parse_prune_record(text: str, path: str) -> PruneRecord:
    """Pure: prune record JSON text -> PruneRecord; a malformed record carries `error`."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        return PruneRecord(path, True, error=f"is not valid JSON ({err})")
    if not isinstance(doc, dict):
        return PruneRecord(path, True, error="is not a JSON object")
    if "keep" not in doc:
        return PruneRecord(path, True, error='has no "keep" key (a list of compute capabilities, or null)')
    keep = doc["keep"]
    if keep is None:
        return PruneRecord(path, True)
    if not isinstance(keep, list) or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0
                                             for k in keep):
        return PruneRecord(path, True, error=f'"keep" is {keep!r}, not a list of compute capabilities like [80, 90]')
    return PruneRecord(path, True, sorted(keep))


@dataclass(frozen=True)
class CacheDir:
    what: str       # whose cache (CuPy's kernel cache, ...)
    env: str        # the variable that places it
    path: str
    writable: bool  # this uid can create it (its nearest existing ancestor is writable and searchable)


# Caches libraries of the env write at run time, and where (the image sets each under /tmp, the
# hardened profile's tmpfs): CuPy creates its kernel cache at import and fails on a read-only path.
CACHE_ENVS = (("CuPy's kernel cache", "CUPY_CACHE_DIR", "~/.cupy/kernel_cache"),
              ("numba's cache", "NUMBA_CACHE_DIR", ""),
              ("the XDG cache", "XDG_CACHE_HOME", "~/.cache"),
              ("matplotlib's config and cache", "MPLCONFIGDIR", "~/.config/matplotlib"))


def _creatable(path: str) -> bool:
    here = Path(path)
    while not here.exists():
        if here.parent == here:
            return False
        here = here.parent
    return here.is_dir() and os.access(here, os.W_OK | os.X_OK)


def read_cache_dirs(environ: dict | None = None) -> list[CacheDir]:
    env = os.environ if environ is None else environ
    out = []
    for what, name, default in CACHE_ENVS:
        path = env.get(name) or (os.path.expanduser(default) if default else "")
        if path:
            out.append(CacheDir(what, name, path, _creatable(path)))
    return out


def _cwd() -> tuple[str, bool]:
    try:
        cwd = os.getcwd()
    except OSError:
        return "(unknown)", False
    return cwd, os.access(cwd, os.R_OK | os.X_OK)


def declared_limit() -> int | None:
    """$RAPIDS_MEMORY_LIMIT, or None (a bad value is refused by the doctor's finding, not by a crash)."""
    try:
        return parse_bytes(os.environ.get(DECLARED_LIMIT_ENV) or None)
    except ValueError:
        return None


def collect(spill_path: str | None = None) -> Facts:
    """The facts of this process; `spill_path`: the directory the command will spill to (else
    $RAPIDS_SPILL_DIR)."""
    host_total, host_avail = host_memory()
    try:
        vfs = os.statvfs("/dev/shm")
        shm = vfs.f_blocks * vfs.f_frsize
    except OSError:
        shm = None
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    cwd, cwd_ok = _cwd()
    declared = declared_limit()
    return Facts(uid=os.getuid(), gid=os.getgid(), groups=sorted(os.getgroups()), cgroup=read_cgroup(),
                 host_total=host_total, host_available=host_avail, shm_bytes=shm,
                 memlock_soft=None if soft == resource.RLIM_INFINITY else soft, cpus=available_cpus(),
                 gpu=read_gpus(), spill_dir=read_spill_dir(spill_path or spill_path_from_env()),
                 spill_config=read_spill_config(), prune=read_prune_record(), cwd=cwd, cwd_usable=cwd_ok,
                 declared_limit=declared, cuda_image="NVIDIA_REQUIRE_CUDA" in os.environ, caches=read_cache_dirs())


DECLARED_LIMIT_ENV = "RAPIDS_MEMORY_LIMIT"
