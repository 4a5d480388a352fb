"""The memory and CPUs this container may use, read once: its cgroup (v1 and v2, the ancestors too;
limits, usage, peak, OOM counters, memory.stat, the CPU quota) and the host's RAM. `read_*` do the
I/O and return plain records; the parsers are pure. Standard library only.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path


UNLIMITED = 2**62          # cgroup v1 says "unlimited" with a page-rounded 2^63-1


@dataclass(frozen=True)
class CgroupMemory:
    version: int | None            # 2, 1 or None (no cgroup memory controller visible)
    limit: int | None              # memory.max / memory.limit_in_bytes; None = unlimited
    high: int | None = None        # v2 memory.high (throttling starts here); None = unlimited
    swap_limit: int | None = None  # v2 memory.swap.max; v1 memory.memsw.limit_in_bytes (memory + swap)
    usage: int | None = None
    peak: int | None = None        # v2 memory.peak; v1 memory.max_usage_in_bytes
    path: str = ""
    soft_limit: int | None = None  # v1 memory.soft_limit_in_bytes (--memory-reservation): distributed obeys it
    swap_unlimited: bool = False   # memory + swap may grow without bound (--memory-swap -1): the cap is no cap
    mount: str = ""                # where the hierarchy is mounted: `path` below it is the cgroup's own name


def _read_int(path: Path) -> int | None | str:
    """An integer, None for 'max'/unlimited, or '' when the file is absent or unreadable."""
    try:
        raw = path.read_text().strip()
    except (OSError, ValueError):
        return ""
    if raw == "max":
        return None
    try:
        value = int(raw.split()[0])
    except (ValueError, IndexError):
        return ""
    return None if value >= UNLIMITED else value


def _cgroup_paths(proc_cgroup: str) -> tuple[str | None, str | None]:
    """Pure: (v2 path, v1 memory path) from /proc/self/cgroup text."""
    v2 = v1 = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


def _candidates(base: Path, rel: str | None) -> list[Path]:
    """The cgroup's own directory and its ancestors up to the mount root, innermost first.

    With a private cgroup namespace (Docker on v2, most v1 mounts) the mount root IS the
    container's cgroup and `rel` does not exist below it; then only the root is read.
    """
    out: list[Path] = []
    if rel and rel != "/":
        p = base / rel.lstrip("/")
        if p.is_dir():
            while True:
                out.append(p)
                if p == base:
                    return out
                p = p.parent
    return [base]


def read_cgroup(root: Path = Path("/sys/fs/cgroup"), proc_cgroup: str | None = None) -> CgroupMemory:
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            proc_cgroup = ""
    v2_rel, v1_rel = _cgroup_paths(proc_cgroup)
    if (root / "cgroup.controllers").is_file():   # unified hierarchy (v2)
        limit = high = swap = None
        usage = peak = None
        found = False
        dirs = _candidates(root, v2_rel)
        for d in dirs:                      # the tightest limit on the way up wins
            lim = _read_int(d / "memory.max")
            if lim == "":
                continue
            found = True
            if lim is not None and (limit is None or lim < limit):
                limit = lim
            hi = _read_int(d / "memory.high")
            if isinstance(hi, int) and (high is None or hi < high):
                high = hi
            sw = _read_int(d / "memory.swap.max")
            if isinstance(sw, int) and (swap is None or sw < swap):
                swap = sw
        own = dirs[0]
        u, p = _read_int(own / "memory.current"), _read_int(own / "memory.peak")
        usage = u if isinstance(u, int) else None
        peak = p if isinstance(p, int) else None
        if found:
            swap_unlimited = limit is not None and swap is None and _read_int(own / "memory.swap.max") is None
            return CgroupMemory(2, limit, high, swap, usage, peak, str(own), swap_unlimited=swap_unlimited,
                                mount=str(root))
    mem = root / "memory"
    if mem.is_dir():
        dirs = [d for d in _candidates(mem, v1_rel) if _read_int(d / "memory.limit_in_bytes") != ""]
        if dirs:
            return replace(_read_v1(dirs), mount=str(mem))
    return CgroupMemory(None, None, path="")


def _tightest(values) -> int | None:
    ints = [v for v in values if isinstance(v, int)]
    return min(ints) if ints else None


def memory_stat(text: str) -> dict[str, int]:
    """Pure: memory.stat as {key: value}."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def _read_v1(dirs: list[Path]) -> CgroupMemory:
    """cgroup v1: the tightest limit of the cgroup and every ancestor visible, and the kernel's own
    view of them all (memory.stat `hierarchical_memory_limit` / `hierarchical_memsw_limit`): a
    container's namespaced /sys/fs/cgroup/memory shows only its own directory, but a lower limit
    on a parent (docker --cgroup-parent) still OOM-kills there."""
    own = dirs[0]
    try:
        stat_ = memory_stat((own / "memory.stat").read_text())
    except OSError:
        stat_ = {}
    hier = {k: (None if v >= UNLIMITED else v) for k, v in stat_.items() if k.startswith("hierarchical_")}
    limit = _tightest([_read_int(d / "memory.limit_in_bytes") for d in dirs] + [hier.get("hierarchical_memory_limit")])
    swaps = [_read_int(d / "memory.memsw.limit_in_bytes") for d in dirs] + [hier.get("hierarchical_memsw_limit")]
    swap = _tightest(swaps)
    own_swap = _read_int(own / "memory.memsw.limit_in_bytes")
    soft = _read_int(own / "memory.soft_limit_in_bytes")
    u, p = _read_int(own / "memory.usage_in_bytes"), _read_int(own / "memory.max_usage_in_bytes")
    return CgroupMemory(1, limit, None, swap, u if isinstance(u, int) else None, p if isinstance(p, int) else None,
                        str(own), soft_limit=soft if isinstance(soft, int) else None,
                        swap_unlimited=own_swap is None and swap is None and limit is not None)


