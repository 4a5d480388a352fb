"""`rapids-doctor --preflight -- dask cuda worker ...` against what the GPU has: a device limit or an
RMM pool above the card is FATAL, above what is free now a WARNING the quiet preflight prints. NVML
is a stand-in answering the figures recorded on an H100 (docs/measurements/gpu-alerts-2026-12-07:
85,520,809,984 bytes; free 521,142,272 with another process filling the card; 6,942,162,944 beside
a worker with a 90 % async pool), read through the real gpu_view and the real CLI."""

from __future__ import annotations

import sys

import pytest

from rapidship.runtime import doctor, views
from rapidship.runtime.cgroup_view import CgroupMemory

GiB = 2**30
TOTAL, FULL, BESIDE_POOL, IDLE = 85_520_809_984, 521_142_272, 6_942_162_944, 84_465_090_560

NVML = '''
class NVMLError(Exception):
    pass
NVML_DEVICE_MIG_ENABLE = 1
class _Mem:
    total, free = {total}, {free}
    used = total - free
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "580.159.04"
def nvmlSystemGetCudaDriverVersion_v2(): return 13000
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetMemoryInfo(h): return _Mem()
def nvmlDeviceGetMigMode(h): return (0, 0)
def nvmlDeviceGetCudaComputeCapability(h): return (9, 0)
def nvmlDeviceGetName(h): return "NVIDIA H100 80GB HBM3"
def nvmlDeviceGetUUID(h): return "GPU-bf8a820e"
'''


@pytest.fixture
def h100(tmp_path, monkeypatch):
    """The recorded H100 with `free` bytes free; a 16 GiB container, a good spill dir."""
    def card(free: int):
        (tmp_path / "pynvml.py").write_text(NVML.format(total=TOTAL, free=free))
        sys.modules.pop("pynvml", None)
    spill = tmp_path / "spill"
    spill.mkdir(mode=0o700)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RAPIDS_SPILL_DIR", str(spill))
    monkeypatch.setenv("DASK_TEMPORARY_DIRECTORY", str(spill))
    monkeypatch.setattr(views, "read_cgroup", lambda: CgroupMemory(2, 16 * GiB, None, GiB))
    yield card, str(spill)
    sys.modules.pop("pynvml", None)


def preflight(capsys, spill: str, *flags: str) -> tuple[int, list[str]]:
    rc = doctor.main(["--preflight", "--", "dask", "cuda", "worker", "tcp://scheduler:8786", "--memory-limit", "4GB",
                      "--local-directory", spill, *flags])
    out = capsys.readouterr()
    assert out.out == ""
    return rc, out.err.strip().splitlines()


def test_a_device_limit_16x_the_free_memory_is_said_at_preflight(h100, capsys):
    card, spill = h100
    card(FULL)
    rc, err = preflight(capsys, spill, "--device-memory-limit", "8GB")
    assert rc == 0 and len(err) >= 1, err
    said = [ln for ln in err if "--device-memory-limit" in ln]
    assert said and said[0].startswith("rapids-doctor: WARNING: dask cuda worker --device-memory-limit 7.45 GiB is "
                                       "15.4x the 497.00 MiB free on GPU 0 NVIDIA H100 80GB HBM3"), err


def test_a_pool_above_the_gpu_is_fatal_naming_the_flag_and_the_figures(h100, capsys):
    card, spill = h100
    card(IDLE)
    rc, err = preflight(capsys, spill, "--rmm-pool-size", "100GB", "--rmm-async")
    assert rc == doctor.FATAL_EXIT, err
    assert err[-1].startswith("rapids-doctor: FATAL: dask cuda worker --rmm-pool-size 93.13 GiB is above what GPU 0 "
                              "NVIDIA H100 80GB HBM3 has (79.65 GiB)"), err


def test_a_pool_above_the_free_memory_is_said_at_preflight(h100, capsys):
    card, spill = h100
    card(BESIDE_POOL)   # another worker's 90 % async pool holds the card
    rc, err = preflight(capsys, spill, "--rmm-pool-size", "20GB")
    assert rc == 0, err
    said = [ln for ln in err if "--rmm-pool-size" in ln]
    assert said and said[0].startswith("rapids-doctor: WARNING: dask cuda worker --rmm-pool-size 18.63 GiB is above "
                                       "the 6.47 GiB free on GPU 0 NVIDIA H100 80GB HBM3"), err


@pytest.mark.parametrize("flags", [("--device-memory-limit", "0.8", "--rmm-pool-size", "0.9", "--rmm-async"),
                                   ("--device-memory-limit", "60GB", "--rmm-pool-size", "70GB"),
                                   ()])
def test_limits_and_pools_the_gpu_has_room_for_are_quiet(h100, capsys, flags):
    card, spill = h100
    card(IDLE)
    assert preflight(capsys, spill, *flags) == (0, [])
