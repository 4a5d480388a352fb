"""A shared GPU: a MIG instance or a memory quota a sharing plugin sets. The doctor once read the
card: under CUDA_VISIBLE_DEVICES=MIG-<uuid> it saw no GPU at all (the entry is no index and no
GPU-UUID), and a HAMi / Volcano / MPS quota was invisible, so the device limit and RMM pool were
sized to the card and the worker OOMed on its slice while the card looked free.

The NVML here is a stand-in module built from NVML's documented MIG API (nvmlDeviceGetMigMode,
nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetMemoryInfo and
nvmlDeviceGetName / nvmlDeviceGetUUID on the MIG handle): an H100 80GB with MIG on, cut into
7 x 1g.10gb, and an A100 40GB without MIG for the quotas. The figures are the profiles' sizes, not
recorded from a card: no real GPU's mode is changed by a test."""

from __future__ import annotations

import json
import sys

import pytest

from rapidship.runtime import doctor, gpu_view, views
from rapidship.runtime.cgroup_view import CgroupMemory
from rapidship.runtime.command import intent_for
from rapidship.runtime.rules import derive, findings_for
from support.doctor_facts import facts

GiB, MiB = 2**30, 2**20
H100_TOTAL = 81559 * MiB
SLICE = 9856 * MiB      # a 1g.10gb instance's memory (the profile's "10gb", less what the instance keeps)

STAND_IN_NVML = '''
import json, os
_CARD = json.loads(os.environ["STAND_IN_NVML_CARD"])
class NVMLError(Exception):
    def __init__(self, value):
        self.value = value
    def __str__(self):
        return {3: "Not Supported", 13: "Not Found"}.get(self.value, "Unknown Error")
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 13
NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE = 0, 1
class _Mem:
    def __init__(self, total, used):
        self.total, self.used, self.free = total, used, total - used
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "570.124.06"
def nvmlSystemGetCudaDriverVersion_v2(): return 12080
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return ("gpu", i)
def nvmlDeviceGetName(h):
    if h[0] == "mig":
        return _CARD["name"] + " MIG " + _CARD["profile"]
    return _CARD["name"]
def nvmlDeviceGetUUID(h):
    return "MIG-%s-%d" % (_CARD["mig_uuid"], h[2]) if h[0] == "mig" else _CARD["uuid"]
def nvmlDeviceGetMemoryInfo(h):
    if h[0] == "mig":
        return _Mem(_CARD["slice"], _CARD["slice_used"][h[2]])
    return _Mem(_CARD["total"], _CARD["used"])
def nvmlDeviceGetMigMode(h):
    if h[0] == "mig":
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    on = int(bool(_CARD["slice_used"]))
    return [on, on]
def nvmlDeviceGetMaxMigDeviceCount(h): return 7
def nvmlDeviceGetMigDeviceHandleByIndex(h, j):
    if j >= len(_CARD["slice_used"]):
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return ("mig", h[1], j)
def nvmlDeviceGetGpuInstanceId(h): return 7 + h[2]
def nvmlDeviceGetCudaComputeCapability(h): return _CARD["cc"]
'''

H100_MIG = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5c8a1f9e-h100", "total": H100_TOTAL, "used": 0,
            "cc": [9, 0], "profile": "1g.10gb", "mig_uuid": "3b1d2c7a-0000", "slice": SLICE,
            "slice_used": [0, 2 * GiB, 0, 0, 0, 0, 0]}
A100 = {"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-a100", "total": 40 * GiB, "used": 0, "cc": [8, 0],
        "profile": "", "mig_uuid": "", "slice": 0, "slice_used": []}
H100 = {**H100_MIG, "slice_used": []}      # the same card without MIG: time-slicing or MPS shares the whole of it
SHARE_ENVS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_MEMORY_LIMIT_0",
              "VOLCANO_GPU_ALLOCATED", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA_MPS_PIPE_DIRECTORY", "RAPIDS_GPU_SHARE")


@pytest.fixture
def nvml(tmp_path, monkeypatch):
    """Install the stand-in NVML; call it with the card's answers."""
    (tmp_path / "pynvml.py").write_text(STAND_IN_NVML)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    for name in SHARE_ENVS:
        monkeypatch.delenv(name, raising=False)

    def card(answers: dict, **env):
        monkeypatch.setenv("STAND_IN_NVML_CARD", json.dumps(answers))
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        sys.modules.pop("pynvml", None)
        return gpu_view.read_gpus()
    yield card
    sys.modules.pop("pynvml", None)


