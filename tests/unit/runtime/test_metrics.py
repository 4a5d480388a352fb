"""The metrics a worker adds to dask's /metrics, from recorded cgroup trees (v1 and v2) and recorded
NVML values, in prometheus_client's own exposition format."""

from __future__ import annotations

from pathlib import Path

import pytest

from rapidship.runtime import metrics, views
from rapidship.runtime.views import Gpu, GpuView, PruneRecord, read_cgroup

GiB, MiB = 2**30, 2**20


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@pytest.fixture
def v2(tmp_path):
    write(tmp_path, "cgroup.controllers", "memory")
    write(tmp_path, "memory.max", str(GiB))
    write(tmp_path, "memory.current", str(800 * MiB))
    write(tmp_path, "memory.peak", str(900 * MiB))
    write(tmp_path, "memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\n")
    write(tmp_path, "memory.stat", "anon 600000000\nfile 100000000\nshmem 5000\nfile_mapped 1\n")
    return read_cgroup(tmp_path, proc_cgroup="0::/\n")


@pytest.fixture
def spill(tmp_path):
    d = tmp_path / "spill" / "storage"
    d.mkdir(parents=True)
    (d / "a").write_bytes(b"x" * 1000)
    (d / "b").write_bytes(b"y" * 24)
    return str(tmp_path / "spill")


H200 = GpuView(True, "", "580", "13.0", [Gpu(0, "H200", 140 * GiB, 100 * GiB, cc_major=9, cc_minor=0)])


def values(found: metrics.Samples) -> dict[tuple, float]:
    return {(name, tuple(sorted((k, v) for k, v in labels.items() if k != "worker"))): value
            for name, _, _, labels, value in found.rows}


def test_a_v2_worker_shows_its_cgroup_spill_dir_and_gpu(v2, spill):
    found = metrics.sample("w1", spill, 700 * MiB, 4 * GiB, cg=v2, gpus=H200, prune=PruneRecord("p", True, [90]))
    got = values(found)
    assert got[("rapidship_cgroup_memory_max_bytes", ())] == GiB
    assert got[("rapidship_cgroup_memory_current_bytes", ())] == 800 * MiB
    assert got[("rapidship_cgroup_memory_events_total", (("event", "oom_kill"),))] == 1
    assert got[("rapidship_cgroup_memory_stat_bytes", (("kind", "shmem"),))] == 5000
    assert got[("rapidship_spill_dir_used_bytes", ())] == 1024 and got[("rapidship_spill_dir_files", ())] == 2
    assert got[("rapidship_worker_memory_limit_bytes", ())] == 700 * MiB
    assert got[("rapidship_gpu_memory_used_bytes", (("gpu", "0"), ("name", "H200")))] == 40 * GiB
    assert got[("rapidship_gpu_code_covered", (("gpu", "0"), ("name", "H200")))] == 1
    assert all(labels["worker"] == "w1" for _, _, _, labels, _ in found.rows)
    pruned_away = metrics.sample("w1", spill, None, None, cg=v2, gpus=H200, prune=PruneRecord("p", True, [80]))
    assert values(pruned_away)[("rapidship_gpu_code_covered", (("gpu", "0"), ("name", "H200")))] == 0


def test_v1_reads_the_same_three_kinds_and_the_oom_kill_counter(tmp_path, spill):
    write(tmp_path, "memory/memory.limit_in_bytes", str(GiB))
    write(tmp_path, "memory/memory.usage_in_bytes", "1000")
    write(tmp_path, "memory/memory.stat", "cache 10\nrss 20\nshmem 30\n")
    write(tmp_path, "memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    got = values(metrics.sample("w", spill, None, None, cg=read_cgroup(tmp_path, proc_cgroup="4:memory:/\n"),
                                gpus=GpuView(False, "no NVML")))
    assert got[("rapidship_cgroup_memory_stat_bytes", (("kind", "anon"),))] == 20
    assert got[("rapidship_cgroup_memory_stat_bytes", (("kind", "file"),))] == 10
    assert got[("rapidship_cgroup_memory_events_total", (("event", "oom_kill"),))] == 3


def test_the_working_set_leaves_out_the_page_cache_a_spilling_worker_fills(tmp_path, spill):
    """Measured in the cluster smoke (cgroup v1): a healthy spilling worker's memory.current reached
    99.9 % of its cap, most of it page cache the kernel reclaims; the working set is what it cannot."""
    write(tmp_path, "memory/memory.limit_in_bytes", str(GiB))
    write(tmp_path, "memory/memory.usage_in_bytes", str(GiB - MiB))
    write(tmp_path, "memory/memory.stat", f"cache {600 * MiB}\nrss {400 * MiB}\ninactive_file 1\n"
                                          f"total_inactive_file {550 * MiB}\n")
    v1 = read_cgroup(tmp_path, proc_cgroup="4:memory:/\n")
    got = values(metrics.sample("w", spill, None, None, cg=v1, gpus=GpuView(False, "no NVML")))
    assert got[("rapidship_cgroup_memory_working_set_bytes", ())] == GiB - MiB - 550 * MiB  # the hierarchical v1 count
    v2 = tmp_path / "v2"
    write(v2, "cgroup.controllers", "memory")
    write(v2, "memory.max", str(GiB))
    write(v2, "memory.current", str(900 * MiB))
    write(v2, "memory.stat", f"anon {300 * MiB}\nfile {600 * MiB}\ninactive_file {500 * MiB}\n")
    assert views.working_set(read_cgroup(v2, proc_cgroup="0::/\n")) == 400 * MiB
    (v2 / "memory.stat").write_text("anon 1\n")   # no inactive_file: absent, never current as if it were all needed
    assert views.working_set(read_cgroup(v2, proc_cgroup="0::/\n")) is None


def test_what_cannot_be_read_is_absent_with_a_reason_never_a_zero(tmp_path):
    found = metrics.sample("w", str(tmp_path / "vanished"), None, None, cg=views.CgroupMemory(None, None),
                           gpus=GpuView(False, "pynvml (nvidia-ml-py) is not installed"))
    assert not any(name.startswith(("rapidship_cgroup", "rapidship_spill", "rapidship_gpu")) for name, *_ in found.rows)
    assert set(found.missing) == {"cgroup", "spill_dir", "gpu"} and "vanished" in found.missing["spill_dir"]


def test_the_collector_speaks_prometheus_exposition(v2, spill, monkeypatch):
    from prometheus_client import CollectorRegistry, generate_latest

    monkeypatch.setattr(views, "read_cgroup", lambda: v2)
    monkeypatch.setattr(views, "read_gpus", lambda: H200)
    registry = CollectorRegistry()
    registry.register(metrics.RuntimeCollector("tcp://127.0.0.1:1234", spill, 700 * MiB, None))
    text = generate_latest(registry).decode()
    assert 'rapidship_cgroup_memory_events_total{event="oom_kill",worker="tcp://127.0.0.1:1234"} 1.0' in text
    assert "# TYPE rapidship_cgroup_memory_events_total counter" in text
    assert 'rapidship_gpu_memory_total_bytes{gpu="0",name="H200",worker="tcp://127.0.0.1:1234"}' in text
