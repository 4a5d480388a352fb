"""suid/sgid gate: no file in the final filesystem may carry those bits.

Directories are left out: setgid on a directory (Debian's /var/mail, /var/local) only makes new
files inherit the group; it grants no privilege."""

from __future__ import annotations

from typing import Iterable

from rapidship.gates import GateReport, verdict
from rapidship.image import FileEntry, ImageSnapshot

SETID = 0o6000


def setid_paths(entries: Iterable[FileEntry]) -> list[str]:
    """Pure: paths with setuid or setgid set."""
    return sorted(e.path for e in entries if e.is_file and e.mode & SETID)


def check_suid(image: ImageSnapshot) -> GateReport:
    found = setid_paths(image.files)
    return verdict("suid", [f"{p} has setuid/setgid" for p in found], count=len(found))
