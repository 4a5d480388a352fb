"""Work folders of an import (and of install.sh): removed on every exit, and what a killed run left
removed by the next run, named.

Each folder holds `.owner`, a file its run keeps locked (flock) while it lives; the kernel drops the
lock when the run ends, however it ends. A folder of ours whose `.owner` is not locked is therefore
left over, whatever pid it had; one whose `.owner` is locked belongs to a run still going.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator

from rapidship.diskspace import sized

OWNER = ".owner"
# the work folders import makes (export/load.py, export/trust.py) and install.sh's (its --tmp)
PREFIXES = ("rapidship-import-", "rapidship-trust-", "rapidship-tuf-", "rapidship-install.")


@contextlib.contextmanager
def work_folder(prefix: str, under: Path | None) -> Iterator[Path]:
    """A private folder under `under` (default $TMPDIR), owned by this run while it lives."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=under))
    fd = os.open(tmp / OWNER, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield tmp
    finally:
        os.close(fd)
        shutil.rmtree(tmp, ignore_errors=True)


def remove_leftovers(under: Path | None, say: Callable[[str], None]) -> list[Path]:
    """Remove the work folders under `under` (default $TMPDIR) that runs which did not end left."""
    root = Path(under) if under else Path(tempfile.gettempdir())
    removed = []
    for folder in sorted(root.glob("rapidship-*")):
        if not folder.name.startswith(PREFIXES) or not (folder / OWNER).is_file():
            continue  # not ours, or just being made
        try:
            fd = os.open(folder / OWNER, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a run still going
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
            shutil.rmtree(folder, ignore_errors=True)
            say(f"removed {folder} ({sized(size)}): the work folder of an earlier import that did not end (killed)")
            removed.append(folder)
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def term_ends_cleanly() -> Iterator[None]:
    """SIGTERM (a service stop, `kill PID`) ends the run through its `finally`s, work folders removed,
    instead of Python's default of ending at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
