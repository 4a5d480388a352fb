"""What a wheel weighs installed: the sum of its members' uncompressed sizes, read from its zip's tail.

A wheel is a zip; its central directory, at the end of the file, lists every member's uncompressed
size (`file_size`). The layer plan weighs a distribution by these bytes (lock/sizes.py): an image
layer holds the installed files, not the deflated wheel, and the ratio varies from 1.3x (a CUDA
library's wheel) to 17x (a wheel of small text files).

Pure core: `installed_from_tail(tail, at)` reads the end-of-central-directory record (zip64's too)
and the directory from the file's last bytes (those from offset `at` to the end), or raises `Short`
naming the offset it needs the bytes from. The edge, `wheel_installed_bytes`, asks the index for
the file's tail with a Range request, and for earlier bytes when `Short` says so: cuBLAS's 581 MB
wheel costs one request of 64 KiB, numpy's (a directory of 1166 members) two. A server that ignores Range answers with the whole file: it is streamed
to a temporary file and read from there.
"""

from __future__ import annotations

import re
import struct
import tempfile
from collections.abc import Callable

_END = struct.Struct("<4sHHHHIIH")            # end of central directory: 22 bytes and a comment
_END64_LOCATOR = struct.Struct("<4sIQI")      # zip64 end of central directory locator, just before it
_END64 = struct.Struct("<4sQHHIIQQQQ")        # zip64 end of central directory record
_ENTRY = struct.Struct("<4s4B4HL2L5H2L")      # a central directory entry (zipfile's structCentralDir)
_END_SIG, _LOCATOR_SIG, _END64_SIG, _ENTRY_SIG = b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06", b"PK\x01\x02"
TAIL = _END.size + 0xFFFF + _END64_LOCATOR.size + _END64.size  # the end records, whatever the comment
_CHUNK = 1 << 20


class Short(Exception):
    """The tail given does not reach back far enough: the bytes from `at` on are needed."""

    def __init__(self, at: int):
        super().__init__(f"needs the bytes from offset {at}")
        self.at = at


def _directory(tail: bytes, at: int) -> tuple[int, int, int]:
    """Pure: (offset, size, entries) of the central directory, from the file's bytes `at`.. its end."""
    end = tail.rfind(_END_SIG, max(0, len(tail) - TAIL), max(0, len(tail) - _END.size + 4))
    while end >= 0 and end + _END.size + _END.unpack_from(tail, end)[7] != len(tail):
        end = tail.rfind(_END_SIG, 0, end)  # a signature inside the comment
    if end < 0:
        if at > 0:
            raise Short(max(0, at - TAIL))
        raise ValueError("no end of central directory record: not a zip file")
    _, _, _, _, entries, size, offset, _ = _END.unpack_from(tail, end)
    locator = end - _END64_LOCATOR.size
    if locator < 0 and at > 0:  # a zip64 locator would begin before the tail
        raise Short(max(0, at + locator))
    if locator >= 0 and tail[locator:locator + 4] == _LOCATOR_SIG:
        record = _END64_LOCATOR.unpack_from(tail, locator)[2] - at
        if record < 0:
            raise Short(record + at)
        if tail[record:record + 4] != _END64_SIG:
            raise ValueError("the zip64 locator points at no zip64 end record")
        entries, size, offset = (_END64.unpack_from(tail, record)[i] for i in (7, 8, 9))
    return offset, size, entries


def directory_total(directory: bytes, entries: int) -> int:
    """Pure: a central directory's bytes -> the sum of its entries' uncompressed sizes (zip64 extra
    fields read where the 32-bit field says 0xFFFFFFFF). ValueError if it is not `entries` entries."""
    total, pos = 0, 0
    for _ in range(entries):
        if directory[pos:pos + 4] != _ENTRY_SIG or pos + _ENTRY.size > len(directory):
            raise ValueError(f"no central directory entry at offset {pos} of the directory")
        fields = _ENTRY.unpack_from(directory, pos)
        compressed, size, name_len, extra_len, comment_len = fields[10], fields[11], fields[12], fields[13], fields[14]
        extra = directory[pos + _ENTRY.size + name_len:pos + _ENTRY.size + name_len + extra_len]
        if size == 0xFFFFFFFF:
            size = _zip64_size(extra)
        total += size
        pos += _ENTRY.size + name_len + extra_len + comment_len
    return total


def _zip64_size(extra: bytes) -> int:
    """Pure: the uncompressed size from an entry's zip64 extra field (id 1: the size comes first)."""
    pos = 0
    while pos + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, pos)
        if kind == 1 and length >= 8:
            return struct.unpack_from("<Q", extra, pos + 4)[0]
        pos += 4 + length
    raise ValueError("an entry's size is 0xFFFFFFFF and it has no zip64 extra field")


def installed_from_tail(tail: bytes, at: int) -> int:
    """Pure: a zip file's bytes from offset `at` to its end -> the sum of its members' uncompressed
    sizes. `Short(offset)` when the directory (or zip64's end record) begins before `at`; ValueError
    when the bytes are no zip."""
    offset, size, entries = _directory(tail, at)
    if offset < at:
        raise Short(offset)
    return directory_total(tail[offset - at:offset - at + size], entries)


# ---- edge: the wheel's tail from the index -----------------------------------------------------

def wheel_installed_bytes(url: str, size: int, session=None) -> int:
    """Thin edge: the installed bytes of the wheel at `url` (`size` bytes, as the index says), from
    Range requests for its tail; a server that answers 200 sends the whole file, read streamed.
    requests' errors and ValueError (no zip, a range not asked for) pass to the caller."""
    import requests

    http = session or requests.Session()

    def read(first: int, last: int) -> bytes:
        got = http.get(url, headers={"Range": f"bytes={first}-{last}"}, stream=True, timeout=120)
        got.raise_for_status()
        if got.status_code == 200:
            raise _Whole(got)
        found = re.match(r"bytes (\d+)-(\d+)/", got.headers.get("Content-Range", ""))
        if got.status_code != 206 or not found or (int(found.group(1)), int(found.group(2))) != (first, last):
            raise ValueError(f"asked for bytes {first}-{last}, the server answered {got.status_code} "
                             f"{got.headers.get('Content-Range', '(no Content-Range)')}")
        return got.content

    try:
        return _installed(read, size)
    except _Whole as whole:
        return _from_whole(whole.response)


class _Whole(Exception):
    """The server ignored Range and answers with the whole file."""

    def __init__(self, response):
        super().__init__("the server sends the whole file")
        self.response = response


def _installed(read: Callable[[int, int], bytes], size: int) -> int:
    """The tail first, then earlier bytes as long as the directory begins before what was read."""
    at = max(0, size - TAIL)
    tail = read(at, size - 1)
    while True:
        try:
            return installed_from_tail(tail, at)
        except Short as short:
            tail, at = read(short.at, at - 1) + tail, short.at


def _from_whole(got) -> int:
    """A whole file answered: streamed to a temporary file, its tail read from there."""
    with tempfile.TemporaryFile() as spool:
        for chunk in got.iter_content(_CHUNK):
            spool.write(chunk)

        def read(first: int, last: int) -> bytes:
            spool.seek(first)
            return spool.read(last - first + 1)

        return _installed(read, spool.tell())