def _judged(view, command=None):
    f = facts(cgroup=CgroupMemory(2, 32 * GiB, None, GiB), gpu=view)
    d = derive(f)
    return d, findings_for(f, d, intent_for(command, {}) if command else None)


# ---- MIG ----

def test_a_worker_under_cuda_visible_devices_mig_sees_its_instance_not_no_gpu(nvml):
    view = nvml(H100_MIG, CUDA_VISIBLE_DEVICES="MIG-3b1d2c7a-0000-1")
    assert view.available, view.reason
    (g,) = view.gpus                                # was: no GPU at all ("0 of 1 GPU(s) visible")
    assert (g.total, g.free) == (SLICE, SLICE - 2 * GiB)
    assert g.share == "MIG 1g.10gb slice 0/1 of GPU 0 NVIDIA H100 80GB HBM3"
    assert g.mig_slices[0]["uuid"] == "MIG-3b1d2c7a-0000-1" and g.mig_slices[0]["gpu_instance"] == 8


def test_the_device_limit_and_pool_are_the_slices_share_and_the_doctor_names_it(nvml):
    view = nvml(H100_MIG, CUDA_VISIBLE_DEVICES="MIG-3b1d2c7a-0000-0")
    d, said = _judged(view)
    assert d.device_memory_limit == int(SLICE * 0.8)                      # 7.70 GiB, not 63.7 GiB of the card
    assert d.rmm_pool_size == int(SLICE * 0.9) // (256 * MiB) * (256 * MiB)
    assert "MIG 1g.10gb slice 0/0" in d.device_source
    ok = [x.message for x in said if x.topic == "gpu-share"]
    assert ok == [f"sized to MIG 1g.10gb slice 0/0 of GPU 0 NVIDIA H100 80GB HBM3: device_memory_limit 7.70 GiB, "
                  "rmm_pool_size 8.50 GiB, dask-cuda spills device -> host above the device limit"]


def test_a_device_limit_above_the_slice_is_fatal_and_names_the_slice(nvml):
    view = nvml(H100_MIG, CUDA_VISIBLE_DEVICES="MIG-3b1d2c7a-0000-0")
    _, said = _judged(view, ["dask", "cuda", "worker", "tcp://s:8786", "--device-memory-limit", "40GB"])
    fatal = [x.message for x in said if x.level == "FATAL" and x.topic == "device-limit"]
    assert len(fatal) == 1 and "above what MIG 1g.10gb slice 0/0 of GPU 0 NVIDIA H100 80GB HBM3 has (9.62 GiB)" \
        in fatal[0]
    _, fine = _judged(view, ["dask", "cuda", "worker", "tcp://s:8786", "--device-memory-limit", "7GB"])
    assert not [x for x in fine if x.level == "FATAL"]


def test_the_instance_a_device_plugin_named_in_nvidia_visible_devices_is_the_one_sized(nvml):
    view = nvml(H100_MIG, NVIDIA_VISIBLE_DEVICES="MIG-3b1d2c7a-0000-1")
    (g,) = view.gpus
    assert g.free == SLICE - 2 * GiB and "slice 0/1" in g.share
    _, said = _judged(view)      # 2 GiB of the instance in use by another process: said, for the instance
    warned = [x.message for x in said if x.topic == "gpu" and x.level == "WARNING"]
    assert warned and warned[0].startswith("MIG 1g.10gb slice 0/1 of GPU 0 NVIDIA H100 80GB HBM3 has only 7.62 GiB")


def test_mig_on_without_an_instance_named_sizes_to_the_smallest_and_warns(nvml):
    view = nvml(H100_MIG)
    (g,) = view.gpus
    assert g.mig_mode and len(g.mig_slices) == 7 and not g.share
    d, said = _judged(view)
    assert d.device_memory_limit == int((SLICE - 2 * GiB) * 0.95)     # the fullest instance, what is free there
    warned = [x.message for x in said if x.topic == "gpu-share" and x.level == "WARNING"]
    assert len(warned) == 1 and "no instance is named" in warned[0] and "CUDA_VISIBLE_DEVICES=MIG-<uuid>" in warned[0]


def test_an_instance_that_is_not_there_leaves_no_gpu_as_cuda_would(nvml):
    view = nvml(H100_MIG, CUDA_VISIBLE_DEVICES="MIG-nonexistent")
    assert view.available and view.gpus == [] and "0 of 1 GPU(s) visible" in view.reason


def test_a_card_without_mig_is_the_card(nvml):
    view = nvml(A100)
    (g,) = view.gpus
    assert (g.total, g.share, g.mig_mode) == (40 * GiB, "", False)
    d, said = _judged(view)
    assert d.device_memory_limit == 32 * GiB and not [x for x in said if x.topic == "gpu-share"]


