"""The normaliser's pure parts on layer tars made here: path order, one time (LAYER_MTIME), owners and modes
as built, hard links re-pointed at the first name in the new order, only xattrs kept in pax records,
the config's times; and that normalising twice changes nothing."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from rapidship.errors import ConfigError
from rapidship.imagebuild.normalise import (LAYER_MTIME, layer_size, normal_config, order_key, plan_layer, rfc3339,
                                            source_date_epoch, write_layer)

EPOCH = 1796000000  # 2026-11-30T00:53:20Z
CAP = "SCHILY.xattr.security.capability"


def _tar(members: list[tuple[str, bytes | None, dict]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, attrs in members:
            info = tarfile.TarInfo(name)
            info.uname, info.gname = "root", "root"
            for key, value in attrs.items():
                setattr(info, key, value)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def _normalise(raw: bytes) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        entries = plan_layer(tar.getmembers())
        out = io.BytesIO()
        diff_id = write_layer(tar, entries, out)
    assert len(out.getvalue()) == layer_size(entries)
    import hashlib
    assert diff_id == "sha256:" + hashlib.sha256(out.getvalue()).hexdigest()
    return out.getvalue()


LATE, EARLY = EPOCH + 86400 * 3, EPOCH - 86400 * 400
LAYER = [
    ("usr/bin/zz", b"zz", {"mtime": LATE, "mode": 0o755}),
    ("usr", None, {"type": tarfile.DIRTYPE, "mtime": LATE, "mode": 0o755}),
    ("usr/bin", None, {"type": tarfile.DIRTYPE, "mtime": EARLY, "mode": 0o755}),
    ("usr/bin/python3.11", b"\x7fELF...", {"mtime": EARLY, "mode": 0o755, "uid": 1001, "gid": 0}),
    ("usr/bin/python3", None, {"type": tarfile.LNKTYPE, "linkname": "usr/bin/python3.11", "mtime": EARLY}),
    ("usr/bin/ping", b"ping", {"mtime": LATE, "mode": 0o755, "pax_headers": {CAP: "\x01\x00", "atime": "1.5"}}),
    ("usr/bin/a-link", None, {"type": tarfile.SYMTYPE, "linkname": "zz", "mtime": LATE}),
    ("usr/lib/.wh..wh..opq", b"", {"mtime": LATE}),
]


def test_entries_in_path_order_times_the_epoch_owners_and_modes_kept():
    with tarfile.open(fileobj=io.BytesIO(_normalise(_tar(LAYER)))) as tar:
        got = {m.name: m for m in tar.getmembers()}
        names = [m.name for m in tar.getmembers()]
        assert names == sorted(names, key=order_key)
        assert names[0] == "usr" and names.index("usr/bin") < names.index("usr/bin/zz")
        assert {m.mtime for m in got.values()} == {LAYER_MTIME}  # a cached layer's earlier times too
        assert got["usr/bin/python3.11"].uid == 1001 and got["usr/bin/zz"].mode == 0o755
        assert {m.uname for m in got.values()} == {""}
        assert got["usr/bin/ping"].pax_headers.get(CAP) == "\x01\x00" and "atime" not in got["usr/bin/ping"].pax_headers
        assert got["usr/bin/a-link"].issym() and got["usr/bin/a-link"].linkname == "zz"
        # python3 sorts before python3.11: it now holds the data and python3.11 links to it
        assert got["usr/bin/python3"].isfile() and tar.extractfile("usr/bin/python3").read() == b"\x7fELF..."
        assert got["usr/bin/python3.11"].islnk() and got["usr/bin/python3.11"].linkname == "usr/bin/python3"
        assert got["usr/bin/python3"].uid == 1001


def test_a_normalised_layer_normalises_to_itself_and_the_input_order_does_not_matter():
    once = _normalise(_tar(LAYER))
    assert _normalise(once) == once
    assert _normalise(_tar(list(reversed(LAYER[:4])) + LAYER[4:])) == once


def test_no_time_of_the_build_or_the_commit_survives_but_content_and_modes_do():
    for shift in (999, -86400 * 30):  # a later clock, and a layer from the cache of an earlier build
        moved = [(n, d, {**a, "mtime": a["mtime"] + shift}) for n, d, a in LAYER]
        assert _normalise(_tar(moved)) == _normalise(_tar(LAYER))
    for changed in ([(n, b"zY" if d == b"zz" else d, a) for n, d, a in LAYER],
                    [(n, d, {**a, "mode": 0o700}) if n == "usr/bin/zz" else (n, d, a) for n, d, a in LAYER],
                    [(n, d, {**a, "uid": 5}) if n == "usr/bin/zz" else (n, d, a) for n, d, a in LAYER]):
        assert _normalise(_tar(changed)) != _normalise(_tar(LAYER))


def test_a_link_to_a_file_of_a_lower_layer_stays_a_link():
    raw = _tar([("etc/b", None, {"type": tarfile.LNKTYPE, "linkname": "etc/a", "mtime": LATE})])
    with tarfile.open(fileobj=io.BytesIO(_normalise(raw))) as tar:
        (only,) = tar.getmembers()
        assert only.islnk() and only.linkname == "etc/a"


def test_an_empty_layer_is_two_zero_blocks():
    assert _normalise(_tar([])) == bytes(1024)


def test_the_config_times_are_the_epoch_and_buildkit_extras_go():
    config = {"architecture": "amd64", "created": "2026-12-03T21:17:38.674077476Z",
              "history": [{"created": "2020-01-01T00:00:00Z", "created_by": "ADD rootfs.tar /"},
                          {"created": "2026-12-03T21:17:19.432046905Z", "created_by": "RUN x"},
                          {"created_by": "no time"}],
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "a" * 64]},
              "moby.buildkit.buildinfo.v1": "e30=", "config": {"Labels": {"x": "y"}}}
    doc = json.loads(normal_config(config, ["sha256:" + "b" * 64], EPOCH))
    assert doc["created"] == rfc3339(EPOCH) == "2026-11-30T00:53:20Z"
    assert [h.get("created") for h in doc["history"]] == ["2026-11-30T00:53:20Z", "2026-11-30T00:53:20Z", None]
    assert doc["rootfs"]["diff_ids"] == ["sha256:" + "b" * 64] and "moby.buildkit.buildinfo.v1" not in doc
    assert doc["config"] == {"Labels": {"x": "y"}}
    again = dict(config, created="2027-01-01T00:00:00Z")
    assert normal_config(again, ["sha256:" + "b" * 64], EPOCH) == normal_config(config, ["sha256:" + "b" * 64], EPOCH)


def test_the_epoch_comes_from_the_environment_or_the_commit(tmp_path):
    assert source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": "1700000000"}) == 1700000000
    with pytest.raises(ConfigError, match="SOURCE_DATE_EPOCH.*not a whole number"):
        source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": "soon"})
    with pytest.raises(ConfigError, match="not a git checkout") as err:
        source_date_epoch(tmp_path, {})
    assert "export SOURCE_DATE_EPOCH" in err.value.fix
    import subprocess
    run = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True,  # noqa: E731
                                    env={"GIT_COMMITTER_DATE": "@1690000000 +0000", "GIT_AUTHOR_DATE": "@1690000000 +0000",
                                         "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    run("init", "-q")
    run("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "x")
    assert source_date_epoch(tmp_path, {}) == 1690000000
