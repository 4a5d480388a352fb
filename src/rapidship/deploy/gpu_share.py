"""`invoke deploy --gpu-share`: the part of a GPU each worker asks the scheduler for, pure.

`mig:<profile>` asks for one MIG instance (`nvidia.com/mig-1g.10gb`, the NVIDIA device plugin's
mixed strategy); `memory:<GiB>` asks for a memory quota on a shared card: Volcano's vGPU
(`volcano.sh/vgpu-number` + `volcano.sh/vgpu-memory`, in MiB, enforced by HAMi-core) with
`--scheduler volcano`, HAMi's (`nvidia.com/gpu` + `nvidia.com/gpumem`, MiB) otherwise. Every worker
is sized by the doctor's rules for that share (rules.device_sizes): a MIG profile by its name's
memory in decimal GB (a `1g.10gb` instance holds a little more: the sizing stays inside it).

`mps:<replicas>x<card>gb` and `time-slicing:<replicas>x<card>gb` put `replicas` workers on one card
through the NVIDIA device plugin's `sharing.mps` / `sharing.timeSlicing` (`resources[].replicas`):
each asks for one replica, `nvidia.com/gpu` (`nvidia.com/gpu.shared` with a `:shared` tail, the
plugin's `renameByDefault: true`), on nodes whose GPU feature discovery labels say that strategy and
replica count, and is sized to the card's memory / replicas (the card's name's GB, decimal: an
`80gb` H100 holds 79.65 GiB, so the sizing stays inside it), in whole MiB. MPS enforces a share (the
plugin's MPS daemon holds the card / replicas): the worker gets CUDA_MPS_PINNED_DEVICE_MEM_LIMIT at
its share (a client's own limit can only lower the daemon's), which the doctor sizes from, and no
/dev/shm of its own (the plugin mounts the MPS daemon's there). Time-slicing limits nothing: the
worker gets RAPIDS_GPU_SHARE=time-slicing:<replicas>, and the doctor warns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidship.errors import ConfigError
from rapidship.runtime.gpu_share import MPS_ENV, SHARE_ENV, TIME_SLICING
from rapidship.runtime.rules import RMM_POOL_STEP, device_sizes

MiB, GiB = 2**20, 2**30
FLAG = "--gpu-share"
SCHEDULERS = ("default", "volcano")
MPS = "mps"
MAX_REPLICAS = 48        # the plugin's MPS limit on Volta and later (16 before): clients per MPS server
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"   # GPU feature discovery: none, mps or time-slicing
REPLICAS_LABEL = "nvidia.com/gpu.replicas"           # GPU feature discovery: replicas per card
_PROFILE = re.compile(r"^([1-9])g\.([1-9][0-9]{0,2})gb(\+me|\+gfx|\+me\.all|-me)?$")
_REPLICAS = re.compile(r"^([0-9]{1,3})x([1-9][0-9]{0,3})gb(:shared)?$")
_FIX = (f"pass {FLAG} mig:<profile> (like mig:1g.10gb), {FLAG} memory:<GiB> (like memory:30), or {FLAG} "
        "mps:<replicas>x<card>gb / time-slicing:<replicas>x<card>gb (like mps:4x80gb)")


@dataclass(frozen=True)
class GpuShare:
    kind: str               # "mig", "memory", "mps" or "time-slicing"
    profile: str = ""       # the MIG profile (1g.10gb)
    memory_bytes: int = 0   # what a worker may use on the device: the profile's memory, the quota, or its replica's
    replicas: int = 0       # mps / time-slicing: workers per card (the device plugin's replicas)
    card_gb: int = 0        # mps / time-slicing: the card's memory as its name says it, decimal GB
    renamed: bool = False   # mps / time-slicing: the plugin advertises nvidia.com/gpu.shared (renameByDefault)

    @property
    def label(self) -> str:
        if self.kind == "mig":
            return f"MIG {self.profile}"
        if self.replicas:
            return (f"{'MPS' if self.kind == MPS else 'time-slicing'}: 1 of {self.replicas} replicas of the "
                    f"{self.card_gb} GB card ({self.memory_bytes // MiB} MiB)")
        return f"a {self.memory_bytes // GiB} GiB quota"

    def sizes(self) -> tuple[int, int]:
        """(device_memory_limit, rmm_pool_size) of a worker on this share, by the doctor's rules."""
        return device_sizes(self.memory_bytes)

    def resources(self, scheduler: str) -> dict[str, str]:
        """The requests (= limits) that the scheduler and the device plugin read for this share."""
        if self.kind == "mig":
            return {f"nvidia.com/mig-{self.profile}": "1"}
        if self.replicas:
            return {"nvidia.com/gpu.shared" if self.renamed else "nvidia.com/gpu": "1"}
        mib = str(self.memory_bytes // MiB)
        if scheduler == "volcano":
            return {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": mib}
        return {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mib}


    def node_labels(self) -> dict[str, str]:
        """The worker's nodeSelector beyond its arch: nodes sharing their cards this way and this many
        times (the sizing is the card / replicas), as the plugin's GPU feature discovery labels them."""
        return {STRATEGY_LABEL: self.kind, REPLICAS_LABEL: str(self.replicas)} if self.replicas else {}

    def env(self) -> dict[str, str]:
        """What the worker's doctor reads its share from (runtime/gpu_share.py): the MPS limit (which
        MPS also enforces), or the time-slicing marker."""
        if self.kind == MPS:
            return {MPS_ENV: f"0={self.memory_bytes // MiB}M"}
        if self.kind == TIME_SLICING:
            return {SHARE_ENV: f"{TIME_SLICING}:{self.replicas}"}
        return {}

    @property
    def own_shm(self) -> bool:
        """False under MPS: the device plugin mounts the MPS daemon's /dev/shm into the container, and a
        /dev/shm volume of the pod's own would hide it from the MPS client."""
        return self.kind != MPS


def parse_share(text: str) -> GpuShare:
    """`mig:<profile>`, `memory:<GiB>`, `mps:<replicas>x<card>gb` or `time-slicing:<replicas>x<card>gb`
    -> GpuShare; anything else one error naming the flag."""
    kind, sep, value = str(text).strip().partition(":")
    if kind == "mig" and sep:
        m = _PROFILE.match(value)
        if not m:
            raise ConfigError(FLAG, f"{text!r}: {value!r} is not a MIG profile (<slices>g.<memory>gb, like 1g.10gb "
                              "or 3g.40gb; `nvidia-smi mig -lgip` lists a card's)", _FIX)
        return GpuShare("mig", value, int(m.group(2)) * 10**9)
    if kind == "memory" and sep:
        if not value.isdigit() or not 1 <= int(value) <= 1024:
            raise ConfigError(FLAG, f"{text!r}: {value!r} is not a whole number of GiB from 1 to 1024", _FIX)
        return GpuShare("memory", "", int(value) * GiB)
    if kind in (MPS, TIME_SLICING) and sep:
        return _replicas(text, kind, value)
    raise ConfigError(FLAG, f"{text!r} is no GPU share", _FIX)


def _replicas(text: str, kind: str, value: str) -> GpuShare:
    m = _REPLICAS.match(value)
    if not m:
        raise ConfigError(FLAG, f"{text!r}: {value!r} is not <replicas>x<card>gb[:shared] (like 4x80gb: 4 workers on "
                          "each 80 GB card, the card's memory as its name says it)", _FIX)
    replicas, card = int(m.group(1)), int(m.group(2))
    if not 2 <= replicas <= MAX_REPLICAS:
        raise ConfigError(FLAG, f"{text!r}: {replicas} replicas per card; the device plugin shares a card 2 to "
                          f"{MAX_REPLICAS} ways (MPS: {MAX_REPLICAS} clients on Volta and later)",
                          f"pass {kind}:<2 to {MAX_REPLICAS}>x{card}gb, as the plugin's replicas are set")
    share = _share(card, replicas)
    if not _fits(share):
        most = max((r for r in range(2, replicas) if _fits(_share(card, r))), default=0)
        raise ConfigError(FLAG, f"{text!r}: each worker's share of the card is {share // MiB} MiB, too little for a "
                          "dask-cuda worker (an RMM pool of at least 1 GiB)",
                          f"pass {kind}:{most}x{card}gb or fewer replicas" if most else
                          f"a {card} GB card is too small to share; leave {FLAG} out")
    return GpuShare(kind, "", share, replicas, card, bool(m.group(3)))


def _share(card_gb: int, replicas: int) -> int:
    """Pure: one replica's even share of a card of `card_gb` decimal GB, in whole MiB (as MPS takes it)."""
    return card_gb * 10**9 // replicas // MiB * MiB


def _fits(share: int) -> bool:
    return device_sizes(share)[1] >= 4 * RMM_POOL_STEP


def parse_scheduler(text: str | None) -> str:
    value = text or "default"
    if value not in SCHEDULERS:
        raise ConfigError("--scheduler", f"{value!r} is not a scheduler deploy writes for",
                          "pass --scheduler volcano (a Volcano Job) or --scheduler default")
    return value
