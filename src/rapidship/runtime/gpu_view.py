"""The GPUs this process may use, through NVML (pynvml, when importable): memory, MIG slices, compute
capability, unified memory; only those CUDA_VISIBLE_DEVICES leaves visible. Absent library or driver:
reported, never fatal. Standard library only at import time.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from .cgroup_view import read_meminfo


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total: int
    free: int
    mig_mode: bool = False
    # [{"index", "total", "free", "uuid" (MIG-...), "profile" (1g.10gb), "gpu_instance"}]
    mig_slices: list[dict] = field(default_factory=list)
    cc_major: int | None = None     # compute capability (9, 0 on an H200); None when NVML could not say
    cc_minor: int | None = None
    uuid: str = ""                  # GPU-..., what CUDA_VISIBLE_DEVICES may name instead of the index
    # one memory for CPU and GPU (GB10 / DGX Spark: NVML answers NOT_SUPPORTED for its memory, and
    # total/free are then the machine's MemTotal/MemAvailable). GH200's HBM is the GPU's own: False.
    unified: bool = False
    # the part of the card this process was given (gpu_share.py): a MIG instance or a memory quota,
    # named as findings say it; "" = the whole card. total/free are then the share's.
    share: str = ""
    quota_enforced: bool | None = None   # False: a quota only the scheduler counted (NVML shows the card)


@dataclass(frozen=True)
class GpuView:
    available: bool                 # NVML answered
    reason: str = ""                # why not, when not
    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    share_problems: list[str] = field(default_factory=list)   # quota variables that cannot be read


def unified_memory(path: str = "/proc/meminfo") -> tuple[int, int]:
    """(total, free) of a unified-memory GPU: the machine's MemTotal and MemAvailable."""
    try:
        total, avail = read_meminfo(Path(path).read_text())
    except OSError:
        total = avail = None
    return int(total or 0), int(avail or 0)


def read_gpus() -> GpuView:
    """GPUs through NVML (pynvml from nvidia-ml-py). Absent library or driver: reported, never fatal."""
    if importlib.util.find_spec("pynvml") is None:
        return GpuView(False, "pynvml (nvidia-ml-py) is not installed")
    try:
        import pynvml  # noqa: PLC0415
        pynvml.nvmlInit()
    except Exception as err:  # noqa: BLE001 - NVML raises its own types; any means "no GPU"
        return GpuView(False, f"NVML did not start: {err}")
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            try:
                mem = pynvml.nvmlDeviceGetMemoryInfo(h)
                total, free, unified = int(mem.total), int(mem.free), False
            except pynvml.NVMLError as err:   # no framebuffer of its own: the machine's memory is the GPU's
                if "Not Supported" not in str(err) and getattr(err, "value", None) != getattr(
                        pynvml, "NVML_ERROR_NOT_SUPPORTED", 3):
                    raise
                total, free = unified_memory()
                unified = True
            mig_on, slices = False, []
            try:
                mig_on = pynvml.nvmlDeviceGetMigMode(h)[0] == pynvml.NVML_DEVICE_MIG_ENABLE
            except pynvml.NVMLError:
                pass
            if mig_on:
                for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)):
                    try:
                        mh = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
                    except pynvml.NVMLError:
                        continue
                    mm = pynvml.nvmlDeviceGetMemoryInfo(mh)
                    slices.append({"index": j, "total": int(mm.total), "free": int(mm.free),
                                   **_mig_identity(pynvml, mh)})
            cc_major = cc_minor = None
            try:
                cc_major, cc_minor = (int(x) for x in pynvml.nvmlDeviceGetCudaComputeCapability(h))
            except pynvml.NVMLError:
                pass
            try:
                uuid = _text(pynvml.nvmlDeviceGetUUID(h))
            except pynvml.NVMLError:
                uuid = ""
            gpus.append(Gpu(i, _text(pynvml.nvmlDeviceGetName(h)), total, free, mig_on, slices,
                            cc_major, cc_minor, uuid, unified))
        from .gpu_share import shared_view  # noqa: PLC0415 - it builds on this module's records

        view = visible_gpus(GpuView(True, "", driver, f"{cuda // 1000}.{cuda % 1000 // 10}", gpus),
                            visible_devices(os.environ))
        view, problems = shared_view(view, dict(os.environ))
        return replace(view, share_problems=problems)
    except Exception as err:  # noqa: BLE001
        return GpuView(False, f"NVML query failed: {err}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _mig_identity(pynvml, handle) -> dict:
    """A MIG device's UUID (what CUDA_VISIBLE_DEVICES names), profile and GPU instance id, as far as
    NVML answers."""
    from .gpu_share import mig_profile  # noqa: PLC0415

    out: dict = {}
    for key, call, shape in (("uuid", "nvmlDeviceGetUUID", _text),
                             ("profile", "nvmlDeviceGetName", lambda n: mig_profile(_text(n))),
                             ("gpu_instance", "nvmlDeviceGetGpuInstanceId", int)):
        try:
            out[key] = shape(getattr(pynvml, call)(handle))
        except Exception:  # noqa: BLE001 - an older driver or binding lacks the call: the slice stays unnamed
            pass
    return out


def visible_devices(environ) -> str | None:
    """What selects this process's devices: CUDA_VISIBLE_DEVICES; unset, a MIG instance the device
    plugin named in NVIDIA_VISIBLE_DEVICES (the container then sees its parent card in NVML)."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    nvidia = environ.get("NVIDIA_VISIBLE_DEVICES") or ""
    if visible is None and nvidia.startswith("MIG-"):
        return nvidia
    return visible


def visible_gpus(view: GpuView, visible: str | None) -> GpuView:
    """Pure: only the GPUs CUDA_VISIBLE_DEVICES lets this process use (indices, GPU-UUID prefixes
    or MIG-<uuid> instances, in its order); NVML sees every GPU of the machine, CUDA only these.
    Unset: all; empty or "-1": none."""
    from .gpu_share import is_mig_item, select_mig  # noqa: PLC0415

    if visible is None or not view.available:
        return view
    chosen: list[Gpu] = []
    for item in (x.strip() for x in visible.split(",")):
        if not item:
            continue
        if is_mig_item(item):
            instance = select_mig(view, item)
            if instance is None:
                break   # CUDA stops at the first invalid entry
            found = [instance]
        elif item.isdigit() or item.lstrip("-").isdigit():
            found = [g for g in view.gpus if g.index == int(item)]
            if not found:
                break  # CUDA stops at the first invalid entry
        else:
            found = [g for g in view.gpus if g.uuid and g.uuid.startswith(item if item.startswith("GPU-") else f"GPU-{item}")]
            if len(found) != 1:
                break
        chosen += [g for g in found if g not in chosen]
    return replace(view, gpus=chosen, reason=f"CUDA_VISIBLE_DEVICES={visible}: {len(chosen)} of {len(view.gpus)} "
                                             "GPU(s) visible")


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
