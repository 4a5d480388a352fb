"""Room on a file system: checked before a stage writes what it can size, and said in one message when
the disk fills anyway (ENOSPC): where, how much was needed and free, and what was (not) done.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from rapidship.errors import RapidshipError


def free_bytes(path: Path) -> int:
    """Bytes this user may still write on the file system of `path` (or of its nearest existing parent)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    vfs = os.statvfs(path)
    return vfs.f_bavail * vfs.f_frsize


def is_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


def sized(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n:,} bytes"


def no_room(where: str, path: Path, needed: str, outcome: str, fix: str = "") -> RapidshipError:
    """The one message of a full disk. `needed`: what the stage knows of its need ('4.2 MB', 'more than
    3.1 MB'); `outcome`: what was left undone, e.g. 'nothing was published'."""
    return RapidshipError(where, f"no space left on {path}: {needed} needed, {sized(free_bytes(path))} free; {outcome}",
                          fix or f"free space on that file system, or name a larger one with {where}")


def require_room(where: str, path: Path, needed: int, what: str, outcome: str, fix: str = "") -> None:
    """Refuse before writing `needed` bytes of `what` under `path` when the file system lacks them."""
    if free_bytes(path) < needed:
        raise no_room(where, path, f"{sized(needed)} ({what})", outcome, fix)
