"""A tar stream read by content, in large chunks: each member's kind and size, and its data as views.

export/repack.py needs no member's name, only which members are regular files and their bytes, at
the speed sha256 and zstd allow (Python's tarfile copies every chunk several times in stream mode).
Headers are read as POSIX and GNU tar define them and as Go's archive/tar reads them: a checksum
that does not match is an error; pax `size` records and base-256 sizes are honoured; pax and GNU
long-name headers describe the next member and are not members; hard links, symbolic links,
directories, devices and FIFOs carry no data whatever their size field says; any other type's
data is skipped. A reader that took another view of a crafted header would only fail to find a
blob: whatever is found is found by its hash.
An extended header is read into memory only up to `EXTENDED_CAP` (1 MiB, Go's archive/tar cap):
a larger pax or GNU long-name header is an error before any of it is read, and a global pax header
(which describes no member) is skipped unread, so a courier's header costs one chunk of memory.
"""

from __future__ import annotations

import tarfile
from typing import IO, Iterator

BLOCK = tarfile.BLOCKSIZE
REGULAR = (b"0", b"\0", b"7")
_HEADER_ONLY = (b"1", b"2", b"3", b"4", b"5", b"6")
_PAX, _PAX_GLOBAL, _GNU_LONG = b"x", b"g", (b"L", b"K")
_ZERO = bytes(BLOCK)
EXTENDED_CAP = 1 << 20


class TarStream:
    """One pass over a tar stream: iterate `members()`; inside the loop, `data()` yields the current
    member's bytes (what is not read is skipped when the loop moves on)."""

    def __init__(self, raw: IO[bytes], chunk: int = 1 << 20) -> None:
        self.raw = raw
        self.buf = bytearray(chunk)
        self.view = memoryview(self.buf)
        self.start = self.end = 0
        self.left = 0  # data bytes of the current member not yet read

    def _fill(self) -> bool:
        if self.start:  # what is left is less than a header: copied, never overlapping itself
            self.buf[: self.end - self.start] = bytes(self.view[self.start:self.end])
            self.end -= self.start
            self.start = 0
        got = self.raw.readinto(self.view[self.end:])
        self.end += got or 0
        return bool(got)

    def _take(self, n: int) -> Iterator[memoryview]:
        """The next `n` bytes of the stream, as views into the buffer (valid until the next read)."""
        while n:
            if self.start == self.end and not self._fill():
                raise tarfile.ReadError("the archive ends inside a member")
            piece = min(n, self.end - self.start)
            yield self.view[self.start:self.start + piece]
            self.start += piece
            n -= piece

    def _exact(self, n: int) -> bytes:
        return b"".join(bytes(v) for v in self._take(n))

    def _skip(self, n: int) -> None:
        for _ in self._take(n):
            pass

    def _header(self) -> bytes | None:
        while self.end - self.start < BLOCK:
            if not self._fill():
                if self.start == self.end:
                    return None  # a stream that stops between members, as Go's reader allows
                raise tarfile.ReadError("the archive ends inside a header")
        block = bytes(self.view[self.start:self.start + BLOCK])
        self.start += BLOCK
        return block

    def data(self) -> Iterator[memoryview]:
        """The current member's data, in order."""
        for piece in self._take(self.left):
            self.left -= len(piece)
            yield piece

    def members(self) -> Iterator[tuple[int, bool, int]]:
        """(index, regular file, data size) of every member, in order."""
        index, size_override = 0, None
        while (header := self._header()) is not None and header != _ZERO:
            if tarfile.nti(header[148:156]) not in tarfile.calc_chksums(header):
                raise tarfile.ReadError(f"the header of member {index} has a bad checksum")
            kind, size = header[156:157], tarfile.nti(header[124:136])
            if size < 0:
                raise tarfile.ReadError(f"member {index} has a negative size")
            if kind == _PAX_GLOBAL:
                self._skip(size + (-size % BLOCK))
                continue
            if kind in (_PAX, *_GNU_LONG):
                if size > EXTENDED_CAP:
                    raise tarfile.ReadError(f"member {index} has an extended header of {size:,} bytes, more than "
                                            f"the {EXTENDED_CAP:,} any tar writer needs")
                records = self._exact(size)
                self._skip(-size % BLOCK)
                if kind == _PAX:
                    size_override = pax_size(records)
                continue
            if size_override is not None:
                size, size_override = size_override, None
            size = 0 if kind in _HEADER_ONLY else size
            self.left = size
            yield index, kind in REGULAR, size
            self._skip(self.left)
            self.left = 0
            self._skip(-size % BLOCK)
            index += 1


def pax_size(records: bytes) -> int | None:
    """The `size` a pax extended header gives the next member ("<len> <key>=<value>\\n" records)."""
    found, pos = None, 0
    while pos < len(records):
        space = records.find(b" ", pos)
        if space < 0 or not records[pos:space].isdigit():
            raise tarfile.ReadError("a pax header is malformed")
        length = int(records[pos:space])
        record = records[space + 1:pos + length]
        if length <= space - pos or pos + length > len(records) or not record.endswith(b"\n") or b"=" not in record:
            raise tarfile.ReadError("a pax header is malformed")
        key, _, value = record[:-1].partition(b"=")
        if key == b"size":
            if not value.isdigit():
                raise tarfile.ReadError("a pax size is not a number")
            found = int(value)
        pos += length
    return found
