"""The trivy DB writer: bbolt meta-page checksum (pure) and the file layout trivy reads."""

from __future__ import annotations

import json
import struct
from datetime import datetime, timezone

import pytest

from rapidship.errors import ConfigError
from rapidship.gates.trivydb import (META_FORMAT, PAGE_HEADER, Advisory, fnv1a64, meta_checksum, seal_meta_pages,
                                     write_db)


def test_fnv1a64_matches_the_reference_vectors():
    # Published FNV-1a 64 test vectors (the same hash Go's hash/fnv New64a computes).
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def _meta_page(txid: int, checksum: int = 0) -> bytearray:
    page = bytearray(4096)
    struct.pack_into("<QHHI", page, 0, 0, 0x04, 0, 0)
    META_FORMAT.pack_into(page, PAGE_HEADER, 0xED0CDAED, 2, 4096, 0, 3, 0, 2, 4, txid, checksum)
    return page


def test_seal_writes_the_checksum_over_the_first_56_meta_bytes():
    db = _meta_page(0) + _meta_page(1)
    sealed = seal_meta_pages(bytearray(db))
    for page in (0, 1):
        start = page * 4096 + PAGE_HEADER
        fields = META_FORMAT.unpack_from(sealed, start)
        assert fields[-1] == fnv1a64(bytes(sealed[start:start + 56])) != 0
        assert fields[:-1] == META_FORMAT.unpack_from(db, start)[:-1]  # nothing else changed
    # the two pages differ in txid, so their checksums differ too
    assert META_FORMAT.unpack_from(sealed, PAGE_HEADER)[-1] != META_FORMAT.unpack_from(sealed, 4096 + PAGE_HEADER)[-1]


def test_seal_refuses_a_file_that_is_not_bbolt():
    with pytest.raises(ValueError, match="not a bbolt meta page"):
        seal_meta_pages(bytearray(8192))


def test_written_db_has_sealed_meta_pages_and_the_trivy_layout(tmp_path):
    from boltdb import BoltDB

    db_dir = write_db(tmp_path, [Advisory("debian 12", "zlib", "CVE-2099-0001", "HIGH", "1:1.3-1"),
                                 Advisory("debian 12", "zlib", "CVE-2099-0002", "LOW")],
                      now=datetime(2026, 1, 2, tzinfo=timezone.utc))
    raw = (db_dir / "trivy.db").read_bytes()
    for page in (0, 1):
        meta = raw[page * 4096 + PAGE_HEADER: page * 4096 + PAGE_HEADER + META_FORMAT.size]
        assert META_FORMAT.unpack(meta)[-1] == meta_checksum(meta)
    assert json.loads((db_dir / "metadata.json").read_text()) == {
        "Version": 2, "NextUpdate": "2026-01-03T00:00:00Z", "UpdatedAt": "2026-01-02T00:00:00Z",
        "DownloadedAt": "2026-01-02T00:00:00Z"}
    db = BoltDB(str(db_dir / "trivy.db"), readonly=True)
    with db.view() as tx:
        zlib = tx.bucket(b"debian 12").bucket(b"zlib")
        assert json.loads(bytes(zlib.get(b"CVE-2099-0001"))) == {"FixedVersion": "1:1.3-1"}
        assert json.loads(bytes(zlib.get(b"CVE-2099-0002"))) == {}
        assert json.loads(bytes(tx.bucket(b"vulnerability").get(b"CVE-2099-0001")))["Severity"] == "HIGH"
        assert json.loads(bytes(tx.bucket(b"data-source").get(b"debian 12")))["ID"] == "debian"
    db.close()
    db.close = lambda: None


def test_advisory_rejects_unknown_severity_and_source():
    with pytest.raises(ConfigError, match="severity"):
        Advisory("debian 12", "zlib", "CVE-1", "SEVERE")
    with pytest.raises(ConfigError, match="data source"):
        Advisory("kylin 10", "zlib", "CVE-1", "LOW")


@pytest.mark.parametrize("content", [b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, b"\xff\xfe- {x: 1}"])
def test_a_binary_or_utf16_advisories_file_is_one_clear_error(tmp_path, content):
    from rapidship.errors import ConfigError
    from rapidship.gates.trivydb import load_advisories

    path = tmp_path / "advisories.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_advisories(path)
