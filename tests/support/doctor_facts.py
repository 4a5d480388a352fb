"""A doctor's view of a healthy container, for tests to change one fact at a time."""

from __future__ import annotations

from dataclasses import replace

from rapidship.runtime.cgroup_view import CgroupMemory
from rapidship.runtime.gpu_view import GpuView
from rapidship.runtime.spill_view import SpillConfig, SpillDir
from rapidship.runtime.views import Facts

GiB, MiB = 2**30, 2**20


def facts(**over) -> Facts:
    """1 GiB cgroup v1 limit, 2 CPUs, no GPU, a writable ext4 spill dir owned by uid 1001."""
    base = Facts(uid=1001, gid=0, groups=[0], cgroup=CgroupMemory(1, GiB, None, GiB), host_total=24 * GiB,
                 host_available=20 * GiB, shm_bytes=GiB, memlock_soft=None, cpus=2,
                 gpu=GpuView(False, "pynvml (nvidia-ml-py) is not installed"),
                 spill_dir=SpillDir("/spill", True, True, False, 0o700, 1001, 0, "ext4", "/spill", 50 * GiB),
                 spill_config=SpillConfig(True, None, None, None, None, "/spill"))
    return replace(base, **over)
