"""builder/split_layers.py on a venv laid out as the pip builder leaves it, with a plan made by the
render's planner: each file goes to the layer of the distribution whose RECORD names it (bytecode with
its source), the rest and every folder to venv; a file of a distribution the plan does not name stops
the build."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from support.commands import ROOT

from rapidship.render.layer_plan import Distribution, plan_layers

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


def _plan(tmp: Path, drop: str = "") -> Path:
    """The planner's own plan for the venv's distributions (wheel sizes made up: cuBLAS and numpy large)."""
    sizes = {"nvidia-cublas-cu12": (600_000_000, False), "nvidia-nvjitlink-cu12": (40_000_000, False),
             "cudf-cu12": (2_800_000, False), "dask-cuda": (115_000, False), "dask": (1_500_000, True),
             "numpy": (18_000_000, False), "toolz": (60_000, True)}
    dists = [Distribution(n, "1", size, pure) for n, (size, pure) in sizes.items() if n != drop]
    path = tmp / "layer-plan.json"
    path.write_text(json.dumps(plan_layers(dists, 80).to_json("locks/x/wheel-sizes.json")))
    return path


def _split(tmp: Path, plan: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--prefix", str(tmp / "out" / "opt" / "rapids"), "--out",
                           str(tmp / "layers"), "--plan", str(plan or _plan(tmp)), "--record", str(tmp / "layers.json")],
                          capture_output=True, text=True, check=False)


def test_each_file_goes_to_its_distributions_layer(tmp_path):
    _venv(tmp_path)
    proc = _split(tmp_path)
    assert proc.returncode == 0, proc.stderr
    part = lambda name: tmp_path / "layers" / name  # noqa: E731
    # each large wheel its own layer: a patch of nvJitLink changes that layer, not cuBLAS's
    assert (part("cuda/nvidia-cublas-cu12") / SITE / "nvidia/cublas/lib/libcublas.so.12").read_bytes() == b"\x7fELF cublas"
    assert (part("cuda/nvidia-nvjitlink-cu12") / SITE / "nvidia/nvjitlink/lib/libnvJitLink.so.12").is_file()
    assert not (part("cuda/nvidia-cublas-cu12") / SITE / "nvidia/nvjitlink").exists()
    assert (part("rapids/cudf-cu12") / SITE / "cudf/__init__.py").is_file()
    assert (part("rapids/cudf-cu12") / SITE / "cudf/__pycache__/__init__.cpython-311.pyc").is_file()  # with its source
    assert (part("rapids/small_1") / SITE / "dask_cuda/__init__.py").is_file()  # small: grouped with its kind
    assert (part("python/dask") / SITE / "dask/__init__.py").is_file() and (part("python/dask") / "bin/dask").is_file()
    assert (part("compiled/numpy") / SITE / "numpy/__init__.py").is_file()  # a distribution goes whole
    assert (part("compiled/numpy") / SITE / "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so").is_file()
    assert (part("venv") / "pyvenv.cfg").is_file() and (part("venv") / "share/empty").is_dir()
    # an unowned symlink (dedupe's) stays a link, in venv; the folder it sits in keeps its mode everywhere
    assert os.readlink(part("venv") / SITE / "cudf/libcublas-copy.so") == "../nvidia/cublas/lib/libcublas.so.12"
    assert stat.S_IMODE((part("rapids/cudf-cu12") / SITE / "cudf").stat().st_mode) == 0o750
    assert not (tmp_path / "out" / "opt" / "rapids").exists()  # everything moved, nothing copied
    record = json.loads((tmp_path / "layers.json").read_text())
    plan = json.loads((tmp_path / "layer-plan.json").read_text())
    assert [layer["name"] for layer in record["layers"]] == [layer["name"] for layer in plan["layers"]]
    by_name = {layer["name"]: layer for layer in record["layers"]}
    assert by_name["python/small_1"]["why"].startswith("grouped: pure Python")  # toolz: planned, none installed
    cublas = by_name["cuda/nvidia-cublas-cu12"]
    assert cublas["why"] == "alone: 600.0 MB wheel" and cublas["files"] == 3  # + its RECORD, METADATA
    assert cublas["distributions"][0]["files"] == 3 and cublas["distributions"][0]["bytes"] == cublas["bytes"]
    assert [d["name"] for d in by_name["rapids/small_1"]["distributions"]] == ["dask-cuda"]
    files = sum(1 for p in (tmp_path / "layers").rglob("*") if p.is_file() or p.is_symlink())
    assert files == sum(layer["files"] for layer in record["layers"])


def _tree(root: Path) -> list[tuple[str, int]]:
    """Every path under root with its mode: what a layer of it holds besides file contents."""
    return sorted((str(p.relative_to(root)), p.lstat().st_mode) for p in root.rglob("*"))


def test_a_cuda_wheel_bump_changes_its_layer_only_not_the_folders_of_the_venv_layer(tmp_path):
    # release N and N+1 differ in one CUDA wheel's version: its dist-info folder is named after it
    for release, version in (("n", "12.9.86"), ("n1", "12.9.41")):
        _venv(tmp_path / release, jitlink=version)
        assert _split(tmp_path / release).returncode == 0
    venv_n, venv_n1 = (_tree(tmp_path / r / "layers" / "venv") for r in ("n", "n1"))
    assert venv_n == venv_n1
    assert not any("dist-info" in path and "nvjitlink" in path for path, _ in venv_n)
    assert not (tmp_path / "n" / "layers" / "venv" / SITE / "nvidia").exists()  # the CUDA layers' folder
    assert (tmp_path / "n" / "layers" / "venv" / "share" / "empty").is_dir()  # empty to begin with: kept
    assert _tree(tmp_path / "n" / "layers" / "cuda/nvidia-cublas-cu12") == \
        _tree(tmp_path / "n1" / "layers" / "cuda/nvidia-cublas-cu12")


def test_a_file_of_a_distribution_the_plan_does_not_name_stops_the_build(tmp_path):
    _venv(tmp_path)
    proc = _split(tmp_path, _plan(tmp_path, drop="numpy"))
    assert proc.returncode == 2
    assert "of 1 distribution(s) the layer plan" in proc.stderr and "does not name: numpy" in proc.stderr
    assert "render the variant again (invoke render)" in proc.stderr and "Traceback" not in proc.stderr
    assert (tmp_path / "out" / "opt" / "rapids" / "pyvenv.cfg").is_file()  # nothing moved
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    broken = _split(tmp_path, bad)
    assert broken.returncode == 2 and f"--plan {bad}: not a layer plan" in broken.stderr


def test_a_planned_distribution_the_env_lacks_is_an_empty_layer(tmp_path):
    _venv(tmp_path)  # toolz is planned (a pin another arch installs) but not installed
    proc = _split(tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "layers.json").read_text())
    only_toolz = next(layer for layer in record["layers"] if [d["name"] for d in layer["distributions"]] == ["toolz"])
    empty = tmp_path / "layers" / only_toolz["name"]
    assert empty.is_dir() and not any(empty.iterdir())  # still a folder: the image's COPY of it has a source
    assert only_toolz["files"] == 0
