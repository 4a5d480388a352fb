"""Faults on the real thing: a small tmpfs that fills up, and commands that must end on their own.

A tmpfs of a few hundred kilobytes stands in for a full disk (the kernel answers ENOSPC as it does
on any file system); mounting needs root, which CI has. A command run here gets its own process
group, so a hang is ended with all its children (zstd, docker save) and the mount can go again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def small_fs(size: str, under: Path) -> Iterator[Path]:
    """A tmpfs of `size` (mount's syntax: 300k, 2m) mounted at a new folder under `under`."""
    where = Path(tempfile.mkdtemp(prefix="small-fs-", dir=under))
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        where.rmdir()
        if os.environ.get("CI"):  # CI runs as root: the full-disk cases must run there
            pytest.fail(f"mounting a tmpfs failed in CI: {proc.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}): the full-disk cases need root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], capture_output=True)
        where.rmdir()


def fill(where: Path, leave: int = 0) -> None:
    """Fill the file system of `where` up to `leave` free bytes."""
    vfs = os.statvfs(where)
    room = vfs.f_bavail * vfs.f_frsize - leave
    with open(where / "filler", "wb") as fh:
        with contextlib.suppress(OSError):
            fh.write(b"\0" * max(room, 0))


def run_bounded(cmd: list[str], seconds: float, **kw) -> subprocess.CompletedProcess:
    """`cmd` with a deadline: a hang fails the test (its whole process group killed) instead of the run."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd[:3])} ... still ran after {seconds} s (hung):\n{out}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