# ---- quotas ----

def test_a_hami_quota_of_30_gib_on_a_40_gb_card_sizes_the_worker_to_30_gib(nvml):
    view = nvml(A100, CUDA_DEVICE_MEMORY_LIMIT_0="30g")
    (g,) = view.gpus
    assert (g.total, g.free, g.quota_enforced) == (30 * GiB, 30 * GiB, True)
    d, said = _judged(view)
    assert (d.device_memory_limit, d.rmm_pool_size) == (24 * GiB, 27 * GiB)
    ok = [x.message for x in said if x.topic == "gpu-share"]
    assert ok == ["sized to HAMi-core (HAMi / Volcano vGPU) quota 30.00 GiB (CUDA_DEVICE_MEMORY_LIMIT_0=30g) on GPU 0 "
                  "NVIDIA A100-SXM4-40GB (40.00 GiB): device_memory_limit 24.00 GiB, rmm_pool_size 27.00 GiB, dask-cuda "
                  "spills device -> host above the device limit"]
    _, asked = _judged(view, ["dask", "cuda", "worker", "tcp://s:8786", "--device-memory-limit", "32GiB"])
    fatal = [x.message for x in asked if x.level == "FATAL"]
    assert len(fatal) == 1 and "is above what HAMi-core (HAMi / Volcano vGPU) quota 30.00 GiB " \
        "(CUDA_DEVICE_MEMORY_LIMIT_0=30g)" in fatal[0]


def test_the_per_device_hami_variable_wins_over_the_one_for_all(nvml):
    view = nvml(A100, CUDA_DEVICE_MEMORY_LIMIT="10g", CUDA_DEVICE_MEMORY_LIMIT_0="3000m")
    assert view.gpus[0].total == 3000 * MiB


def test_a_volcano_quota_is_sized_to_and_said_to_be_unenforced(nvml):
    view = nvml(A100, VOLCANO_GPU_ALLOCATED="30720")
    (g,) = view.gpus
    assert (g.total, g.quota_enforced) == (30 * GiB, False)
    d, said = _judged(view)
    assert d.device_memory_limit == 24 * GiB
    warned = [x.message for x in said if x.topic == "gpu-share" and x.level == "WARNING"]
    assert len(warned) == 1 and warned[0].startswith("Volcano GPU sharing (volcano.sh/gpu-memory) quota 30.00 GiB "
                                                     "(VOLCANO_GPU_ALLOCATED=30720)")
    assert "nothing enforces this quota" in warned[0]


