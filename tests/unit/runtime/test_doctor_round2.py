"""Doctor round 2: its verdicts match what the kernel and dask will do, on recorded cgroup trees
(v1 and v2) and recorded NVML values; the container cases are in tests/integration/smoke."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from support.doctor_facts import facts

from rapidship.runtime.cgroup_view import CgroupMemory, read_cgroup
from rapidship.runtime.command import classify, dask_nworkers, intent_for
from rapidship.runtime.gpu_view import Gpu, GpuView, visible_gpus
from rapidship.runtime.rules import derive, findings_for
from rapidship.runtime.spill_view import SpillConfig

GiB, MiB = 2**30, 2**20
UNLIMITED_V1 = "9223372036854771712"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def levels(f, intent=None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for x in findings_for(f, derive(f, intent.workers if intent else 1), intent):
        out.setdefault(x.level, []).append(x.message)
    return out


# ---- 1. cgroup v1: a parent's lower limit, the reservation ---------------------------------------

def test_v1_a_parents_lower_limit_is_the_limit(tmp_path):
    """docker run --cgroup-parent P --memory 2g, P limited to 768 MiB: as a container sees it (its
    own directory only) and as a shell in P/job sees it (the whole tree)."""
    write(tmp_path, "memory/memory.limit_in_bytes", str(2 * GiB))
    write(tmp_path, "memory/memory.stat", f"cache 0\nrss 4096\nhierarchical_memory_limit {768 * MiB}\n"
                                          f"hierarchical_memsw_limit {UNLIMITED_V1}\n")
    cg = read_cgroup(tmp_path, proc_cgroup="12:memory:/P/docker-abc\n")
    assert (cg.version, cg.limit) == (1, 768 * MiB)
    tree = tmp_path / "tree"
    write(tree, "memory/memory.limit_in_bytes", UNLIMITED_V1)
    write(tree, "memory/P/memory.limit_in_bytes", str(768 * MiB))
    write(tree, "memory/P/job/memory.limit_in_bytes", UNLIMITED_V1)
    write(tree, "memory/P/job/memory.usage_in_bytes", "1000")
    cg = read_cgroup(tree, proc_cgroup="12:memory:/P/job\n")
    assert cg.limit == 768 * MiB and cg.path.endswith("P/job") and cg.usage == 1000
    d = derive(facts(cgroup=cg))
    assert d.memory_budget == 768 * MiB and d.worker_memory_limit < 768 * MiB


def test_v1_the_soft_limit_sizes_workers_and_is_shown(tmp_path):
    write(tmp_path, "memory/memory.limit_in_bytes", str(4 * GiB))
    write(tmp_path, "memory/memory.soft_limit_in_bytes", str(GiB))
    cg = read_cgroup(tmp_path, proc_cgroup="12:memory:/\n")
    assert cg.soft_limit == GiB
    d = derive(facts(cgroup=cg))
    assert d.memory_budget == GiB and "soft_limit" in d.budget_source


@pytest.mark.parametrize("version", [1, 2])
def test_unlimited_swap_is_said(tmp_path, version):
    if version == 1:
        write(tmp_path, "memory/memory.limit_in_bytes", str(2 * GiB))
        write(tmp_path, "memory/memory.memsw.limit_in_bytes", UNLIMITED_V1)
        cg = read_cgroup(tmp_path, proc_cgroup="12:memory:/\n")
    else:
        write(tmp_path, "cgroup.controllers", "memory")
        write(tmp_path, "memory.max", str(2 * GiB))
        write(tmp_path, "memory.swap.max", "max")
        cg = read_cgroup(tmp_path, proc_cgroup="0::/\n")
    assert cg.swap_unlimited
    assert any("swap is unlimited" in m for m in levels(facts(cgroup=cg))["WARNING"])
    assert not CgroupMemory(1, GiB, None, GiB).swap_unlimited


# ---- 3, 7: what the command really starts --------------------------------------------------------

@pytest.mark.parametrize("text, cpus, workers", [(None, 2, 1), ("2", 2, 2), ("-1", 2, 2), ("-1", 16, 16),
                                                 ("-2", 16, 15), ("auto", 2, 2), ("auto", 4, 4), ("auto", 16, 4),
                                                 ("auto", 12, 4), ("auto", 7, 7)])
def test_nworkers_are_resolved_as_dask_resolves_them(text, cpus, workers):
    assert dask_nworkers(text, cpus) == workers


@pytest.mark.parametrize("value", ["-1", "auto"])
def test_nworkers_minus_one_or_auto_is_not_one_worker(value):
    """1 GiB, 2 CPUs, --memory-limit 640MiB: two such workers do not fit, whatever says how many."""
    cmd = ["dask", "worker", "tcp://s:8786", "--nworkers", value, "--memory-limit", "640MiB"]
    intent = intent_for(cmd, {}, cpus=2)
    assert intent.workers == 2
    assert any("x 2 workers" in m for m in levels(facts(), intent)["FATAL"])


@pytest.mark.parametrize("command", [
    ["nice", "-n", "5", "dask", "worker", "tcp://s:8786"], ["timeout", "1d", "dask", "worker", "tcp://s:8786"],
    ["timeout", "-s", "KILL", "1d", "dask-worker", "tcp://s:8786"], ["tini", "--", "dask", "worker", "tcp://s:8786"],
    ["dumb-init", "dask", "cuda", "worker", "tcp://s:8786"], ["exec", "dask", "worker", "tcp://s:8786"],
    ["env", "-u", "X", "A=1", "nice", "dask", "worker", "tcp://s:8786"],
    ["sh", "-c", "exec dask worker tcp://s:8786 --memory-limit 640MiB"],
    ["bash", "-lc", "nice -n 5 dask worker tcp://s:8786"],
])
def test_wrappers_do_not_hide_the_worker(command):
    intent = intent_for(command, {})
    assert intent.program in ("dask worker", "dask cuda worker") and intent.disk_spill == "required", intent


def test_a_shell_line_that_cannot_be_read_says_so():
    intent = intent_for(["sh", "-c", "cd /data && dask worker tcp://s:8786"], {})
    assert intent.program is None and not intent.judged and "could not be judged" in intent.why
    assert classify(["sh", "-c", "dask worker x"])[0] is None  # classify alone reads argv, not shell text


# ---- 4, 5: thresholds, and limits only where workers run ------------------------------------------

def test_spill_thresholds_above_the_limit_are_fatal():
    """DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=1.5, __SPILL=1.6, pause and terminate off: OOM in seconds."""
    config = SpillConfig(True, 1.5, 1.6, False, False, "/spill")
    found = levels(facts(spill_config=config))
    assert any("target 1.5, spill 1.6" in m and "never spills" in m for m in found["FATAL"])
    assert "FATAL" not in levels(facts(spill_config=SpillConfig(True, 0.6, 0.7, 0.8, 0.95, "/spill")))


@pytest.mark.parametrize("command", [["python", "-c", "print(1)"], ["dask", "scheduler"]])
def test_a_small_container_is_fine_where_no_worker_runs(command):
    """docker run --memory 512m IMAGE python -c 'print(1)' stopped with 'leaves 128 MiB per worker'."""
    small = facts(cgroup=CgroupMemory(1, 512 * MiB, None, 512 * MiB))
    assert "FATAL" not in levels(small, intent_for(command, {}))
    assert any("per worker" in m for m in levels(small, intent_for(["dask", "worker", "x"], {}))["FATAL"])


# ---- 6: a uid outside group 0 ---------------------------------------------------------------------

def test_a_working_directory_the_uid_cannot_enter_is_fatal_where_workers_run():
    f = facts(uid=12345, gid=12345, groups=[12345], cwd="/home/rapids", cwd_usable=False)
    assert any("cannot be entered by uid 12345" in m and "--user UID:0" in m
               for m in levels(f, intent_for(["dask", "worker", "x"], {}))["FATAL"])
    assert "FATAL" not in levels(f, intent_for(["python", "job.py"], {}))


# ---- 8: the visible GPUs, what is free, what the command asks for --------------------------------

H200 = Gpu(0, "H200", 140 * GiB, 139 * GiB, cc_major=9, cc_minor=0, uuid="GPU-aaaa-1111")
V100 = Gpu(1, "V100", 32 * GiB, 31 * GiB, cc_major=7, cc_minor=0, uuid="GPU-bbbb-2222")


@pytest.mark.parametrize("visible, names", [(None, ["H200", "V100"]), ("0", ["H200"]), ("1,0", ["V100", "H200"]),
                                            ("GPU-bbbb", ["V100"]), ("", []), ("-1", []), ("0,7,1", ["H200"])])
def test_only_the_visible_gpus_are_judged(visible, names):
    view = visible_gpus(GpuView(True, "", "580", "13.0", [H200, V100]), visible)
    assert [g.name for g in view.gpus] == names


def test_a_hidden_gpu_the_device_code_does_not_cover_stops_nothing():
    from rapidship.runtime.views import PruneRecord

    pruned = PruneRecord("/opt/rapidship/prune.json", True, [90])
    both = facts(gpu=GpuView(True, "", "580", "13.0", [H200, V100]), prune=pruned)
    assert any("V100" in m for m in levels(both)["FATAL"])
    only = facts(gpu=visible_gpus(both.gpu, "0"), prune=pruned)
    assert "FATAL" not in levels(only)


def test_free_device_memory_bounds_the_device_limit_and_pool_and_is_said():
    busy = replace(H200, free=20 * GiB)  # another process holds 120 GiB
    f = facts(gpu=GpuView(True, "", "580", "13.0", [busy]))
    d = derive(f)
    assert d.device_memory_limit == int(20 * GiB * 0.95) and d.rmm_pool_size <= 20 * GiB * 0.95
    assert any("only 20.00 GiB of 140.00 GiB free" in m for m in levels(f)["WARNING"])
    assert derive(facts(gpu=GpuView(True, "", "580", "13.0", [H200]))).device_memory_limit == int(140 * GiB * 0.8)


@pytest.mark.parametrize("command", [["dask", "cuda", "worker", "tcp://s:8786", "--device-memory-limit", "400GB"],
                                     ["rapids-smoke", "spill", "--mode", "gpu", "--device-memory-limit", "400GB"]])
def test_a_device_limit_above_the_gpu_is_refused_naming_gpu_and_memory(command):
    """rapids-smoke spill --device-memory-limit 400GB on a 143 GB H200 ran, then said "proves nothing"."""
    f = facts(gpu=GpuView(True, "", "580", "13.0", [H200]))
    found = levels(f, intent_for(command, {}))["FATAL"]
    assert any("400.00 GB" in m or "372.53 GiB" in m for m in found), found
    assert any("above what GPU 0 H200 has (140.00 GiB)" in m for m in found), found


def test_the_spill_dir_of_the_command_is_the_one_judged():
    intent = intent_for(["dask", "worker", "tcp://s:8786", "--local-directory", "/scratch"], {})
    assert intent.spill_dir == "/scratch"
    assert intent_for(["rapids-smoke", "spill", "--spill-dir", "/tmp/x"], {}).spill_dir == "/tmp/x"


def test_a_declared_limit_stands_for_a_parent_the_namespace_hides():
    """cgroup v2 with a private namespace shows only the container's own cgroup: the site says the rest."""
    f = facts(cgroup=CgroupMemory(2, 8 * GiB), declared_limit=3 * GiB)
    d = derive(f)
    assert d.memory_budget == 3 * GiB and d.budget_source == "$RAPIDS_MEMORY_LIMIT"


def test_a_cpu_image_says_it_keeps_no_device_code_as_its_label_does():
    """The CPU image's doctor said archs "all (not pruned)" while its label says none."""
    from rapidship.runtime.doctor import diagnose, render_table

    assert "GPU archs kept" in render_table(diagnose(facts(cuda_image=False)))
    assert "none (a CPU image" in render_table(diagnose(facts(cuda_image=False)))
    assert "all (not pruned" in render_table(diagnose(facts()))
