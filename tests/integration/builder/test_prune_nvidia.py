"""The pruner on a real NVIDIA CUDA library (libnvjpeg from the nvidia-nvjpeg-cu12 wheel, a test
extra), checked by NVIDIA's own cuobjdump (nvidia-cuda-cuobjdump wheel) and loaded by the real
dynamic loader. No GPU here: nvjpegGetProperty runs on the CPU, the GPU proof is docs/measurements/gpu-smoke.md.
"""

from __future__ import annotations

import ctypes
import json
import re
import subprocess
from collections import Counter
from importlib.util import find_spec
from pathlib import Path

import pytest

from rapidship.builder.prune import files, host

from support.commands import ROOT  # noqa: E402


def nvjpeg() -> Path:
    spec = find_spec("nvidia.nvjpeg")
    assert spec is not None, "nvidia-nvjpeg-cu12 is a test extra: pip install -e '.[test]'"
    return Path(list(spec.submodule_search_locations)[0]) / "lib" / "libnvjpeg.so.12"


@pytest.fixture(scope="module")
def cuobjdump() -> str:
    return host.find_cuobjdump(None)


def listed(cuobjdump: str, path: Path) -> Counter:
    out: Counter = Counter()
    for flag in ("--list-elf", "--list-ptx"):
        run = subprocess.run([cuobjdump, flag, str(path)], capture_output=True, text=True, check=True)
        out.update(re.findall(r"\.(sm_\d+a?)\.(cubin|ptx)", run.stdout))
    return out


def test_real_nvidia_library_pruned_listed_by_cuobjdump_and_loaded(tmp_path, cuobjdump):
    original = nvjpeg()
    out = tmp_path / "libnvjpeg.so.12"
    entry = files.prune_file(original, (80, 90), dest=out, cuobjdump=cuobjdump)
    assert entry["status"] == "pruned", entry
    assert entry["layout"].startswith("segment split")  # NVIDIA's layout: device code mid-segment
    assert entry["verified_by"] == ["rapidship-prove", "cuobjdump"]
    assert out.stat().st_size < 0.5 * original.stat().st_size
    before, after = listed(cuobjdump, original), listed(cuobjdump, out)
    # every container keeps its sm_80 and sm_90 cubins; the few other labels left belong to the one
    # leading container libnvjpeg loads by address, which stays whole
    assert after[("sm_80", "cubin")] == before[("sm_80", "cubin")] > 1
    assert after[("sm_90", "cubin")] == before[("sm_90", "cubin")]
    assert all(after[k] <= 1 for k in after if k[0] not in ("sm_80", "sm_90"))
    lib = ctypes.CDLL(str(out))
    major = ctypes.c_int()
    assert lib.nvjpegGetProperty(0, ctypes.byref(major)) == 0 and major.value == 12


def invoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["invoke", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_invoke_prune_writes_the_record_and_prints_totals(tmp_path):
    record = tmp_path / "prune.json"
    run = invoke("prune", str(nvjpeg()), "--keep", "90", "--out", str(tmp_path / "out"), "--record", str(record))
    assert run.returncode == 0, run.stderr
    totals = json.loads(run.stdout)
    saved = json.loads(record.read_text())
    assert saved["keep"] == [90] and saved["totals"] == totals and totals["pruned"] == 1
    assert (tmp_path / "out" / "libnvjpeg.so.12").stat().st_size == totals["bytes_after"]
    assert nvjpeg().stat().st_size == totals["bytes_before"]  # --out leaves the original alone


@pytest.mark.parametrize("args,where", [
    (["--keep", "81"], "--keep: '81' is not a CUDA compute capability"),
    (["--keep", ""], "--keep: no GPU architectures given"),
    (["--keep", "90", "--cuobjdump", "/bin/true"], "--cuobjdump: /bin/true does not answer --version like NVIDIA's"),
    (["--keep", "90", "--out", "/etc/hostname"], "--out: /etc/hostname is a file"),
    (["--keep", "90", "--jobs", "many"], "--jobs: 'many' is not a whole number"),
])
def test_invoke_prune_bad_flags_get_one_clear_error(args, where):
    run = invoke("prune", str(nvjpeg()), *args)
    assert run.returncode == 2, run.stderr
    assert where in run.stderr and "Traceback" not in run.stderr


def test_invoke_prune_names_a_missing_path():
    run = invoke("prune", "/nonexistent/libfoo.so", "--keep", "90")
    assert run.returncode == 2 and "/nonexistent/libfoo.so: does not exist" in run.stderr
