"""builder/install_layer.py with a real venv's pip and wheels built here (no index: PIP_NO_INDEX):
one layer's wheels land in its own folder laid out as the prefix (scripts in bin/), the trims are
measured then removed as `find -path` would, and the bytecode names each source by its path under
the prefix, where the runtime finds it. An empty lock (an arch that installs nothing in the layer)
makes an empty layer; pip's failure is one line naming the lock."""

from __future__ import annotations

import base64
import hashlib
import json
import marshal
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.commands import ROOT

SCRIPT = ROOT / "src" / "rapidship" / "builder" / "install_layer.py"
SITE = "lib/python3.11/site-packages"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SUITE = b"def test_it():\n    pass\n"   # a test suite the wheel ships: the trims take it
TRIMS = [{"pattern": "*/site-packages/*/tests", "why": "test suites"}, {"pattern": "*.a", "why": "static libraries"}]


def _wheel(folder: Path, name: str) -> Path:
    files = {f"{name}/__init__.py": b"def f():\n    return 1\n", f"{name}/tests/test_it.py": SUITE,
             f"{name}/lib/libx.a": b"!<arch>\n", f"{name}-1.0.data/scripts/{name}-tool": b"#!python\nprint(1)\n",
             f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{name}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    rows = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
            for p, d in files.items()] + [f"{name}-1.0.dist-info/RECORD,,"]
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, d in files.items():
            z.writestr(p, d)
        z.writestr(f"{name}-1.0.dist-info/RECORD", "\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    prefix = tmp_path_factory.mktemp("prefix") / "opt" / "rapids"
    subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True)
    return prefix


def _install(tmp_path: Path, venv: Path, lock_text: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "trims.json").write_text(json.dumps(TRIMS))
    args = [sys.executable, str(SCRIPT), "--prefix", str(venv), "--out", str(tmp_path / "out" / "env"), "--records",
            str(tmp_path / "out" / "records"), "--trims", str(tmp_path / "trims.json")]
    if lock_text is not None:
        (tmp_path / "lock.txt").write_text(lock_text)
        args += ["--lock", str(tmp_path / "lock.txt"), "--arch", "amd64", "--python-version", PY, "--glibc-minor", "36"]
    return subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, PIP_NO_INDEX="1"))


def _pin(wheel: Path) -> str:
    return f"{wheel.name.split('-')[0]} @ {wheel.as_uri()} --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"


def test_a_layer_s_wheels_land_laid_out_as_the_prefix_trimmed_and_compiled_for_it(tmp_path, venv):
    lock = _pin(_wheel(tmp_path, "alpha")) + _pin(_wheel(tmp_path, "beta"))
    proc = _install(tmp_path, venv, lock)
    assert proc.returncode == 0, proc.stderr
    env = tmp_path / "out" / "env"
    site = env / f"lib/python{PY}/site-packages"
    assert (env / "bin" / "alpha-tool").is_file() and not (site / "bin").exists()   # where a venv has scripts
    assert not (site / "alpha" / "tests").exists() and not (site / "beta" / "lib" / "libx.a").exists()
    record = json.loads((tmp_path / "out" / "records" / "trims.json").read_text())
    assert record["patterns"]["*/site-packages/*/tests"] == 2 * len(SUITE)
    assert record["patterns"]["*.a"] == 2 * len(b"!<arch>\n") and record["why"]["*.a"] == "static libraries"
    pyc = next((site / "alpha" / "__pycache__").glob("__init__.*.pyc"))
    code = marshal.loads(pyc.read_bytes()[16:])
    assert code.co_filename == f"{venv}/lib/python{PY}/site-packages/alpha/__init__.py"   # not the layer's folder
    assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b01   # unchecked hash: no mtime in it


def test_an_arch_with_nothing_in_the_layer_makes_it_empty_and_pip_s_failure_names_the_lock(tmp_path, venv):
    proc = _install(tmp_path, venv, "")
    assert proc.returncode == 0, proc.stderr
    assert not any((tmp_path / "out" / "env").iterdir())
    wheel = _wheel(tmp_path, "gamma")
    bad = f"gamma @ {wheel.as_uri()} --hash=sha256:{'0' * 64}\n"   # the wheel is not what the lock pinned
    failed = _install(tmp_path / "x", venv, bad) if (tmp_path / "x").mkdir() is None else None
    assert failed.returncode == 1 and f"pip install -r {tmp_path / 'x' / 'lock.txt'} failed" in failed.stderr
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in failed.stderr and "Traceback" not in failed.stderr
