"""builder/split_layers.py on a venv laid out as the pip builder leaves it: each file goes to the part
of the distribution whose RECORD names it (bytecode with its source), the rest and every folder to
python; a file of a part the image does not copy stops the build."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from support.commands import ROOT

SCRIPT = ROOT / "src" / "rapidship" / "builder" / "split_layers.py"
SITE = "lib/python3.11/site-packages"


def _dist(prefix: Path, folder: str, name: str, files: dict[str, bytes]) -> None:
    info = prefix / SITE / folder
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n\nbody\n")
    rows = []
    for rel, data in files.items():
        path = Path(os.path.normpath(prefix / SITE / rel))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        rows.append(f"{rel},sha256=x,{len(data)}")
    (info / "RECORD").write_text("\n".join(rows + [f"{folder}/RECORD,,", f"{folder}/METADATA,,"]) + "\n")


def _venv(tmp: Path, jitlink: str = "12.9.86") -> Path:
    prefix = tmp / "out" / "opt" / "rapids"
    _dist(prefix, "nvidia_cublas_cu12-12.9.1.4.dist-info", "nvidia-cublas-cu12",
          {"nvidia/cublas/lib/libcublas.so.12": b"\x7fELF cublas"})
    _dist(prefix, f"nvidia_nvjitlink_cu12-{jitlink}.dist-info", "nvidia-nvjitlink-cu12",
          {"nvidia/nvjitlink/lib/libnvJitLink.so.12": b"\x7fELF jitlink"})
    _dist(prefix, "cudf_cu12-26.10.2.dist-info", "cudf-cu12", {"cudf/__init__.py": b"x = 1\n"})
    _dist(prefix, "dask_cuda-26.10.0.dist-info", "dask-cuda", {"dask_cuda/__init__.py": b"y = 1\n"})
    _dist(prefix, "dask-2026.8.0.dist-info", "dask", {"dask/__init__.py": b"z = 1\n", "../../../bin/dask": b"#!py\n"})
    _dist(prefix, "numpy-2.4.6.dist-info", "numpy", {"numpy/__init__.py": b"n = 1\n",
                                                     "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"})
    (prefix / SITE / "cudf" / "__pycache__").mkdir()
    (prefix / SITE / "cudf" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"pyc")
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (prefix / "share" / "empty").mkdir(parents=True)
    (prefix / SITE / "cudf" / "libcublas-copy.so").symlink_to("../nvidia/cublas/lib/libcublas.so.12")
    (prefix / SITE / "cudf").chmod(0o750)
    return prefix


CUDA_PARTS = "cuda/nvidia-cublas-cu12,cuda/nvidia-nvjitlink-cu12"


def _split(tmp: Path, parts: str = f"{CUDA_PARTS},rapids,compiled,python") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--prefix", str(tmp / "out" / "opt" / "rapids"), "--out",
                           str(tmp / "layers"), "--parts", parts, "--record", str(tmp / "layers.json")],
                          capture_output=True, text=True, check=False)


def test_each_file_goes_to_its_distributions_part(tmp_path):
    _venv(tmp_path)
    proc = _split(tmp_path)
    assert proc.returncode == 0, proc.stderr
    part = lambda name: tmp_path / "layers" / name  # noqa: E731
    # each CUDA wheel its own part: a patch of nvJitLink changes that layer, not cuBLAS's
    assert (part("cuda/nvidia-cublas-cu12") / SITE / "nvidia/cublas/lib/libcublas.so.12").read_bytes() == b"\x7fELF cublas"
    assert (part("cuda/nvidia-nvjitlink-cu12") / SITE / "nvidia/nvjitlink/lib/libnvJitLink.so.12").is_file()
    assert not (part("cuda/nvidia-cublas-cu12") / SITE / "nvidia/nvjitlink").exists()
    assert (part("rapids") / SITE / "cudf/__init__.py").is_file()
    assert (part("rapids") / SITE / "cudf/__pycache__/__init__.cpython-311.pyc").is_file()  # with its source
    assert (part("rapids") / SITE / "dask_cuda/__init__.py").is_file()
    assert (part("python") / SITE / "dask/__init__.py").is_file() and (part("python") / "bin/dask").is_file()
    # a distribution with a shared object goes whole (its .py files too) to compiled; a pure one stays in python
    assert (part("compiled") / SITE / "numpy/__init__.py").is_file()
    assert (part("compiled") / SITE / "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so").is_file()
    assert (part("python") / "pyvenv.cfg").is_file() and (part("python") / "share/empty").is_dir()
    # an unowned symlink (dedupe's) stays a link, in python; the folder it sits in keeps its mode everywhere
    assert os.readlink(part("python") / SITE / "cudf/libcublas-copy.so") == "../nvidia/cublas/lib/libcublas.so.12"
    assert stat.S_IMODE((part("rapids") / SITE / "cudf").stat().st_mode) == 0o750
    assert not (tmp_path / "out" / "opt" / "rapids").exists()  # everything moved, nothing copied
    record = json.loads((tmp_path / "layers.json").read_text())
    assert record["parts"] == ["cuda/nvidia-cublas-cu12", "cuda/nvidia-nvjitlink-cu12", "rapids", "compiled", "python"]
    assert record["compiled"]["distributions"] == ["numpy"] and record["python"]["distributions"] == ["dask"]
    cublas = record["cuda/nvidia-cublas-cu12"]
    assert cublas["distributions"] == ["nvidia-cublas-cu12"] and cublas["files"] == 3  # + its RECORD, METADATA
    assert record["rapids"]["distributions"] == ["cudf-cu12", "dask-cuda"]
    files = sum(1 for p in (tmp_path / "layers").rglob("*") if p.is_file() or p.is_symlink())
    assert files == sum(record[p]["files"] for p in record["parts"])


def _tree(root: Path) -> list[tuple[str, int]]:
    """Every path under root with its mode: what a layer of it holds besides file contents."""
    return sorted((str(p.relative_to(root)), p.lstat().st_mode) for p in root.rglob("*"))


def test_a_cuda_wheel_bump_changes_its_part_only_not_the_folders_of_the_python_part(tmp_path):
    # release N and N+1 differ in one CUDA wheel's version: its dist-info folder is named after it
    for release, version in (("n", "12.9.86"), ("n1", "12.9.41")):
        _venv(tmp_path / release, jitlink=version)
        assert _split(tmp_path / release).returncode == 0
    python_n, python_n1 = (_tree(tmp_path / r / "layers" / "python") for r in ("n", "n1"))
    assert python_n == python_n1
    assert not any("dist-info" in path and "nvjitlink" in path for path, _ in python_n)
    assert not (tmp_path / "n" / "layers" / "python" / SITE / "nvidia").exists()  # the CUDA parts' folder
    assert (tmp_path / "n" / "layers" / "python" / "share" / "empty").is_dir()  # empty to begin with: kept
    assert _tree(tmp_path / "n" / "layers" / "cuda/nvidia-cublas-cu12") == \
        _tree(tmp_path / "n1" / "layers" / "cuda/nvidia-cublas-cu12")


def test_a_file_of_a_part_the_image_does_not_copy_stops_the_build(tmp_path):
    _venv(tmp_path)
    proc = _split(tmp_path, parts="python")
    assert proc.returncode == 2
    assert "belong to a part this image does not copy (--parts python)" in proc.stderr
    assert (tmp_path / "out" / "opt" / "rapids" / "pyvenv.cfg").is_file()  # nothing moved
    assert _split(tmp_path, parts=f"{CUDA_PARTS},rapids,compiled").returncode == 2  # python is always copied
    lumped = _split(tmp_path, parts="cuda,rapids,compiled,python")  # the CUDA wheels are named one by one
    assert lumped.returncode == 2 and "--parts cuda,rapids,compiled,python: name python once" in lumped.stderr
    missing = _split(tmp_path, parts="cuda/nvidia-cublas-cu12,rapids,compiled,python")  # a wheel the render did not name
    assert missing.returncode == 2 and "(cuda/nvidia-nvjitlink-cu12)" in missing.stderr


def test_a_named_cuda_wheel_the_env_lacks_is_an_empty_part(tmp_path):
    _venv(tmp_path)
    proc = _split(tmp_path, parts=f"{CUDA_PARTS},cuda/nvidia-cufile-cu12,rapids,compiled,python")
    assert proc.returncode == 0, proc.stderr
    empty = tmp_path / "layers" / "cuda" / "nvidia-cufile-cu12"
    assert empty.is_dir() and not any(empty.iterdir())  # still a folder: the image's COPY of it has a source
    assert json.loads((tmp_path / "layers.json").read_text())["cuda/nvidia-cufile-cu12"]["files"] == 0
