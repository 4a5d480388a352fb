"""The spill directory as the container sees it: its mount (filesystem, read-only or not), owner, mode,
whether this uid can really write there, free room, the spill files in it; and dask's own spill
configuration. `read_*` do the I/O; the parsers are pure. Standard library only at import time.
"""

from __future__ import annotations

import importlib.util
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path


RAM_FSTYPES = ("tmpfs", "ramfs")  # a "disk" tier there is memory of the same cgroup: no disk spill at all


WARN_FSTYPES = {"overlay": "the container's writable layer: spilling there fills the node's image disk",
                "tmpfs": "RAM: spilling there counts against the same memory limit it is meant to relieve",
                "ramfs": "RAM: spilling there counts against the same memory limit it is meant to relieve"}


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fstype: str
    source: str


@dataclass(frozen=True)
class SpillDir:
    path: str | None               # None: nothing configured
    exists: bool = False
    writable: bool = False
    read_only: bool = False         # on a read-only mount: with --read-only, nothing was mounted there
    mode: int | None = None
    owner_uid: int | None = None
    owner_gid: int | None = None
    fstype: str | None = None
    mount_point: str | None = None
    free_bytes: int | None = None


@dataclass(frozen=True)
class SpillConfig:
    """Where dask is told to spill and whether its spilling is switched on."""

    dask_available: bool
    target: float | bool | None     # distributed.worker.memory.target
    spill: float | bool | None      # distributed.worker.memory.spill
    pause: float | bool | None
    terminate: float | bool | None
    temporary_directory: str | None  # temporary-directory (DASK_TEMPORARY_DIRECTORY)
    preload: list[str] = field(default_factory=list)     # distributed.worker.preload
    pre_import: list[str] = field(default_factory=list)  # RAPIDS_PRE_IMPORT, passed to dask-cuda
    cudf_available: bool = False
    dask_cudf_available: bool = False
    dask_cuda_available: bool = False
    ucx_available: bool = False     # ucxx and distributed_ucxx importable (UCX comms for dask)


def parse_mountinfo(text: str) -> list[Mount]:
    """Pure: mounts from /proc/self/mountinfo (fields before ' - ', fstype and source after)."""
    mounts = []
    for line in text.splitlines():
        pre, sep, post = line.partition(" - ")
        if not sep:
            continue
        fields, tail = pre.split(), post.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        mounts.append(Mount(_unescape(fields[4]), tail[0], _unescape(tail[1])))
    return mounts


def _unescape(s: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (\\040 ...)."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 4 <= len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mount_for(path: str, mounts: list[Mount]) -> Mount | None:
    """Pure: the mount a path lives on: the longest mount point that contains it, last one wins."""
    best: Mount | None = None
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        if path == mp or path.startswith(mp + "/") or mp == "/":
            if best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/"):
                best = m
    return best


def read_spill_dir(path: str | None, mounts: list[Mount] | None = None) -> SpillDir:
    if not path:
        return SpillDir(path=None)
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return SpillDir(path=path)
    if not stat.S_ISDIR(st.st_mode):
        return SpillDir(path=path)
    if mounts is None:
        try:
            mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
        except OSError:
            mounts = []
    m = mount_for(os.path.realpath(path), mounts)
    try:
        vfs = os.statvfs(path)
        free, read_only = vfs.f_bavail * vfs.f_frsize, bool(vfs.f_flag & os.ST_RDONLY)
    except OSError:
        free, read_only = None, False
    return SpillDir(path=path, exists=True, writable=_really_writable(p), read_only=read_only,
                    mode=stat.S_IMODE(st.st_mode),
                    owner_uid=st.st_uid, owner_gid=st.st_gid, fstype=m.fstype if m else None,
                    mount_point=m.mount_point if m else None, free_bytes=free)


def _really_writable(p: Path) -> bool:
    """os.access trusts mode bits; a read-only mount or a user namespace can still refuse."""
    if not os.access(p, os.W_OK | os.X_OK):
        return False
    probe = p / f".rapids-doctor-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def as_list(value) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.replace(",", " ").split() if v.strip()]
    return [str(v) for v in value]


def read_spill_config(environ: dict | None = None) -> SpillConfig:
    """Dask's view (its config files and DASK_* variables) when dask is installed."""
    env = os.environ if environ is None else environ
    has = lambda mod: importlib.util.find_spec(mod) is not None  # noqa: E731
    cudf, dask_cudf, dask_cuda = has("cudf"), has("dask_cudf"), has("dask_cuda")
    ucx = has("ucxx") and has("distributed_ucxx")
    pre_import = as_list(env.get("RAPIDS_PRE_IMPORT", ""))
    if has("dask"):
        import dask.config  # noqa: PLC0415 - optional, and only when present

        get = dask.config.get
        return SpillConfig(True, get("distributed.worker.memory.target", None),
                           get("distributed.worker.memory.spill", None),
                           get("distributed.worker.memory.pause", None),
                           get("distributed.worker.memory.terminate", None),
                           get("temporary-directory", None) or None,
                           as_list(get("distributed.worker.preload", [])), pre_import, cudf, dask_cudf, dask_cuda,
                           ucx)
    return SpillConfig(False, None, None, None, None, env.get("DASK_TEMPORARY_DIRECTORY") or None, [], pre_import,
                       cudf, dask_cudf, dask_cuda, ucx)


def spill_path_from_env(environ: dict | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return env.get("RAPIDS_SPILL_DIR") or None


def dir_usage(path: str, only_storage: bool = True) -> tuple[int, int]:
    """Spill files and their bytes under a directory: non-empty files below a `storage` folder,
    where distributed's SpillBuffer and dask-cuda's DeviceHostFile both write (lock files excluded)."""
    files = total = 0
    for base, _, names in os.walk(path):
        if only_storage and "storage" not in Path(base).parts:
            continue
        for n in names:
            try:
                size = os.stat(os.path.join(base, n)).st_size
            except OSError:
                continue
            if size:
                total += size
                files += 1
    return files, total


def fs_bytes(path: str) -> tuple[int | None, int | None]:
    """(size, free) in bytes of the filesystem holding `path` (free as an unprivileged user sees it)."""
    try:
        vfs = os.statvfs(path)
    except OSError:
        return None, None
    return vfs.f_blocks * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize
