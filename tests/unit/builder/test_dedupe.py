"""Byte-identical copies in an env become relative symlinks, except where a link would change what
an ELF file loads ($ORIGIN names the link's directory); the linked library still loads."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess

import pytest

from rapidship.builder import dedupe
from support.fatbin_samples import gcc

BIG = b"x" * (dedupe.MIN_BYTES + 1)


def lib(path, rpath=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.parent / "l.c"
    src.write_text("int answer(void) { return 42; }\nstatic const char pad[70000] = {1};\n"
                   "const char *keep_pad(void) { return pad; }\n")
    flags = [f"-Wl,-rpath,{rpath}"] if rpath else []
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(path), str(src), *flags], check=True, capture_output=True)
    src.unlink()
    return path


def test_copies_become_links_and_small_or_unique_files_stay(tmp_path):
    env = tmp_path / "env"
    (env / "a").mkdir(parents=True)
    (env / "b").mkdir()
    for name in ("a/libx.so", "a/libx.so.0", "a/libx.so.0.0.0", "b/data.json"):
        (env / name).write_bytes(BIG)
    (env / "a" / "small").write_bytes(b"tiny")
    (env / "b" / "small").write_bytes(b"tiny")
    (env / "b" / "unique").write_bytes(BIG[:-1] + b"y")
    record = tmp_path / "dedupe.json"
    assert dedupe.main(["--prefix", str(env), "--out", str(record)]) == 0
    doc = json.loads(record.read_text())
    assert doc["linked"] == 3 and doc["saved_bytes"] == 3 * len(BIG)
    assert not os.path.islink(env / "a" / "libx.so.0.0.0")  # the longest name stays the file
    assert os.readlink(env / "a" / "libx.so") == "libx.so.0.0.0"
    assert os.readlink(env / "b" / "data.json") == "../a/libx.so.0.0.0"
    assert (env / "b" / "data.json").read_bytes() == BIG
    assert not any(os.path.islink(env / p) for p in ("a/small", "b/small", "b/unique"))
    assert dedupe.plan(str(env)) == []  # a second run finds nothing left


@pytest.mark.skipif(gcc() is None and not os.environ.get("CI"), reason="needs gcc (CI installs it)")
def test_an_origin_library_is_linked_only_within_its_directory_and_still_loads(tmp_path):
    env = tmp_path / "env"
    first = lib(env / "p1.libs" / "libo.so.1", rpath="$ORIGIN")
    (env / "p1.libs" / "libo.so").write_bytes(first.read_bytes())
    (env / "p2.libs").mkdir()
    (env / "p2.libs" / "libo.so.1").write_bytes(first.read_bytes())
    plain = lib(env / "q1" / "libp.so.1")
    (env / "q2").mkdir()
    (env / "q2" / "libp.so.1").write_bytes(plain.read_bytes())
    links = dict(dedupe.plan(str(env)))
    assert links == {str(env / "p1.libs" / "libo.so"): str(first), str(env / "q2" / "libp.so.1"): str(plain)}
    dedupe.main(["--prefix", str(env), "--out", str(tmp_path / "r.json")])
    assert not os.path.islink(env / "p2.libs" / "libo.so.1")
    assert ctypes.CDLL(str(env / "q2" / "libp.so.1")).answer() == 42
    assert ctypes.CDLL(str(env / "p1.libs" / "libo.so")).answer() == 42
