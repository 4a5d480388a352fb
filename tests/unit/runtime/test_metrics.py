"""The metrics a worker adds to dask's /metrics, from recorded cgroup trees (v1 and v2) and recorded
NVML values, in prometheus_client's own exposition format."""

from __future__ import annotations

from pathlib import Path

import pytest

from rapidship.runtime import cgroup_view, gpu_view, metrics, tier_view
from rapidship.runtime.cgroup_view import read_cgroup
from rapidship.runtime.gpu_view import Gpu, GpuView
from rapidship.runtime.views import PruneRecord

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
    """name, labels -> value, leaving out the worker and the cgroup (the same on every row)."""
    return {(name, tuple(sorted((k, v) for k, v in labels.items() if k not in ("worker", "cgroup", "source")))): value
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
    assert cgroup_view.working_set(read_cgroup(v2, proc_cgroup="0::/\n")) == 400 * MiB
    (v2 / "memory.stat").write_text("anon 1\n")   # no inactive_file: absent, never current as if it were all needed
    assert cgroup_view.working_set(read_cgroup(v2, proc_cgroup="0::/\n")) is None


def test_what_cannot_be_read_is_absent_with_a_reason_never_a_zero(tmp_path):
    found = metrics.sample("w", str(tmp_path / "vanished"), None, None, cg=cgroup_view.CgroupMemory(None, None),
                           gpus=GpuView(False, "pynvml (nvidia-ml-py) is not installed"))
    assert not any(name.startswith(("rapidship_cgroup", "rapidship_spill", "rapidship_gpu")) for name, *_ in found.rows)
    assert set(found.missing) == {"cgroup", "spill_dir", "gpu"} and "vanished" in found.missing["spill_dir"]
    # and each absence is a series a rule can see, under its reason
    absent = {labels["family"]: labels["reason"] for name, _, _, labels, _ in found.rows if name == "rapidship_view_absent"}
    assert absent == found.missing


def test_the_doctors_budgets_are_exported_in_whole_bytes_under_one_cgroup_label(v2, spill, monkeypatch):
    """The alerts compare integers the doctor's own rule made (rules.headroom), never a float they
    compute: caps that are not multiples of 20 (4g, 8g, 48g) read exactly."""
    from rapidship.runtime import rules

    monkeypatch.setattr(cgroup_view, "host_memory", lambda: (64 * GiB, 60 * GiB))
    monkeypatch.delenv("RAPIDS_MEMORY_LIMIT", raising=False)
    for cap in (4 * GiB, 8 * GiB, 48 * GiB, 1_000_000_007):
        cg = cgroup_view.CgroupMemory(2, cap, path="/kubepods/pod1/worker")
        rows = {name: (labels, value) for name, _, _, labels, value in
                metrics.sample("w", spill, rules.worker_limit_for(cap), None, cg=cg, gpus=H200).rows}
        labels, budget = rows["rapidship_memory_budget_bytes"]
        assert budget == cap and labels["source"] == "cgroup v2 limit"
        assert rows["rapidship_memory_workers_budget_bytes"][1] == cap - rules.headroom(cap) == rules.worker_limit_for(cap)
        assert rows["rapidship_worker_memory_limit_bytes"][1] <= rows["rapidship_memory_workers_budget_bytes"][1]
        assert {lab["cgroup"] for lab, _ in rows.values() if "cgroup" in lab} == {cgroup_view.cgroup_id(cg)}
    v1_old = cgroup_view.CgroupMemory(1, GiB)  # a kernel that counts no OOM kills: said, as a series
    monkeypatch.setattr(cgroup_view, "memory_events", lambda cg: {"oom": 0})
    found = metrics.sample("w", spill, None, None, cg=v1_old, gpus=H200)
    assert "Linux 4.13" in found.missing["cgroup_memory_events"]


def test_the_collector_speaks_prometheus_exposition(v2, spill, monkeypatch):
    from prometheus_client import CollectorRegistry, generate_latest

    monkeypatch.setattr(cgroup_view, "read_cgroup", lambda: v2)
    monkeypatch.setattr(gpu_view, "read_gpus", lambda: H200)
    registry = CollectorRegistry()
    registry.register(metrics.RuntimeCollector("tcp://127.0.0.1:1234", spill, 700 * MiB, None))
    text = generate_latest(registry).decode()
    cgroup = cgroup_view.cgroup_id(v2)
    assert (f'rapidship_cgroup_memory_events_total{{cgroup="{cgroup}",event="oom_kill",worker="tcp://127.0.0.1:1234"}} '
            '1.0') in text
    assert "# TYPE rapidship_cgroup_memory_events_total counter" in text
    assert f'rapidship_gpu_memory_total_bytes{{cgroup="{cgroup}",gpu="0",name="H200",worker="tcp://127.0.0.1:1234"}}' in text
    # every scrape counts itself: a reader tells its own scrapes from a Prometheus's by it
    assert f'rapidship_metrics_scrapes_total{{cgroup="{cgroup}",worker="tcp://127.0.0.1:1234"}} 1.0' in text
    assert f'rapidship_metrics_scrapes_total{{cgroup="{cgroup}",worker="tcp://127.0.0.1:1234"}} 2.0' in \
        generate_latest(registry).decode()


def test_every_row_of_a_worker_carries_its_identity_so_any_two_families_join(v2, spill):
    """The defect: the spill families had no `cgroup` label, the limit had one, so a rule comparing
    them one-to-one paired nothing. The worker and its cgroup are on every row alike."""
    found = metrics.sample("w1", spill, 700 * MiB, 4 * GiB, cg=v2, gpus=H200, host=("h", "boot-a"))
    identity = {"worker": "w1", "cgroup": cgroup_view.cgroup_id(v2, ("h", "boot-a"))}
    assert all({k: labels.get(k) for k in identity} == identity for _, _, _, labels, _ in found.rows)
    names = {name for name, *_ in found.rows}
    assert {"rapidship_spill_dir_free_bytes", "rapidship_worker_memory_limit_bytes",
            "rapidship_host_memory_total_bytes"} <= names


def test_the_cgroup_label_names_the_machine_and_the_cgroup_not_the_mount(tmp_path):
    """Compose fixes the host name per worker index and a private cgroup namespace shows every
    container's cgroup at the mount root: the same stack on two machines gave two cgroups one label.
    The kernel's boot id (no namespace hides it) tells machines apart; the name below the mount
    tells cgroups of one machine apart where the host's namespace shows them."""
    write(tmp_path, "cgroup.controllers", "memory")
    write(tmp_path, "memory.max", str(GiB))
    write(tmp_path, "docker/abc/memory.max", str(GiB))
    private = read_cgroup(tmp_path, proc_cgroup="0::/\n")
    shared = read_cgroup(tmp_path, proc_cgroup="0::/docker/abc\n")
    one, other = ("rapidship-worker-0", "boot-a"), ("rapidship-worker-0", "boot-b")
    assert cgroup_view.cgroup_id(private, one) == "rapidship-worker-0:/@boot-a"
    assert cgroup_view.cgroup_id(private, one) != cgroup_view.cgroup_id(private, other)
    assert cgroup_view.cgroup_id(shared, one) == "rapidship-worker-0:/docker/abc@boot-a"
    assert str(tmp_path) not in cgroup_view.cgroup_id(shared, one)   # never where this test mounted it
    hostname, boot = cgroup_view.host_identity()
    assert hostname and boot == Path("/proc/sys/kernel/random/boot_id").read_text().strip()


class _Mr:
    """Stand-ins named as RMM's resources (tier_view.rmm_view goes by class name)."""

    def __init__(self, upstream=None, **answers):
        self.upstream, self.answers = upstream, answers

    def get_upstream(self):
        return self.upstream


def _stand_in(name: str, **methods):
    return type(name, (_Mr,), methods)


def test_rmm_pool_and_statistics_are_read_down_the_resource_chain(spill, v2):
    from types import SimpleNamespace

    Cuda = _stand_in("CudaMemoryResource")
    Pool = _stand_in("PoolMemoryResource", pool_size=lambda self: 4 * GiB)
    Stats = _stand_in("StatisticsResourceAdaptor")
    stats = Stats(Pool(Cuda()))
    stats.allocation_counts = SimpleNamespace(current_bytes=3 * GiB, peak_bytes=int(3.5 * GiB))
    view = tier_view.rmm_view(stats)
    assert view.resources == ["StatisticsResourceAdaptor", "PoolMemoryResource", "CudaMemoryResource"]
    assert (view.pool_bytes, view.allocated_bytes, view.peak_bytes, view.limit_bytes) == (4 * GiB, 3 * GiB,
                                                                                          int(3.5 * GiB), None)
    got = values(metrics.sample("w", spill, None, None, cg=v2, gpus=H200, rmm=view))
    chain = (("resource", "StatisticsResourceAdaptor > PoolMemoryResource > CudaMemoryResource"),)
    assert got[("rapidship_rmm_pool_size_bytes", chain)] == 4 * GiB
    assert got[("rapidship_rmm_allocated_peak_bytes", chain)] == int(3.5 * GiB)
    assert not any(name == "rapidship_rmm_limit_bytes" for name, _ in got)   # no limiting adaptor: absent


def test_rmm_is_read_only_where_the_process_imported_it():
    assert tier_view.read_rmm(modules={}) is None               # never imported here: no CUDA started for a scrape
    Broken = _stand_in("PoolMemoryResource", pool_size=lambda self: 1 / 0)
    rmm = type("M", (), {"mr": type("MR", (), {"get_current_device_resource": staticmethod(lambda: Broken())})})
    view = tier_view.read_rmm(modules={"rmm": rmm})
    assert view.resources == ["PoolMemoryResource"] and view.pool_bytes is None   # cannot answer: absent, not 0


class _LRU(dict):
    """zict.LRU's shape: a mapping with its running total_weight and limit n."""

    def __init__(self, items, n):
        super().__init__(items)
        self.total_weight, self.n = sum(items.values()), n


def test_a_dask_cuda_worker_s_three_tiers_and_device_limit_come_from_its_own_buffers(spill, v2):
    from types import SimpleNamespace

    host = SimpleNamespace(fast=_LRU({"h1": 300, "h2": 200}, 3 * GiB), slow={"d1": b"", "d2": b"", "d3": b""})
    data = SimpleNamespace(device_buffer=SimpleNamespace(fast=_LRU({"g1": 2 * GiB}, 2 * 10**9)), host_buffer=host)
    assert tier_view.worker_tiers(data) == {"device": (1, 2 * GiB), "host": (2, 500), "disk": (3, None)}
    assert tier_view.device_limit(data) == 2 * 10**9
    got = values(metrics.sample("w", spill, None, tier_view.device_limit(data), cg=v2, gpus=H200,
                                tiers=tier_view.worker_tiers(data)))
    assert got[("rapidship_worker_tier_bytes", (("tier", "device"),))] == 2 * GiB
    assert got[("rapidship_worker_tier_keys", (("tier", "disk"),))] == 3
    assert ("rapidship_worker_tier_bytes", (("tier", "disk"),)) not in got   # not counted there: absent, not 0
    assert got[("rapidship_worker_device_memory_limit_bytes", ())] == 2 * 10**9


def test_a_cpu_worker_s_spill_buffer_gives_host_and_disk_and_no_device_limit():
    from types import SimpleNamespace

    data = SimpleNamespace(fast=_LRU({"a": 10}, 100), slow={"b": 1}, spilled_total=SimpleNamespace(memory=5, disk=7))
    assert tier_view.worker_tiers(data) == {"host": (1, 10), "disk": (1, 7)}
    assert tier_view.device_limit(data) is None and tier_view.worker_tiers({}) == {}


class _Driver:
    """cuda.bindings.driver's shape for the two calls async_pool_usage makes, answering what a CUDA pool of
    the recorded H100 run held (docs/measurements/gpu-alerts-2026-12-07: 76,973,867,008 reserved)."""

    CUpointer_attribute = type("A", (), {"CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE": "mempool"})
    CUmemPool_attribute = type("P", (), {"CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT": "reserved",
                                         "CU_MEMPOOL_ATTR_USED_MEM_CURRENT": "used"})

    def __init__(self, pointer_err=0):
        self.pointer_err, self.asked = pointer_err, []

    def cuPointerGetAttribute(self, attr, ptr):
        self.asked.append((attr, ptr))
        return self.pointer_err, "pool-7"

    def cuMemPoolGetAttribute(self, pool, attr):
        assert pool == "pool-7"
        return 0, {"reserved": 76_973_867_008, "used": 64_424_509_441}[attr]


def test_the_async_allocators_reserve_is_read_from_the_cuda_pool_a_pointer_came_from():
    from types import SimpleNamespace

    driver = _Driver()
    assert tier_view.async_pool_usage(None, SimpleNamespace(ptr=0x7F00), driver) == (76_973_867_008, 64_424_509_441)
    assert driver.asked == [("mempool", 0x7F00)]   # the pool of the byte it allocated, not the device's default pool
    with pytest.raises(RuntimeError, match="MEMPOOL_HANDLE"):   # a driver that cannot say: no figure, not a zero
        tier_view.async_pool_usage(None, SimpleNamespace(ptr=1), _Driver(pointer_err=1))


def test_an_async_resource_that_cannot_be_read_is_left_out(spill, v2):
    Async = _stand_in("CudaAsyncMemoryResource")
    view = tier_view.rmm_view(Async())    # no CUDA here: the reader fails, the figure is absent
    assert view.resources == ["CudaAsyncMemoryResource"] and view.reserved_bytes is None
    got = values(metrics.sample("w", spill, None, None, cg=v2, gpus=H200, rmm=view))
    assert not any(name == "rapidship_rmm_reserved_bytes" for name, _ in got)


def test_a_pool_exports_its_size_as_what_rmm_reserved(spill, v2):
    Pool = _stand_in("PoolMemoryResource", pool_size=lambda self: 4 * GiB)
    view = tier_view.rmm_view(Pool(_stand_in("CudaMemoryResource")()))
    got = values(metrics.sample("w", spill, None, None, cg=v2, gpus=H200, rmm=view))
    chain = (("resource", "PoolMemoryResource > CudaMemoryResource"),)
    assert got[("rapidship_rmm_reserved_bytes", chain)] == got[("rapidship_rmm_pool_size_bytes", chain)] == 4 * GiB


def test_a_worker_on_a_mig_instance_or_a_quota_exports_the_share_not_the_card(v2, spill):
    from rapidship.runtime.gpu_share import Quota, on_slice, with_quota

    card = Gpu(0, "NVIDIA H100 80GB HBM3", 80 * GiB, 79 * GiB, True,
               [{"index": 2, "total": 9856 * MiB, "free": 500 * MiB, "profile": "1g.10gb", "uuid": "MIG-x"}], 9, 0)
    got = values(metrics.sample("w1", spill, None, None, cg=v2, gpus=GpuView(True, "", "580", "13.0", [on_slice(card, card.mig_slices[0])])))
    gpu = (("gpu", "0"), ("name", "NVIDIA H100 80GB HBM3"))
    share = "MIG 1g.10gb slice 0/2 of GPU 0 NVIDIA H100 80GB HBM3"
    assert got[("rapidship_gpu_share_memory_bytes", (("enforced", "mig"), *gpu[:1], gpu[1], ("share", share)))] == 9856 * MiB
    assert got[("rapidship_gpu_memory_used_bytes", gpu)] == 9356 * MiB     # the instance's 9.1 GiB of 9.6: full
    quota = with_quota(Gpu(0, "A100", 40 * GiB, 40 * GiB), Quota(30 * GiB, "Volcano quota", False))
    got = values(metrics.sample("w1", spill, None, None, cg=v2, gpus=GpuView(True, "", "580", "13.0", [quota])))
    assert [v for (name, labels), v in got.items() if name == "rapidship_gpu_share_memory_bytes"
            and ("enforced", "false") in labels] == [30 * GiB]
    plain = values(metrics.sample("w1", spill, None, None, cg=v2, gpus=H200))
    assert not [k for k in plain if k[0] == "rapidship_gpu_share_memory_bytes"]
