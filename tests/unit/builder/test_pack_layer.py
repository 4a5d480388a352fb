"""The conda layer's bytecode: every Python source a package ships without its .pyc is compiled at
the prefix (a `noarch: python` package, a linux-64 package made without bytecode, the standard
library of a python built without it), and a .pyc a package ships is left as it is. Without them a
read-only env recompiles every module in every process (the image made from wheels lacked 4,300)."""

from __future__ import annotations

import importlib.util
import json
import marshal
import sys

from rapidship.builder.pack_layer import compile_missing

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SITE = f"lib/python{PY}/site-packages"


def _package(out, name, files, noarch=None):
    (out / "conda-meta").mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    record = {"name": name, "version": "1.0", "build": "0", "noarch": noarch, "files": sorted(files)}
    (out / "conda-meta" / f"{name}-1.0-0.json").write_text(json.dumps(record))


def _pyc(out, rel):
    return importlib.util.cache_from_source(str(out / rel))


def test_every_source_without_bytecode_is_compiled_at_the_prefix(tmp_path):
    out = tmp_path / "layer"
    _package(out, "pure", {f"{SITE}/pure/__init__.py": "X = 1\n"}, noarch="python")
    _package(out, "made-from-a-wheel", {f"{SITE}/fast/__init__.py": "Y = 2\n", f"{SITE}/fast/_impl.py": "Z = 3\n"})
    _package(out, "python", {f"lib/python{PY}/json2.py": "W = 4\n", "bin/script.py": "print(1)\n"})
    shipped = f"{SITE}/shipped/__init__.py"
    _package(out, "shipped", {shipped: "V = 5\n"})
    (out / _pyc(out, shipped)).parent.mkdir(parents=True, exist_ok=True)
    open(_pyc(out, shipped), "wb").write(b"its own bytes")
    assert compile_missing(out, "/opt/rapids") == 4
    for rel in (f"{SITE}/pure/__init__.py", f"{SITE}/fast/_impl.py", f"lib/python{PY}/json2.py"):
        code = marshal.loads(open(_pyc(out, rel), "rb").read()[16:])
        assert code.co_filename == f"/opt/rapids/{rel}"   # where the image holds it, not the build folder
    assert open(_pyc(out, shipped), "rb").read() == b"its own bytes"
    assert not (out / "bin/__pycache__").exists()          # a script outside the library stays a script
    assert compile_missing(out, "/opt/rapids") == 0  # the second pass finds nothing missing


def test_another_python_line_compiles_nothing(tmp_path):
    out = tmp_path / "layer"
    _package(out, "made-from-a-wheel", {"lib/python2.7/site-packages/old/__init__.py": "X = 1\n"})
    assert compile_missing(out, "/opt/rapids") == 0


def test_a_layer_is_made_read_only_to_the_runtime_users_group(tmp_path):
    """An entry point installed 0o775 (and a folder 0o777) would let the runtime user, in group 0,
    replace it; the bits are cleared, execute and setid bits kept, links left alone."""
    import os
    import stat

    from rapidship.builder.pack_layer import read_only_to_others

    (tmp_path / "bin").mkdir(mode=0o777)
    os.chmod(tmp_path / "bin", 0o777)
    tool, data = tmp_path / "bin/tool", tmp_path / "bin/data"
    tool.write_text("#!/opt/rapids/bin/python\n")
    data.write_text("x")
    os.chmod(tool, 0o775)
    os.chmod(data, 0o644)
    (tmp_path / "bin/link").symlink_to("tool")
    assert read_only_to_others(tmp_path) == 2
    assert {p.name: stat.S_IMODE(p.lstat().st_mode) for p in (tmp_path / "bin", tool, data)} == \
        {"bin": 0o755, "tool": 0o755, "data": 0o644}
    assert read_only_to_others(tmp_path) == 0
