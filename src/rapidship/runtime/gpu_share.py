"""The part of a GPU this process was given where it is not the whole card: a MIG instance, or a
memory quota that a sharing device plugin puts in the container's environment. Pure functions over
gpu_view's records; standard library only (the doctor must run in a broken env too).

MIG: CUDA_VISIBLE_DEVICES (or the device plugin's NVIDIA_VISIBLE_DEVICES) names the instance as
MIG-<uuid> (MIG-GPU-<uuid>/<gi>/<ci> before driver 470); NVML describes it through the MIG device
handle of its parent (nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetMemoryInfo on that handle,
its name ending in the profile: "... MIG 1g.10gb").

Quotas, each as its plugin documents it:
- HAMi-core, the hook library of HAMi (`nvidia.com/gpumem`) and of Volcano's vGPU
  (`volcano.sh/vgpu-memory`): CUDA_DEVICE_MEMORY_LIMIT_<i> for the i-th visible device, else
  CUDA_DEVICE_MEMORY_LIMIT for all ("3000m", "1g", "1048576k", bytes). Enforced: an allocation
  beyond it fails.
- Volcano's GPU sharing (`volcano.sh/gpu-memory`, deprecated since Volcano 1.9):
  VOLCANO_GPU_ALLOCATED, in MiB. Not enforced: NVML and CUDA see the whole card, and a worker sized
  to the card takes the memory its neighbours were promised.
- CUDA MPS: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=16G,1=8G", per device ordinal), enforced by the
  MPS server. The NVIDIA device plugin's MPS sharing sets its limit (the card's memory / replicas) in
  the MPS control daemon instead, and hands the container only CUDA_MPS_PIPE_DIRECTORY: a client with
  that and no limit of its own is warned that its quota is unknown here.
- Time-slicing (the NVIDIA device plugin's `sharing.timeSlicing`): nothing in the container says so,
  and nothing limits memory. `invoke deploy --gpu-share time-slicing:<replicas>x...` writes
  RAPIDS_GPU_SHARE=time-slicing:<replicas>: a quota of the card's memory / replicas, not enforced.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .gpu_view import Gpu, GpuView
from .units import MiB, _b, parse_bytes

HAMI_ENV = "CUDA_DEVICE_MEMORY_LIMIT"
VOLCANO_ENV = "VOLCANO_GPU_ALLOCATED"
MPS_ENV = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
MPS_PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"     # the device plugin's MPS sharing sets it in every client
SHARE_ENV = "RAPIDS_GPU_SHARE"               # invoke deploy's marker: time-slicing:<replicas>
TIME_SLICING = "time-slicing"                # as the plugin's GPU feature discovery labels the strategy
SIZED_TO_CARD = "the device limit and RMM pool are sized to the whole card"


@dataclass(frozen=True)
class Quota:
    limit: int          # bytes this process may use on the device
    source: str         # the variable and its value, as the findings quote it
    enforced: bool      # the plugin stops allocations beyond it (False: only the scheduler counted it)


def mig_profile(name: str) -> str:
    """Pure: the profile from a MIG device's NVML name ("NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "1g.10gb")."""
    head, sep, tail = name.rpartition(" MIG ")
    return tail.strip() if sep else ""


def is_mig_item(item: str) -> bool:
    return item.startswith("MIG-")


def select_mig(view: GpuView, item: str) -> Gpu | None:
    """Pure: the GPU record of the MIG instance CUDA_VISIBLE_DEVICES names (MIG-<uuid>, or the old
    MIG-GPU-<uuid>/<gi>/<ci>): its memory is the instance's, `share` names it. None: no such instance."""
    for g in view.gpus:
        if item.startswith("MIG-GPU-"):     # before driver 470: the parent's UUID and the instance ids
            parent, _, ids = item[len("MIG-"):].partition("/")
            if g.uuid != parent:
                continue
            gi = ids.split("/")[0]
            slices = [s for s in g.mig_slices if str(s.get("gpu_instance", "")) == gi] or g.mig_slices[:1]
        else:
            slices = [s for s in g.mig_slices if s.get("uuid") == item]
        if slices:
            return on_slice(g, slices[0])
    return None


def on_slice(g: Gpu, s: dict) -> Gpu:
    """Pure: GPU `g` as a process on its MIG slice `s` sees it: the slice's memory, named."""
    profile = f"{s['profile']} " if s.get("profile") else ""
    label = f"MIG {profile}slice {g.index}/{s['index']} of GPU {g.index} {g.name}"
    return replace(g, total=s["total"], free=s["free"], mig_slices=[s], share=label)


