"""Privilege gate: no file in the final filesystem may carry setuid/setgid bits or file
capabilities (`security.capability`, what `setcap cap_setuid+ep` writes: a non-root user becomes
root through such a binary without any setuid bit), and no directory on PATH may be
world-writable (anyone could put a `python` there for every later process).

Directories are left out of the setid check: setgid on a directory (Debian's /var/mail,
/var/local) only makes new files inherit the group; it grants no privilege."""

from __future__ import annotations

from typing import Iterable

from rapidship.gates import GateReport, verdict
from rapidship.image import FileEntry, ImageSnapshot

SETID = 0o6000
WORLD_WRITABLE = 0o002


def setid_paths(entries: Iterable[FileEntry]) -> list[str]:
    """Pure: paths with setuid or setgid set."""
    return sorted(e.path for e in entries if e.is_file and e.mode & SETID)


def capability_paths(entries: Iterable[FileEntry]) -> list[str]:
    """Pure: paths that carry file capabilities."""
    return sorted(e.path for e in entries if e.capabilities)


def writable_path_dirs(entries: Iterable[FileEntry], env: list[str] | None) -> list[str]:
    """Pure: directories named in the image's PATH that anyone may write to."""
    path = next((e.split("=", 1)[1] for e in env or [] if e.startswith("PATH=")), "")
    on_path = {d.rstrip("/") or "/" for d in path.split(":") if d.startswith("/")}
    return sorted(e.path.rstrip("/") for e in entries
                  if e.is_dir and (e.path.rstrip("/") or "/") in on_path and e.mode & WORLD_WRITABLE)


def check_suid(image: ImageSnapshot) -> GateReport:
    found = setid_paths(image.files)
    caps = capability_paths(image.files)
    writable = writable_path_dirs(image.files, (image.config.get("Config") or {}).get("Env"))
    reasons = ([f"{p} has setuid/setgid" for p in found] + [f"{p} carries file capabilities (security.capability)"
                                                            for p in caps]
               + [f"{d} is on PATH and world-writable" for d in writable])
    return verdict("suid", reasons, count=len(found), capabilities=len(caps), writable_path_dirs=len(writable))