def test_an_mps_limit_for_this_device_is_its_quota(nvml):
    view = nvml(A100, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=16G,1=8G")
    assert view.gpus[0].total == 16 * GiB and "CUDA MPS quota 16.00 GiB" in view.gpus[0].share


# ---- MPS and time-slicing: several workers on one card ----

MPS_4_OF_80GB = "0=19073M"     # what invoke deploy --gpu-share mps:4x80gb writes: 80 GB / 4 in whole MiB


def test_an_mps_limit_as_deploy_writes_it_sizes_the_worker_to_a_quarter_of_an_80gb_h100(nvml):
    view = nvml(H100, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=MPS_4_OF_80GB, CUDA_MPS_PIPE_DIRECTORY="/mps/nvidia.com/gpu/pipe")
    (g,) = view.gpus
    assert (g.total, g.quota_enforced) == (19073 * MiB, True) and view.share_problems == []
    d, said = _judged(view)
    assert (d.device_memory_limit, d.rmm_pool_size) == (int(19073 * MiB * 0.8), 17152 * MiB)   # 14.90 / 16.75 GiB
    assert [x.message for x in said if x.topic == "gpu-share"] == [
        "sized to CUDA MPS quota 18.63 GiB (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=19073M) on GPU 0 NVIDIA H100 80GB HBM3 "
        "(79.65 GiB): device_memory_limit 14.90 GiB, rmm_pool_size 16.75 GiB, dask-cuda spills device -> host above "
        "the device limit"]
    worker = ["dask", "cuda", "worker", "tcp://s:8786", "--device-memory-limit"]
    _, asked = _judged(view, [*worker, "20GB"])          # the card's fifth: past the MPS server's limit
    fatal = [x.message for x in asked if x.level == "FATAL"]
    assert len(fatal) == 1 and "CUDA MPS quota 18.63 GiB (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=19073M)" in fatal[0]
    _, fine = _judged(view, [*worker, str(d.device_memory_limit)])
    assert not [x for x in fine if x.level == "FATAL" or x.topic in ("gpu", "gpu-share", "device-limit") and x.level != "OK"]


def test_an_mps_client_without_a_limit_in_its_environment_is_warned_that_its_quota_is_unknown(nvml):
    view = nvml(H100, CUDA_MPS_PIPE_DIRECTORY="/mps/nvidia.com/gpu/pipe")   # the device plugin's MPS sharing, alone
    assert view.gpus[0].total == H100_TOTAL
    d, said = _judged(view)
    assert d.device_memory_limit == int(H100_TOTAL * 0.8)
    warned = [x.message for x in said if x.topic == "gpu-share"]
    assert len(warned) == 1 and warned[0].startswith("CUDA_MPS_PIPE_DIRECTORY=/mps/nvidia.com/gpu/pipe: this worker is "
                                                     "a CUDA MPS client")
    assert "sized to the whole card" in warned[0] and "set CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<share>" in warned[0]


def test_a_time_sliced_worker_is_sized_to_its_replicas_share_and_warned_that_nothing_enforces_it(nvml, monkeypatch):
    view = nvml(H100, RAPIDS_GPU_SHARE="time-slicing:4")
    (g,) = view.gpus
    assert (g.total, g.quota_enforced) == (H100_TOTAL // 4, False)      # 19.91 GiB of the card's 79.65
    d, said = _judged(view)
    assert (d.device_memory_limit, d.rmm_pool_size) == (int(H100_TOTAL // 4 * 0.8), 18176 * MiB)   # 15.93 / 17.75 GiB
    warned = [x.message for x in said if x.topic == "gpu-share" and x.level == "WARNING"]
    assert len(warned) == 1 and warned[0].startswith(
        "time-slicing (1 of 4 replicas of the card) quota 19.91 GiB (RAPIDS_GPU_SHARE=time-slicing:4) on GPU 0 NVIDIA "
        "H100 80GB HBM3 (79.65 GiB): nothing enforces this quota")
    assert "device_memory_limit 15.93 GiB, rmm_pool_size 17.75 GiB" in warned[0] and "--gpu-share mps:" in warned[0]
    monkeypatch.delenv("RAPIDS_GPU_SHARE")
    _, unmarked = _judged(nvml(H100))             # time-sliced without the marker: NVML shows only the card
    assert not [x for x in unmarked if x.topic == "gpu-share"]


def test_a_quota_on_a_mig_instance_names_both(nvml):
    view = nvml(H100_MIG, CUDA_VISIBLE_DEVICES="MIG-3b1d2c7a-0000-0", CUDA_DEVICE_MEMORY_LIMIT="4g")
    (g,) = view.gpus
    assert g.total == 4 * GiB and g.share.endswith("on MIG 1g.10gb slice 0/0 of GPU 0 NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize("env, name", [({"CUDA_DEVICE_MEMORY_LIMIT_0": "lots"}, "CUDA_DEVICE_MEMORY_LIMIT_0"),
                                       ({"VOLCANO_GPU_ALLOCATED": "30Gi"}, "VOLCANO_GPU_ALLOCATED"),
                                       ({"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "16G"}, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
                                       ({"RAPIDS_GPU_SHARE": "time-slicing:1"}, "RAPIDS_GPU_SHARE"),
                                       ({"RAPIDS_GPU_SHARE": "mps:4"}, "RAPIDS_GPU_SHARE")])
def test_a_quota_that_cannot_be_read_is_a_warning_naming_the_variable(nvml, env, name):
    view = nvml(A100, **env)
    assert view.available and view.gpus[0].total == 40 * GiB
    _, said = _judged(view)
    warned = [x.message for x in said if x.topic == "gpu-share"]
    assert len(warned) == 1 and warned[0].startswith(f"{name}=") and "sized to the whole card" in warned[0]


def test_the_doctor_prints_the_share_it_was_given(nvml, tmp_path, monkeypatch, capsys):
    nvml(A100, CUDA_DEVICE_MEMORY_LIMIT_0="30g")
    monkeypatch.setenv("RAPIDS_SPILL_DIR", str(tmp_path))
    monkeypatch.setattr(views, "read_cgroup", lambda: CgroupMemory(2, 32 * GiB, None, 0))
    doctor.main([])
    text = capsys.readouterr().out
    assert "given" in text and "quota 30.00 GiB (CUDA_DEVICE_MEMORY_LIMIT_0=30g)" in text
    assert "OK: [gpu-share] sized to HAMi-core" in text
    doctor.main(["--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["derived"]["device_memory_limit"] == 24 * GiB
