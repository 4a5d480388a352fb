"""The GPU guard holds whatever starts the process: a fresh interpreter with a stand-in NVML (an
H200, compute capability 9.0) and a stand-in CUDA package, the image's prune record either covering
that GPU or not. (On the real H200 with CuPy: docs/measurements/gpu-smoke.md.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.commands import ROOT

FAKE_NVML = '''
class NVMLError(Exception):
    pass
NVML_DEVICE_MIG_ENABLE = 1
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "580.1"
def nvmlSystemGetCudaDriverVersion_v2(): return 13000
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return i
class _Mem: total = 143 * 2**30; free = 142 * 2**30
def nvmlDeviceGetMemoryInfo(h): return _Mem()
def nvmlDeviceGetMigMode(h): raise NVMLError("not supported")
def nvmlDeviceGetCudaComputeCapability(h): return (9, 0)
def nvmlDeviceGetName(h): return "NVIDIA H200"
def nvmlDeviceGetUUID(h): return "GPU-1234"
'''


@pytest.fixture
def fakes(tmp_path) -> Path:
    (tmp_path / "pynvml.py").write_text(FAKE_NVML)
    (tmp_path / "cupy.py").write_text("print('cupy imported')\n")
    (tmp_path / "json_ok.py").write_text("print('no CUDA package')\n")
    return tmp_path


def run(fakes: Path, keep, code: str, **env) -> subprocess.CompletedProcess:
    record = fakes / "prune.json"
    record.write_text(json.dumps({"keep": keep}))
    environ = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    environ.update(PYTHONPATH=f"{fakes}{os.pathsep}{ROOT / 'src'}", RAPIDSHIP_PRUNE_RECORD=str(record), **env)
    return subprocess.run([sys.executable, "-c", "from rapidship.runtime import gpu_guard; gpu_guard.install(); " + code],
                          capture_output=True, text=True, env=environ)


def test_an_uncovered_gpu_refuses_the_first_cuda_import(fakes):
    proc = run(fakes, [80], "import cupy")
    assert proc.returncode == 1 and "cupy imported" not in proc.stdout
    assert "ImportError: rapids GPU guard: GPU 0 NVIDIA H200 has compute capability 9.0, but this image's device " \
           "code was pruned to sm_80" in proc.stderr, proc.stderr


def test_a_covered_gpu_imports_and_other_modules_are_never_looked_at(fakes):
    assert "cupy imported" in run(fakes, [80, 90], "import cupy").stdout
    assert "no CUDA package" in run(fakes, [80], "import json_ok").stdout  # no check without a CUDA import
    assert "cupy imported" in run(fakes, None, "import cupy").stdout       # nothing pruned: nothing to check


def test_the_guard_obeys_visible_devices_and_its_switch(fakes):
    assert "cupy imported" in run(fakes, [80], "import cupy", CUDA_VISIBLE_DEVICES="").stdout  # no visible GPU
    assert "cupy imported" in run(fakes, [80], "import cupy", RAPIDSHIP_GPU_GUARD="off").stdout


def test_the_pth_line_installs_the_guard_and_costs_little(tmp_path):
    """The line the image's env carries, read by site.py as a real .pth file."""
    from rapidship.runtime.gpu_guard import PTH_LINE, PTH_NAME

    site_dir = tmp_path / "site"
    pkg = tmp_path / "opt" / "rapids_runtime"
    pkg.mkdir(parents=True)
    for src in (ROOT / "src" / "rapidship" / "runtime").glob("*.py"):   # the package as the image copies it
        (pkg / src.name).write_text(src.read_text())
    site_dir.mkdir()
    (site_dir / PTH_NAME).write_text(PTH_LINE.replace("/opt/rapidship", str(tmp_path / "opt")))
    code = f"import site; site.addsitedir({str(site_dir)!r}); import sys; " \
           "print([type(f).__name__ for f in sys.meta_path][0])"
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "GuardFinder", proc.stderr
    assert "views" not in subprocess.run([sys.executable, "-S", "-c", code.replace(
        "print([type(f).__name__ for f in sys.meta_path][0])", "print(list(sys.modules))")],
        capture_output=True, text=True).stdout.split("rapids_runtime.gpu_guard")[1][:200]  # doctor not loaded yet
    t0 = time.perf_counter()
    for _ in range(5):
        subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, check=True)
    assert (time.perf_counter() - t0) / 5 < 2.0  # an interpreter start, not a measurement (docs/measurements/benchmarks.md)


def test_the_guarded_names_come_from_every_distribution_that_ships_device_code(tmp_path):
    """From the prune record's files and the distributions' RECORDs: all of a distribution's top-level
    names (cupy brings cupy_backends and cupyx), none of a distribution without device code."""
    site = tmp_path / "lib" / "python3.11" / "site-packages"

    def dist(name: str, files: list[str]) -> None:
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "RECORD").write_text("".join(f"{f},sha256=x,1\n" for f in files + [f"{info.name}/RECORD"]))

    dist("cupy_cuda12x", ["cupy/__init__.py", "cupy/_core/core.so", "cupy_backends/cuda/api.so", "cupyx/__init__.py"])
    dist("libnvforest", ["nvforest/__init__.py", "libnvforest/lib64/libnvforest.so"])
    dist("pandas", ["pandas/__init__.py", "pandas/_libs/lib.so"])
    dist("numba_cuda", ["numba_cuda/__init__.py", "_numba_cuda_helper.py"])
    record = tmp_path / "prune.json"
    record.write_text(json.dumps({"keep": [80, 90], "files": [
        {"path": "lib/python3.11/site-packages/cupy/_core/core.so"},
        {"path": "lib/python3.11/site-packages/libnvforest/lib64/libnvforest.so"},
        {"path": "lib/python3.11/site-packages/_numba_cuda_helper.py"}]}))
    from rapidship.runtime.gpu_guard import GUARDED, derive

    assert derive(str(tmp_path), str(record)) == ["_numba_cuda_helper", "cupy", "cupy_backends", "cupyx",
                                                 "libnvforest", "numba_cuda", "nvforest"]
    assert derive(str(tmp_path), str(tmp_path / "missing.json")) == []
    assert {"cupy_backends", "nvforest"} <= GUARDED


def test_names_written_at_build_time_are_guarded_too(fakes, tmp_path):
    (fakes / "vendor_gpu_lib.py").write_text("print('vendor imported')\n")
    names = tmp_path / "guarded.txt"
    names.write_text("vendor_gpu_lib\nnot a name\n")
    from rapidship.runtime.gpu_guard import _derived

    assert _derived(str(names)) == {"vendor_gpu_lib"}  # a line that is no name is skipped
    code = (f"from rapidship.runtime import gpu_guard; import sys; sys.meta_path.insert(0, "
            f"gpu_guard.GuardFinder(gpu_guard.GUARDED | gpu_guard._derived({str(names)!r}))); import vendor_gpu_lib")
    record = fakes / "prune.json"
    record.write_text(json.dumps({"keep": [80]}))
    environ = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    environ.update(PYTHONPATH=f"{fakes}{os.pathsep}{ROOT / 'src'}", RAPIDSHIP_PRUNE_RECORD=str(record))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ)
    assert proc.returncode == 1 and "vendor imported" not in proc.stdout and "rapids GPU guard" in proc.stderr
