"""The fast tar reader against Python's tarfile and GNU tar: the same members, kinds, sizes and bytes
over archives in every format engines write (ustar, GNU long names, pax), with links, directories and
FIFOs; bad checksums, truncation and malformed pax headers are errors, never a silent end."""

from __future__ import annotations

import io
import tarfile

import pytest
from hypothesis import given, settings, strategies as st

from rapidship.export.tarstream import TarStream, pax_size

KINDS = [tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE]


def build(entries, fmt) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.linkname = "target/" + "t" * 120 if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
                tar.addfile(info)
    return out.getvalue()


def ours(data: bytes, chunk: int) -> list[tuple[bool, int, bytes]]:
    stream = TarStream(io.BytesIO(data), chunk)
    return [(regular, size, b"".join(bytes(v) for v in stream.data())) for _, regular, size in stream.members()]


def theirs(data: bytes) -> list[tuple[bool, int, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return [(m.isreg(), m.size if m.isreg() else 0, tar.extractfile(m).read() if m.isreg() else b"") for m in tar]


names = st.text(alphabet="abcdefgh/._-é", min_size=1, max_size=160).filter(lambda n: n.strip("/") and "//" not in n)
entries = st.lists(st.tuples(names, st.sampled_from(KINDS), st.binary(max_size=3000)), max_size=12)


@settings(max_examples=150, deadline=None)
@given(entries, st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]), st.sampled_from([512, 700, 4096, 1 << 20]))
def test_the_same_members_as_tarfile_reads(members, fmt, chunk):
    data = build(members, fmt)
    assert ours(data, chunk) == theirs(data)


def test_a_pax_size_beyond_the_ustar_field_is_honoured():
    info = tarfile.TarInfo("big")
    info.size = 3
    header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "strict")
    pax = b"12 size=600\n"
    extended = tarfile.TarInfo("././@PaxHeader")
    extended.type, extended.size = tarfile.XHDTYPE, len(pax)
    data = (extended.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict") + pax + bytes(-len(pax) % 512) + header
            + b"x" * 600 + bytes(-600 % 512) + bytes(1024))
    assert ours(data, 4096) == [(True, 600, b"x" * 600)]
    assert pax_size(b"12 size=600\n18 path=somewhere\n") == 600 and pax_size(b"") is None
    for bad in (b"12 size=6x0\n", b"99 size=1\n", b"x size=1\n", b"5 a\n"):
        with pytest.raises(tarfile.ReadError):
            pax_size(bad)


def test_bad_checksums_and_truncation_are_errors():
    data = build([("a", tarfile.REGTYPE, b"hello" * 300)], tarfile.GNU_FORMAT)
    broken = bytearray(data)
    broken[0] ^= 1  # the name changes, the checksum does not
    with pytest.raises(tarfile.ReadError, match="bad checksum"):
        ours(bytes(broken), 4096)
    with pytest.raises(tarfile.ReadError, match="ends inside a member"):
        ours(data[:1000], 4096)
    with pytest.raises(tarfile.ReadError, match="ends inside a header"):
        ours(data[:100], 4096)
    assert ours(data[:512 + 1536], 4096) == [(True, 1500, b"hello" * 300)]  # no end marker: Go's reader stops too


def test_links_and_directories_carry_no_data_whatever_their_size_says():
    info = tarfile.TarInfo("link")
    info.type, info.linkname, info.size = tarfile.LNKTYPE, "a", 4096  # a size field a link should not have
    data = info.tobuf(tarfile.GNU_FORMAT, "utf-8", "strict") + build([("a", tarfile.REGTYPE, b"x")], tarfile.GNU_FORMAT)
    assert ours(data, 4096) == [(False, 0, b""), (True, 1, b"x")] == theirs(data)


def test_an_extended_header_over_one_mib_is_refused_before_it_is_read():
    """A courier's pax or GNU long-name header declaring gigabytes: refused at its header, having
    read one chunk; one of exactly the cap is still read (Go's archive/tar draws the line there)."""
    import tracemalloc

    from support.archives import Zeros, extended_header

    member = build([("a", tarfile.REGTYPE, b"x")], tarfile.GNU_FORMAT)
    for kind in (tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME):
        raw = Zeros(extended_header(kind, 3 << 30), 3 << 30, member)
        tracemalloc.start()
        with pytest.raises(tarfile.ReadError, match="member 0 has an extended header of 3,221,225,472 bytes, more "
                                                    "than the 1,048,576"):
            list(TarStream(raw, 1 << 16).members())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert raw.read_bytes <= 1 << 16 and peak < 1 << 20
    at_cap = extended_header(tarfile.GNUTYPE_LONGNAME, 1 << 20) + b"n" * (1 << 20) + member
    assert ours(at_cap, 4096) == [(True, 1, b"x")]


def test_a_global_header_is_skipped_without_holding_it():
    from support.archives import Zeros, extended_header

    import tracemalloc

    member = build([("a", tarfile.REGTYPE, b"x")], tarfile.GNU_FORMAT)
    raw = Zeros(extended_header(tarfile.XGLTYPE, 64 << 20), 64 << 20, member)
    tracemalloc.start()
    stream = TarStream(raw, 1 << 16)
    found = [(regular, size, b"".join(bytes(v) for v in stream.data())) for _, regular, size in stream.members()]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert found == [(True, 1, b"x")] and peak < 1 << 20