def read_quota(environ: dict, ordinal: int, total: int = 0) -> tuple[Quota | None, str | None]:
    """Pure: the quota the environment sets on the `ordinal`-th visible device (of `total` bytes), and
    a warning sentence naming the variable where its value cannot be read (then no quota)."""
    hami = f"{HAMI_ENV}_{ordinal}"
    for name in (hami, HAMI_ENV):
        if environ.get(name):
            return _quota(name, environ[name], lambda v: parse_bytes(v), True,
                          "HAMi-core (HAMi / Volcano vGPU)", "like 3000m or 30g")
    if environ.get(MPS_ENV):
        raw = environ[MPS_ENV]
        pairs = dict(p.strip().partition("=")[::2] for p in raw.split(",") if p.strip())
        if not all(k.strip().isdigit() and v for k, v in pairs.items()):
            return None, _unread(f"{MPS_ENV}={raw!r} is not ORDINAL=SIZE[,ORDINAL=SIZE] (like 0=16G)")
        if str(ordinal) in pairs:
            return _quota(MPS_ENV, raw, lambda _: parse_bytes(pairs[str(ordinal)]), True, "CUDA MPS", "like 0=16G")
    elif environ.get(MPS_PIPE_ENV):
        return None, (f"{MPS_PIPE_ENV}={environ[MPS_PIPE_ENV]}: this worker is a CUDA MPS client, and the memory "
                      "limit its MPS server holds (the NVIDIA device plugin's MPS sharing sets the card's memory / "
                      f"replicas there) is not in the environment, so {SIZED_TO_CARD}: set {MPS_ENV}=0=<share> "
                      "(invoke deploy --gpu-share mps:<replicas>x<card>gb writes it)")
    if environ.get(SHARE_ENV):
        return _time_slice(environ[SHARE_ENV], total)
    if environ.get(VOLCANO_ENV):
        return _quota(VOLCANO_ENV, environ[VOLCANO_ENV], lambda v: int(v) * MiB, False,
                      "Volcano GPU sharing (volcano.sh/gpu-memory)", "MiB, like 30720")
    return None, None


def _time_slice(raw: str, total: int) -> tuple[Quota | None, str | None]:
    """Pure: RAPIDS_GPU_SHARE=time-slicing:<replicas> on a card of `total` bytes: one replica's even
    share of it, which nothing enforces (every replica sees and may take the whole card)."""
    kind, _, n = raw.strip().partition(":")
    if kind != TIME_SLICING or not n.isdigit() or not 2 <= int(n) <= 48:
        return None, _unread(f"{SHARE_ENV}={raw!r} is not {TIME_SLICING}:<replicas> (2 to 48, like time-slicing:4)")
    if not total:
        return None, None
    return _quota(SHARE_ENV, raw, lambda _: total // int(n), False,
                  f"time-slicing (1 of {int(n)} replicas of the card)", "")


def _unread(problem: str) -> str:
    return f"{problem}; {SIZED_TO_CARD}: fix the variable (the device plugin or invoke deploy sets it) or unset it"


def _quota(name, raw, parse, enforced, who, shape) -> tuple[Quota | None, str | None]:
    try:
        limit = parse(raw)
    except ValueError:
        limit = None
    if not limit or limit <= 0:
        return None, _unread(f"{name}={raw!r} is not a memory size ({shape}): the GPU memory quota {who} set is unknown")
    return Quota(limit, f"{who} quota {_b(limit)} ({name}={raw})", enforced), None


def with_quota(g: Gpu, quota: Quota) -> Gpu:
    """Pure: GPU `g` within its quota: what the process may use, named by the quota."""
    if quota.limit >= g.total:
        return replace(g, share=f"{g.share or f'GPU {g.index} {g.name}'}, {quota.source}: not below what it has")
    base = g.share or f"GPU {g.index} {g.name} ({_b(g.total)})"
    return replace(g, total=quota.limit, free=min(g.free, quota.limit), share=f"{quota.source} on {base}",
                   quota_enforced=quota.enforced)


def shared_view(view: GpuView, environ: dict) -> tuple[GpuView, list[str]]:
    """Pure: the visible GPUs with each one's quota applied (the i-th visible device gets the
    ordinal-i quota), and the sentences for quota variables that cannot be read."""
    if not view.available:
        return view, []
    gpus, errors = [], []
    for ordinal, g in enumerate(view.gpus):
        quota, error = read_quota(environ, ordinal, g.total)
        if error and error not in errors:
            errors.append(error)
        gpus.append(with_quota(g, quota) if quota else g)
    return replace(view, gpus=gpus), errors
