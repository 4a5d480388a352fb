"""A full disk in one message: where, how much needed and free, what was not done."""

from __future__ import annotations

import errno

import pytest
from invoke.exceptions import Exit

from rapidship.diskspace import free_bytes, is_full, no_room, require_room
from rapidship.errors import RapidshipError, exits_cleanly


def test_require_room_refuses_what_the_file_system_cannot_hold_and_passes_what_it_can(tmp_path):
    require_room("--out", tmp_path, 1, "one byte", "nothing was published")
    with pytest.raises(RapidshipError) as raised:
        require_room("--out", tmp_path / "not" / "yet", free_bytes(tmp_path) + 10**12, "the ISOs", "nothing was published")
    message = raised.value.message
    assert message.startswith(f"--out: no space left on {tmp_path}/not/yet: ") and "MB (the ISOs) needed" in message
    assert "MB free; nothing was published" in message and "fix: free space on that file system" in message


def test_no_room_and_is_full():
    assert is_full(OSError(errno.ENOSPC, "No space left on device")) and is_full(OSError(errno.EDQUOT, "quota"))
    assert not is_full(OSError(errno.EACCES, "denied")) and not is_full(ValueError())
    assert "needed 3 bytes" not in no_room("--work", "/", "3 bytes", "nothing was loaded").message
    assert "/: 3 bytes needed, " in no_room("--work", "/", "3 bytes", "nothing was loaded").message


def test_a_task_that_meets_a_full_disk_unsized_says_so_not_permissions():
    @exits_cleanly
    def task():
        raise OSError(errno.ENOSPC, "No space left on device", "/srv/out/part.000")

    with pytest.raises(Exit) as raised:
        task()
    assert raised.value.message.startswith("error: /srv/out/part.000: no space left on the file system; this step was "
                                           "not finished") and "permissions" not in raised.value.message
