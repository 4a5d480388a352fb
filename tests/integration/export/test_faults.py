"""Faults on the real thing: a full file system under export and import, two imports of one site at
once, and the litter a killed run leaves. Each case ends on its own within its deadline and says
where, how much and what was (not) done, in one message.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support.commands import ROOT
from support.signed_discs import image_id, load_image, unique_name
from support.small_fs import fill, run_bounded, small_fs

pytestmark = pytest.mark.docker

BIG = 32_000_000  # random bytes: the archive is as large, far over the small file system and zstd's buffers


@pytest.fixture
def image_of(engine):
    """An image of `size` random bytes (zstd cannot shrink it), removed after the test."""
    made = []

    def make(size: int) -> str:
        ref = f"{unique_name()}:1"
        made.append(load_image(ref, "amd64", os.urandom(size)))
        return ref

    yield make
    subprocess.run(["docker", "rmi", "-f", *made], capture_output=True)


def _one_error(stderr: str) -> str:
    assert stderr.count("error:") == 1 and "Traceback" not in stderr, stderr
    return stderr[stderr.index("error:"):]


def test_export_onto_a_full_disk_fails_at_once_naming_the_room(image_of, tmp_path):
    """Was a deadlock: after ENOSPC nobody read zstd's output, zstd stopped reading its input, and the
    feeding thread's join waited forever."""
    with small_fs("1m", tmp_path) as out:
        proc = run_bounded(["invoke", "export", "--image", image_of(BIG), "--unsigned", "--media", "dvd",
                            "--out", str(out)], 60, cwd=ROOT)
        message = _one_error(proc.stderr)
        assert proc.returncode != 0
        assert str(out) in message and "no space" in message.lower(), message
        assert "free" in message and "needed" in message and "nothing was published" in message, message
        assert sorted(p.name for p in out.iterdir()) == [], "partial volumes left behind"


def test_export_checks_room_for_the_isos_before_writing_them(image_of, tmp_path):
    """The archive is measured before the ISOs are made: too little room left for them is said then."""
    with small_fs("8m", tmp_path) as out:
        fill(out, leave=5_000_000)  # room for the 3 MB archive, not for its ISO as well
        proc = run_bounded(["invoke", "export", "--image", image_of(3_000_000), "--unsigned", "--media", "dvd",
                            "--out", str(out)], 60, cwd=ROOT)
        message = _one_error(proc.stderr)
        assert proc.returncode != 0 and "ISO(s) of the 3.0 MB written" in message, message
        assert "needed" in message and "free" in message and "nothing was published" in message, message
        assert sorted(p.name for p in out.iterdir()) == ["filler"], "partial volumes left behind"
