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


def _layer(root, files: dict[str, bytes]):
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_a_layer_s_copy_of_a_file_below_links_down_to_the_lowest_and_the_record_says_so(tmp_path):
    """Each layer is made in its own stage: its copies of a file a layer below holds (auditwheel's
    libgomp in several RAPIDS wheels) link to the lowest layer's, never up, and the links resolve
    once the layers lie on one prefix."""
    other = BIG[:-1] + b"z"
    layers = {1: {"cuml.libs/libgomp-1.so.1.0.0": BIG}, 2: {"raft.libs/libgomp-1.so.1.0.0": BIG, "raft/own.so": other},
              3: {"cuvs.libs/libgomp-1.so.1.0.0": BIG, "cuvs/lib.so": other, "cuvs/unique": BIG[:-1] + b"u"}}
    roots, indexes = {}, []
    for n, files in layers.items():
        roots[n] = _layer(tmp_path / f"env-{n}", files)
        assert dedupe.main(["--prefix", str(roots[n]), "--out", str(tmp_path / f"d{n}.json"),
                            "--index", str(tmp_path / f"i{n}.json"), "--layer", str(n)]) == 0
        indexes.append(str(tmp_path / f"i{n}.json"))
    assert dedupe.main(["--plan-links", *indexes, "--out", str(tmp_path / "links")]) == 0
    assert json.loads((tmp_path / "links" / "1.json").read_text()) == []   # every layer has a plan
    for n in layers:
        assert dedupe.main(["--prefix", str(roots[n]), "--links", str(tmp_path / "links" / f"{n}.json"),
                            "--out", str(tmp_path / f"d{n}.json")]) == 0
    assert not any(p.is_symlink() for p in roots[1].rglob("*"))   # the lowest layer keeps its file
    assert os.readlink(roots[2] / "raft.libs/libgomp-1.so.1.0.0") == "../cuml.libs/libgomp-1.so.1.0.0"
    assert os.readlink(roots[3] / "cuvs.libs/libgomp-1.so.1.0.0") == "../cuml.libs/libgomp-1.so.1.0.0"
    assert os.readlink(roots[3] / "cuvs/lib.so") == "../raft/own.so"   # the lowest layer that has it
    assert not (roots[3] / "cuvs/unique").is_symlink() and not (roots[2] / "raft/own.so").is_symlink()
    record = json.loads((tmp_path / "d3.json").read_text())
    assert record["linked"] == 2 and record["saved_bytes"] == 2 * len(BIG)
    merged = dedupe.merge([json.loads((tmp_path / f"d{n}.json").read_text()) for n in layers])
    assert merged["linked"] == 3 and [(x["path"], x["to"]) for x in merged["links"]] == [
        ("cuvs.libs/libgomp-1.so.1.0.0", "cuml.libs/libgomp-1.so.1.0.0"), ("cuvs/lib.so", "raft/own.so"),
        ("raft.libs/libgomp-1.so.1.0.0", "cuml.libs/libgomp-1.so.1.0.0")]
    flat = tmp_path / "flat"   # the layers on one prefix, as the runtime's COPYs lay them
    flat.mkdir()
    for n in layers:
        subprocess.run(["cp", "-a", f"{roots[n]}/.", str(flat)], check=True)
    assert (flat / "cuvs.libs/libgomp-1.so.1.0.0").read_bytes() == BIG and (flat / "cuvs/lib.so").read_bytes() == other


def test_a_file_below_that_loads_by_origin_is_linked_to_only_from_its_own_folder():
    below = {"layer": 1, "files": [{"path": "a.libs/libz.so", "size": 9, "sha256": "s", "origin": True}]}
    own = {"layer": 2, "files": [{"path": "b.libs/libz.so", "size": 9, "sha256": "s", "origin": False},
                                 {"path": "a.libs/libz.so.1", "size": 9, "sha256": "s", "origin": False}]}
    assert dedupe.plan_links([own, below]) == {2: [["a.libs/libz.so.1", "a.libs/libz.so"]], 1: []}
    assert dedupe.plan_links([own]) == {2: []}   # nothing below: nothing to link to
