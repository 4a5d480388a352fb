"""A wheel's installed bytes, read from its zip's tail (lock/installed.py): wheels made here with
zipfile, served on 127.0.0.1 by a server that honours Range and by one that sends the whole file."""

from __future__ import annotations

import io
import random
import re
import struct
import zipfile
from http.server import BaseHTTPRequestHandler

import pytest
from support.loopback import LoopbackServer

from rapidship.errors import ConfigError
from rapidship.lock.installed import TAIL, Short, directory_total, installed_from_tail, wheel_installed_bytes
from rapidship.lock.sizes import installed_sizes


def _wheel(members: int = 3, noise: int = 0, comment: bytes = b"", force_zip64: bool = False) -> bytes:
    """A deflated zip: `members` text files (long names make a long directory), `noise` random
    bytes (which do not deflate) and a comment."""
    rng = random.Random(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for n in range(members):
            with z.open(f"pkg/{'sub/' * 10}module_{n:05d}.py", "w", force_zip64=force_zip64) as f:
                f.write(b"x = 1\n" * (n % 50 + 1))
        if noise:
            z.writestr("pkg/blob.bin", rng.randbytes(noise))
        z.comment = comment
    return out.getvalue()


def _unzipped(data: bytes) -> int:
    return sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(data)).infolist())


class _Files(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    ranges: list[str | None] = []
    honour_range = True

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        data = self.files.get(self.path)
        asked = self.headers.get("Range")
        self.ranges.append(asked)
        if data is None:
            self.send_error(404)
            return
        found = re.fullmatch(r"bytes=(\d+)-(\d+)", asked or "")
        if self.honour_range and found:
            first, last = int(found.group(1)), min(int(found.group(2)), len(data) - 1)
            body = data[first:last + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        else:
            body = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def serve():
    servers = []

    def start(files: dict[str, bytes], honour_range: bool = True):
        handler = type("Handler", (_Files,), {"files": files, "ranges": [], "honour_range": honour_range})
        servers.append(LoopbackServer(handler))
        return f"http://127.0.0.1:{servers[-1].port}", handler.ranges

    yield start
    for server in servers:
        server.stop()


def test_a_wheel_is_read_from_its_tail_by_range_requests_never_whole(serve):
    """A directory longer than the first tail asked for (1500 long names) costs a second request;
    the 2 MB of noise ahead of it is never sent."""
    data = _wheel(members=1500, noise=2_000_000)
    url, ranges = serve({"/w.whl": data})
    assert wheel_installed_bytes(f"{url}/w.whl", len(data)) == _unzipped(data)
    assert len(ranges) == 2 and all(r and r.startswith("bytes=") for r in ranges)
    served = sum(int(b) - int(a) + 1 for a, b in (re.fullmatch(r"bytes=(\d+)-(\d+)", r).groups() for r in ranges))
    assert served < len(data) - 1_900_000
    small = _wheel(members=3, noise=10_000)
    url, ranges = serve({"/s.whl": small})
    assert wheel_installed_bytes(f"{url}/s.whl", len(small)) == _unzipped(small) and len(ranges) == 1


def test_a_zip64_wheel_is_read(serve, monkeypatch):
    """zip64: the members written with force_zip64, and the directory's sizes and end record in
    zip64 form (zipfile writes them past ZIP64_LIMIT, lowered here so that a test file reaches it)."""
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1000)
    data = _wheel(members=40, noise=5000, force_zip64=True)
    monkeypatch.undo()
    # as a writer of a zip past 4 GB leaves the 32-bit end record: its counts only in the zip64 one
    data = data[:-22] + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    assert b"PK\x06\x06" in data[-200:] and b"PK\x06\x07" in data[-200:]  # the zip64 end record and its locator
    assert b"\xff\xff\xff\xff" in data[-200:] or b"\xff\xff\xff\xff" in data[data.rfind(b"pkg/blob.bin") - 30:]
    url, ranges = serve({"/z.whl": data})
    assert wheel_installed_bytes(f"{url}/z.whl", len(data)) == _unzipped(data) == 5000 + sum(
        6 * (n % 50 + 1) for n in range(40))


def test_a_server_that_ignores_range_sends_the_whole_file_and_it_is_still_read(serve):
    data = _wheel(members=1500, noise=200_000, comment=b"made here")
    url, ranges = serve({"/w.whl": data}, honour_range=False)
    assert wheel_installed_bytes(f"{url}/w.whl", len(data)) == _unzipped(data)
    assert len(ranges) == 1  # one answer, the whole file: not asked again


def test_the_tail_parser_asks_for_earlier_bytes_and_refuses_what_is_no_zip():
    data = _wheel(members=1500, comment=b"PK\x05\x06 in a comment")  # zipfile itself misreads this one
    at = len(data) - TAIL
    with pytest.raises(Short) as short:
        installed_from_tail(data[at:], at)
    assert 0 < short.value.at < at
    assert installed_from_tail(data[short.value.at:], short.value.at) == sum(6 * (n % 50 + 1) for n in range(1500))
    with pytest.raises(ValueError, match="not a zip"):
        installed_from_tail(b"\0" * 100, 0)
    with pytest.raises(ValueError, match="no central directory entry"):
        directory_total(b"PK\x03\x04" + b"\0" * 60, 1)


def test_an_index_whose_file_is_missing_is_named_as_the_index_to_change(serve):
    url, _ = serve({})
    with pytest.raises(ConfigError) as caught:
        installed_sizes([{"filename": "toolz-1.2.0-py3-none-any.whl", "url": f"{url}/toolz.whl", "size": 100,
                          "hashes": {"sha256": "c" * 64}}])
    assert caught.value.where == "--index-url" and "toolz-1.2.0-py3-none-any.whl" in caught.value.problem
    assert installed_sizes([{"filename": "x.whl", "url": f"{url}/x.whl", "hashes": {"sha256": "d" * 64}}]) == {}