def read_meminfo(text: str) -> tuple[int | None, int | None]:
    """Pure: (MemTotal, MemAvailable) in bytes from /proc/meminfo text."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) * 1024
    return values.get("MemTotal"), values.get("MemAvailable")


def cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs the cgroup's quota allows (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us), or None."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def available_cpus() -> int:
    """CPUs as distributed counts them for --nworkers -1 / auto: the affinity mask, bounded by the
    cgroup's CPU quota (docker run --cpus), rounded up."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    quota = cpu_quota()
    return max(1, min(count, -(-int(quota * 1000) // 1000))) if quota else max(1, count)


def host_memory() -> tuple[int | None, int | None]:
    """(MemTotal, MemAvailable) of the machine, or Nones."""
    try:
        return read_meminfo(Path("/proc/meminfo").read_text())
    except OSError:
        return None, None


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def host_identity() -> tuple[str, str]:
    """(host name, boot id) as this process sees them. The host name is the container's (Compose sets
    one per worker index, the same on every machine); the boot id is the kernel's, which no
    namespace hides: the same in every container of one machine, another on the next machine and
    after each reboot (which resets every cgroup counter too). Unreadable: ''."""
    try:
        boot = BOOT_ID.read_text().strip()
    except OSError:
        boot = ""
    return socket.gethostname(), boot


def cgroup_id(cg: CgroupMemory, host: tuple[str, str] | None = None) -> str:
    """Which cgroup this is, the same in every worker process that shares it and no other cgroup's
    under one Prometheus: `hostname:name@boot id`. The name is the cgroup's below its mount (`/` in a
    private cgroup namespace, `/docker/<id>` in the host's); the host name tells containers of one
    machine apart, the boot id machines (two hosts running one stack share host names and names)."""
    hostname, boot = host if host is not None else host_identity()
    name = cg.path or "/"
    if cg.path and cg.mount:
        rel = os.path.relpath(cg.path, cg.mount)
        name = "/" if rel == "." else "/" + rel
    return f"{hostname}:{name}@{boot}" if boot else f"{hostname}:{name}"


def _keyed(path: Path) -> dict[str, int] | None:
    try:
        return memory_stat(path.read_text())
    except OSError:
        return None


def memory_events(cg: CgroupMemory) -> dict[str, int] | None:
    """The cgroup's OOM counters: v2 memory.events (low, high, max, oom, oom_kill), v1
    memory.oom_control (oom_kill, under_oom); None when they cannot be read."""
    if not cg.path:
        return None
    own = Path(cg.path)
    if cg.version == 2:
        return _keyed(own / "memory.events")
    found = _keyed(own / "memory.oom_control")
    return {k: v for k, v in found.items() if k in ("oom_kill", "under_oom")} if found is not None else None


def memory_stat_of(cg: CgroupMemory) -> dict[str, int] | None:
    """The cgroup's memory.stat, parsed (None when it cannot be read); read once per scrape."""
    return _keyed(Path(cg.path) / "memory.stat") if cg.path else None


def memory_kinds(cg: CgroupMemory, stat: dict[str, int] | None = None) -> dict[str, int] | None:
    """What the cgroup's memory is: anon, file (page cache), shmem (tmpfs, /dev/shm) in bytes;
    v1's rss/cache/shmem read as the same three. None when memory.stat cannot be read."""
    found = stat if stat is not None else memory_stat_of(cg)
    if found is None:
        return None
    if cg.version == 2:
        return {k: found[k] for k in ("anon", "file", "shmem") if k in found}
    return {name: found[k] for name, k in (("anon", "rss"), ("file", "cache"), ("shmem", "shmem")) if k in found}


def working_set(cg: CgroupMemory, stat: dict[str, int] | None = None) -> int | None:
    """The memory the cgroup cannot give back without killing: usage less its inactive page cache
    (what kubelet evicts by). A worker that spills fills the cgroup with page cache up to its limit
    (measured: 99.9 % of memory.max, healthy); the kernel reclaims that before it kills, so alerts
    compare this, not memory.current, with the limit. None when memory.stat cannot be read."""
    if cg.usage is None:
        return None
    found = stat if stat is not None else memory_stat_of(cg)
    if found is None:
        return None
    inactive = found.get("inactive_file" if cg.version == 2 else "total_inactive_file", found.get("inactive_file"))
    return None if inactive is None else max(0, cg.usage - inactive)
