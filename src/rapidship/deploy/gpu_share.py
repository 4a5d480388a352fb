"""`invoke deploy --gpu-share`: the part of a GPU each worker asks the scheduler for, pure.

`mig:<profile>` asks for one MIG instance (`nvidia.com/mig-1g.10gb`, the NVIDIA device plugin's
mixed strategy); `memory:<GiB>` asks for a memory quota on a shared card: Volcano's vGPU
(`volcano.sh/vgpu-number` + `volcano.sh/vgpu-memory`, in MiB, enforced by HAMi-core) with
`--scheduler volcano`, HAMi's (`nvidia.com/gpu` + `nvidia.com/gpumem`, MiB) otherwise. Every worker
is sized by the doctor's rules for that share (rules.device_sizes): a MIG profile by its name's
memory in decimal GB (a `1g.10gb` instance holds a little more: the sizing stays inside it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidship.errors import ConfigError
from rapidship.runtime.rules import device_sizes

MiB, GiB = 2**20, 2**30
FLAG = "--gpu-share"
SCHEDULERS = ("default", "volcano")
_PROFILE = re.compile(r"^([1-9])g\.([1-9][0-9]{0,2})gb(\+me|\+gfx|\+me\.all|-me)?$")
_FIX = f"pass {FLAG} mig:<profile> (like mig:1g.10gb) or {FLAG} memory:<GiB> (like memory:30)"


@dataclass(frozen=True)
class GpuShare:
    kind: str               # "mig" or "memory"
    profile: str = ""       # the MIG profile (1g.10gb)
    memory_bytes: int = 0   # what a worker may use on the device: the profile's memory, or the quota

    @property
    def label(self) -> str:
        return f"MIG {self.profile}" if self.kind == "mig" else f"a {self.memory_bytes // GiB} GiB quota"

    def sizes(self) -> tuple[int, int]:
        """(device_memory_limit, rmm_pool_size) of a worker on this share, by the doctor's rules."""
        return device_sizes(self.memory_bytes)

    def resources(self, scheduler: str) -> dict[str, str]:
        """The requests (= limits) that the scheduler and the device plugin read for this share."""
        if self.kind == "mig":
            return {f"nvidia.com/mig-{self.profile}": "1"}
        mib = str(self.memory_bytes // MiB)
        if scheduler == "volcano":
            return {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": mib}
        return {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mib}


def parse_share(text: str) -> GpuShare:
    """`mig:<profile>` or `memory:<GiB>` -> GpuShare; anything else one error naming the flag."""
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
    raise ConfigError(FLAG, f"{text!r} is no GPU share", _FIX)


def parse_scheduler(text: str | None) -> str:
    value = text or "default"
    if value not in SCHEDULERS:
        raise ConfigError("--scheduler", f"{value!r} is not a scheduler deploy writes for",
                          "pass --scheduler volcano (a Volcano Job) or --scheduler default")
    return value
