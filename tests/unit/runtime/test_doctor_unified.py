"""Grace Blackwell (GB10, DGX Spark): one LPDDR5X pool for CPU and GPU. NVML answers NOT_SUPPORTED
for its memory (pynvml raises; nvidia-smi shows "Not Supported"), so the doctor once saw no GPU at
all there. Now the GPU is seen, its memory is the machine's (MemTotal / MemAvailable), and the
device limit is what the host tiers leave of it (the GPU's allocations are not charged to the
cgroup). Grace Hopper (GH200) reports its HBM through NVML like any discrete GPU: no change.
Recorded values, a stand-in NVML; no GB10 here to run on."""

from __future__ import annotations

import sys

import pytest

from support.doctor_facts import facts

from rapidship.runtime import gpu_view
from rapidship.runtime.cgroup_view import CgroupMemory
from rapidship.runtime.command import intent_for
from rapidship.runtime.gpu_view import Gpu, GpuView
from rapidship.runtime.rules import derive, findings_for

GiB = 2**30
GB10_NVML = '''
class NVMLError(Exception):
    def __init__(self, value):
        self.value = value
    def __str__(self):
        return "Not Supported" if self.value == 3 else "Unknown Error"
NVML_ERROR_NOT_SUPPORTED = 3
NVML_DEVICE_MIG_ENABLE = 1
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "580.142"
def nvmlSystemGetCudaDriverVersion_v2(): return 13000
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetMemoryInfo(h): raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
def nvmlDeviceGetMigMode(h): raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
def nvmlDeviceGetCudaComputeCapability(h): return (12, 1)
def nvmlDeviceGetName(h): return "NVIDIA GB10"
def nvmlDeviceGetUUID(h): return "GPU-gb10"
'''


@pytest.fixture
def gb10_nvml(tmp_path, monkeypatch):
    (tmp_path / "pynvml.py").write_text(GB10_NVML)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal:       {128 * GiB // 1024} kB\nMemAvailable:   {100 * GiB // 1024} kB\n")
    real = gpu_view.unified_memory
    monkeypatch.setattr(gpu_view, "unified_memory", lambda: real(str(meminfo)))   # the recorded /proc/meminfo
    yield
    sys.modules.pop("pynvml", None)


def test_a_gpu_without_memory_of_its_own_is_seen_with_the_machines(gb10_nvml):
    view = gpu_view.read_gpus()
    assert view.available, view.reason                     # was: "NVML query failed: Not Supported"
    (g,) = view.gpus
    assert (g.name, g.unified, g.total, g.free, g.cc_major, g.cc_minor) == ("NVIDIA GB10", True, 128 * GiB,
                                                                            100 * GiB, 12, 1)


GB10 = Gpu(0, "NVIDIA GB10", 128 * GiB, 100 * GiB, cc_major=12, cc_minor=1, unified=True)
GH200 = Gpu(0, "NVIDIA GH200 480GB", 96 * GiB, 95 * GiB, cc_major=9, cc_minor=0)


def test_the_device_limit_is_what_the_host_tiers_leave_and_the_doctor_says_why():
    f = facts(cgroup=CgroupMemory(2, 32 * GiB, None, GiB), host_total=128 * GiB, host_available=100 * GiB,
              gpu=GpuView(True, "", "580", "13.0", [GB10]))
    d = derive(f)
    assert d.worker_memory_limit is not None and d.worker_memory_limit > 20 * GiB
    assert d.device_memory_limit == int(100 * GiB * 0.95) - d.worker_memory_limit
    assert "unified memory" in d.device_source
    said = [x for x in findings_for(f, d) if x.topic == "unified-memory"]
    assert said and "spilling device -> host frees no RAM" in said[0].message
    asked = intent_for(["dask", "cuda", "worker", "tcp://s:8786", "--device-memory-limit", "90GB"], {})
    warned = [x.message for x in findings_for(f, d, asked) if x.level == "WARNING" and x.topic == "device-limit"]
    assert warned and "plus the host tiers is more than the free unified memory" in warned[0]


def test_grace_hopper_keeps_the_discrete_rule():
    f = facts(cgroup=CgroupMemory(2, 32 * GiB, None, GiB), host_total=480 * GiB, host_available=400 * GiB,
              gpu=GpuView(True, "", "580", "13.0", [GH200]))
    d = derive(f)
    assert d.device_memory_limit == int(96 * GiB * 0.8) and "unified" not in d.device_source
    assert not [x for x in findings_for(f, d) if x.topic == "unified-memory"]
