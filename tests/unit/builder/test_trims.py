"""The venv trims against the real layouts of the wheels they reach into: each pattern takes what its
reason names and nothing beside it (libnvrtc.so, libnccl.so, libnvvm and the headers NVRTC compiles
against stay), and every reason can travel through the Dockerfile's single-quoted shell words."""

from __future__ import annotations

import pytest

from rapidship.builder.measure_trims import measure
from rapidship.render.dockerfile import PACK_EXCLUDES, VENV_TRIMS

SP = "lib/python3.11/site-packages"
# File lists of nvidia-cuda-nvrtc-cu12 12.9.86, nvidia-cuda-nvcc-cu12 12.9.86, nvidia-libnvcomp-cu12
# 5.3.0.16 and nvidia-nccl-cu12 2.32.3 (the lock's pins), as their RECORDs name them; the sizes are the
# amd64 wheels'.
WHEELS = {
    "nvidia/cuda_nvrtc/lib/libnvrtc.so.12": 106_244_480,
    "nvidia/cuda_nvrtc/lib/libnvrtc.alt.so.12": 106_723_760,
    "nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.9": 7_202_760,
    "nvidia/cuda_nvrtc/lib/libnvrtc-builtins.alt.so.12.9": 7_169_992,
    "nvidia/cuda_nvrtc/include/nvrtc.h": 46_319,
    "nvidia/cuda_nvcc/bin/ptxas": 34_931_056,
    "nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so": 62_581_536,
    "nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc": 486_168,
    "nvidia/cuda_nvcc/include/crt/math_functions.h": 238_284,
    "nvidia/libnvcomp/lib64/libnvcomp.so.5": 44_495_080,
    "nvidia/libnvcomp/lib64/libnvcomp_cpu.so.5": 574_440,
    "nvidia/libnvcomp/bin/nvlzcat": 16_142_216,
    "nvidia/nccl/lib/libnccl.so.2": 473_614_536,
    "nvidia/nccl/lib/libnccl_device.bc": 5_459_448,
    "nvidia/nccl/lib/libnccl_device.ltoir": 10_579_396,
    "nvidia/nccl/include/nccl_device.h": 1_012,
}
GONE = {"nvidia/cuda_nvrtc/lib/libnvrtc.alt.so.12", "nvidia/cuda_nvrtc/lib/libnvrtc-builtins.alt.so.12.9",
        "nvidia/cuda_nvcc/bin/ptxas", "nvidia/libnvcomp/bin/nvlzcat", "nvidia/nccl/lib/libnccl_device.bc",
        "nvidia/nccl/lib/libnccl_device.ltoir"}


def test_the_giant_trims_take_the_unloaded_files_and_keep_what_cudf_and_numba_load(tmp_path):
    env = tmp_path / "opt" / "rapids"
    for rel, size in WHEELS.items():
        path = env / SP / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            f.truncate(size)  # sparse: the sizes are real, the bytes need not be
    record = measure(env, [t.pattern for t in VENV_TRIMS], "find", {t.pattern: t.why for t in VENV_TRIMS})
    assert record["trimmed_bytes"] == sum(WHEELS[rel] for rel in GONE)
    assert record["patterns"]["*/site-packages/nvidia/cuda_nvrtc/lib/*.alt.so*"] == 106_723_760 + 7_169_992
    assert record["patterns"]["*/site-packages/nvidia/cuda_nvcc/bin/ptxas"] == 34_931_056
    assert record["patterns"]["*/site-packages/nvidia/libnvcomp/bin/nvlzcat"] == 16_142_216
    assert record["patterns"]["*/site-packages/nvidia/nccl/lib/libnccl_device.*"] == 5_459_448 + 10_579_396
    assert record["why"] == {t.pattern: t.why for t in VENV_TRIMS}


@pytest.mark.parametrize("trim", PACK_EXCLUDES + VENV_TRIMS, ids=lambda t: t.pattern)
def test_every_trim_says_why_in_words_a_shell_quote_carries(trim):
    assert len(trim.why) > 8, f"{trim.pattern}: say why a runtime never needs it"
    assert "'" not in trim.why + trim.pattern and "\n" not in trim.why


def test_measure_without_reasons_records_empty_ones(tmp_path):
    (tmp_path / "x.a").write_bytes(b"12")
    assert measure(tmp_path, ["*.a"], "find")["why"] == {"*.a": ""}


def test_a_conda_env_of_the_same_wheels_loses_the_same_files(tmp_path):
    """One statement of the trims: conda-pack's excludes reach a wheel-made package's site-packages as
    the venv's find patterns do (the RAPIDS-scale conda image missed its goal by these bytes)."""
    env = tmp_path / "env"
    tests_dir = "cudf/tests/test_io.py"
    headers = "libcudf/include/cudf/types.hpp"
    extra = {tests_dir: 4_000, headers: 9_000, "pyarrow/include/arrow/api.h": 3_000,
             "libcudf/lib64/cmake/cudf/cudf-config.cmake": 2_000, "cudf/__init__.py": 500}
    for rel, size in {**WHEELS, **extra}.items():
        path = env / SP / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            f.truncate(size)
    venv = measure(env, [t.pattern for t in VENV_TRIMS], "find")
    conda = measure(env, [t.pattern for t in PACK_EXCLUDES], "pack")
    gone = sum(WHEELS[rel] for rel in GONE) + sum(extra.values()) - 500
    assert venv["trimmed_bytes"] == conda["trimmed_bytes"] == gone
