"""Privilege gate: no file in the final filesystem may carry setuid/setgid bits or file
capabilities (`security.capability`, what `setcap cap_setuid+ep` writes: a non-root user becomes
root through such a binary without any setuid bit), no directory on PATH may be world-writable
(anyone could put a `python` there for every later process), and the env (/opt/rapids,
/opt/rapidship, /usr/local/bin) must not be writable by the runtime user.

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


ENV_ROOTS = ("/opt/rapids/", "/opt/rapidship/", "/usr/local/bin/")  # the env and rapidship's programs
GROUP_WRITE = 0o020


def user_writable(entries: Iterable[FileEntry], user: str, roots: tuple[str, ...] = ENV_ROOTS) -> list[str]:
    """Pure: files and directories under `roots` that the runtime user (USER uid[:gid]; an arbitrary
    uid runs in group 0 too) may change: owned by it, writable by its group, or by anyone."""
    uid_text, _, gid_text = user.partition(":")
    uid = int(uid_text) if uid_text.isdigit() else -1
    gids = {0, int(gid_text)} if gid_text.isdigit() else {0}
    return sorted(e.path for e in entries
                  if (e.is_file or e.is_dir) and (e.path + ("/" if e.is_dir else "")).startswith(roots)
                  and (e.uid == uid or (e.mode & GROUP_WRITE and e.gid in gids) or e.mode & WORLD_WRITABLE))


def check_suid(image: ImageSnapshot) -> GateReport:
    config = image.config.get("Config") or {}
    found = setid_paths(image.files)
    caps = capability_paths(image.files)
    writable = writable_path_dirs(image.files, config.get("Env"))
    owned = user_writable(image.files, str(config.get("User") or ""))
    reasons = ([f"{p} has setuid/setgid" for p in found] + [f"{p} carries file capabilities (security.capability)"
                                                            for p in caps]
               + [f"{d} is on PATH and world-writable" for d in writable])
    if owned:
        reasons.append(f"{len(owned)} path(s) of the env are writable by the runtime user {config.get('User')} "
                       f"(e.g. {', '.join(owned[:3])}): it could replace python or a library for every later process; "
                       "the env must be root-owned and read-only to it")
    return verdict("suid", reasons, count=len(found), capabilities=len(caps), writable_path_dirs=len(writable),
                   user_writable=len(owned))
