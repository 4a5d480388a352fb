"""The doctor's pure parts, on fake cgroup trees and mountinfo samples (no Docker needed)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from support.doctor_facts import facts

from rapidship.runtime import doctor, gpu_view, rules, spill_view, views
from rapidship.runtime.cgroup_view import CgroupMemory, read_cgroup, read_meminfo
from rapidship.runtime.command import intent_for
from rapidship.runtime.doctor import diagnose, render_table
from rapidship.runtime.gpu_view import Gpu, GpuView
from rapidship.runtime.rules import derive, findings_for
from rapidship.runtime.spill_view import SpillConfig, SpillDir, mount_for, parse_mountinfo
from rapidship.runtime.views import Facts, PruneRecord

GiB, MiB = 2**30, 2**20


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


# ---- cgroups ----

def test_cgroup_v2_limit_high_swap_usage(tmp_path):
    write(tmp_path, "cgroup.controllers", "cpu memory pids")
    write(tmp_path, "memory.max", str(GiB))
    write(tmp_path, "memory.high", str(900 * MiB))
    write(tmp_path, "memory.swap.max", "0")
    write(tmp_path, "memory.current", "12345")
    write(tmp_path, "memory.peak", "67890")
    cg = read_cgroup(tmp_path, proc_cgroup="0::/\n")
    assert (cg.version, cg.limit, cg.high, cg.swap_limit, cg.usage, cg.peak) == (2, GiB, 900 * MiB, 0, 12345, 67890)


def test_cgroup_v2_max_means_unlimited(tmp_path):
    write(tmp_path, "cgroup.controllers", "memory")
    write(tmp_path, "memory.max", "max")
    write(tmp_path, "memory.high", "max")
    cg = read_cgroup(tmp_path, proc_cgroup="0::/\n")
    assert cg.version == 2 and cg.limit is None and cg.high is None


def test_cgroup_v2_tightest_ancestor_wins(tmp_path):
    """Without a cgroup namespace the process sits deep in the tree; a parent may hold the cap."""
    write(tmp_path, "cgroup.controllers", "memory")
    write(tmp_path, "system.slice/memory.max", str(2 * GiB))
    write(tmp_path, "system.slice/job.scope/memory.max", "max")
    write(tmp_path, "system.slice/job.scope/memory.current", "4096")
    cg = read_cgroup(tmp_path, proc_cgroup="0::/system.slice/job.scope\n")
    assert cg.limit == 2 * GiB and cg.usage == 4096 and cg.path.endswith("job.scope")


def test_cgroup_v1_limit_and_memsw(tmp_path):
    write(tmp_path, "memory/memory.limit_in_bytes", str(GiB))
    write(tmp_path, "memory/memory.memsw.limit_in_bytes", str(2 * GiB))
    write(tmp_path, "memory/memory.usage_in_bytes", "1000")
    write(tmp_path, "memory/memory.max_usage_in_bytes", "2000")
    proc = "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n"
    cg = read_cgroup(tmp_path, proc_cgroup=proc)   # /docker/abc is not below the mount: the root is ours
    assert (cg.version, cg.limit, cg.swap_limit, cg.usage, cg.peak) == (1, GiB, 2 * GiB, 1000, 2000)


def test_cgroup_v1_unlimited_is_a_huge_number(tmp_path):
    write(tmp_path, "memory/memory.limit_in_bytes", "9223372036854771712")
    cg = read_cgroup(tmp_path, proc_cgroup="5:memory:/\n")
    assert cg.version == 1 and cg.limit is None


def test_no_cgroup_at_all(tmp_path):
    cg = read_cgroup(tmp_path, proc_cgroup="")
    assert cg.version is None and cg.limit is None


def test_meminfo():
    total, avail = read_meminfo("MemTotal:       24000000 kB\nMemFree: 1 kB\nMemAvailable:   12000000 kB\n")
    assert (total, avail) == (24000000 * 1024, 12000000 * 1024)


# ---- mounts ----

MOUNTINFO = r"""
620 540 0:52 / / ro,relatime master:1 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A,upperdir=U
621 620 0:55 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
630 620 0:60 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=65536k,mode=1777
631 620 254:0 /srv/build/smoke/spill/run1 /spill rw,relatime - ext4 /dev/vda rw
632 620 254:0 /data/my\040disk /mnt/my\040disk rw - xfs /dev/sdb1 rw
633 620 0:61 / /dev/shm rw,nosuid,nodev,noexec - tmpfs shm rw,size=262144k
"""


def test_parse_mountinfo_and_lookup():
    mounts = parse_mountinfo(MOUNTINFO)
    assert [m.fstype for m in mounts] == ["overlay", "proc", "tmpfs", "ext4", "xfs", "tmpfs"]
    assert mount_for("/spill/dask-scratch-space/w1", mounts).fstype == "ext4"
    assert mount_for("/spillover", mounts).fstype == "overlay"       # a prefix is not a parent
    assert mount_for("/tmp/x", mounts).fstype == "tmpfs"
    assert mount_for("/mnt/my disk/a", mounts).fstype == "xfs"        # \040 is a space
    assert mount_for("/home/rapids", mounts).mount_point == "/"


def test_read_spill_dir_real_directory(tmp_path):
    d = tmp_path / "spill"
    d.mkdir(mode=0o700)
    d.chmod(0o700)
    mounts = parse_mountinfo(f"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:9 / {tmp_path} rw - tmpfs tmpfs rw\n")
    sd = spill_view.read_spill_dir(str(d), mounts)
    assert sd.exists and sd.writable and sd.mode == 0o700 and sd.fstype == "tmpfs" and sd.free_bytes > 0
    assert not spill_view.read_spill_dir(str(tmp_path / "missing"), mounts).exists
    assert spill_view.read_spill_dir(None).path is None


# ---- derivations and findings ----

def levels(f: Facts) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for x in findings_for(f, derive(f)):
        out.setdefault(x.level, []).append(x.message)
    return out


def test_healthy_container_has_no_findings():
    f = facts()
    assert findings_for(f, derive(f)) == []


def test_worker_limit_leaves_headroom_under_the_cap():
    d = derive(facts())
    assert d.memory_budget == GiB and d.budget_source == "cgroup v1 limit"
    assert d.headroom == 384 * MiB and d.worker_memory_limit == 640 * MiB
    big = derive(facts(cgroup=CgroupMemory(2, 64 * GiB, 48 * GiB), host_total=128 * GiB), n_workers=4)
    assert big.budget_source == "cgroup memory.high"                  # throttling starts at high
    assert big.worker_memory_limit == (48 * GiB - int(48 * GiB * 0.15)) // 4


def test_no_cap_falls_back_to_host_ram_and_warns():
    f = facts(cgroup=CgroupMemory(1, None))
    assert derive(f).budget_source == "host RAM"
    assert any("no memory cap" in m for m in levels(f)["WARNING"])


def test_limit_too_small_is_fatal():
    f = facts(cgroup=CgroupMemory(1, 512 * MiB, None, 512 * MiB))
    fatal = levels(f)["FATAL"]
    assert len(fatal) == 1 and "memory limit too small" in fatal[0] and "--memory" in fatal[0]


def test_device_limit_and_rmm_pool_from_gpu_or_smallest_mig_slice():
    gpu = GpuView(True, "", "580.1", "13.0", [Gpu(0, "H200", 140 * GiB, 139 * GiB)])
    d = derive(facts(gpu=gpu))
    assert d.device_memory_limit == int(140 * GiB * 0.8)
    assert d.rmm_pool_size % (256 * MiB) == 0 and d.rmm_pool_size <= 140 * GiB * 0.9
    mig = GpuView(True, "", "580.1", "13.0", [Gpu(0, "H200", 140 * GiB, 139 * GiB, True,
                                                  [{"index": 0, "total": 18 * GiB, "free": 18 * GiB},
                                                   {"index": 1, "total": 35 * GiB, "free": 35 * GiB}])])
    d = derive(facts(gpu=mig))
    assert d.device_memory_limit == int(18 * GiB * 0.8) and "MIG slice 0/0" in d.device_source
    assert derive(facts()).device_memory_limit is None


@pytest.mark.parametrize("spill_dir, needle", [
    (SpillDir(None), "no spill directory configured"),
    (SpillDir("/spill"), "does not exist"),
    (SpillDir("/spill", True, False, True, 0o770, 1001, 0, "overlay", "/", 9 * GiB), "read-only filesystem"),
    (SpillDir("/spill", True, False, False, 0o700, 0, 0, "ext4", "/spill", 9 * GiB), "not writable by uid 1001"),
])
def test_spill_dir_fatal(spill_dir, needle):
    fatal = levels(facts(spill_dir=spill_dir))["FATAL"]
    assert len(fatal) == 1 and needle in fatal[0]


def test_spill_on_overlay_warns():
    f = facts(spill_dir=SpillDir("/spill", True, True, False, 0o700, 1001, 0, "overlay", "/", 50 * GiB))
    assert any("is on overlay" in m for m in levels(f)["WARNING"])
    assert "FATAL" not in levels(f)


@pytest.mark.parametrize("fstype", ["tmpfs", "ramfs"])
def test_a_spill_disk_in_ram_is_fatal_where_disk_spill_is_required(fstype):
    """With the spill dir on a tmpfs the "disk" tier is shmem of the same cgroup: no spill at all."""
    f = facts(spill_dir=SpillDir("/spill", True, True, False, 0o700, 1001, 0, fstype, "/spill", 50 * GiB))
    assert any(f"is on {fstype}" in m and "charged to the same cgroup" in m for m in levels(f)["FATAL"])
    job = intent_for(["python", "job.py"], {})
    found = findings_for(f, derive(f), job)
    assert all(x.level != "FATAL" for x in found) and any(f"is on {fstype}" in x.message for x in found)


def test_a_full_spill_disk_is_fatal_where_disk_spill_is_required():
    f = facts(spill_dir=SpillDir("/spill", True, True, False, 0o700, 1001, 0, "ext4", "/spill", 1 * MiB))
    assert any("1.00 MiB free" in m and "ENOSPC" in m for m in levels(f)["FATAL"]), levels(f)


def test_mode_0770_group_0_is_accepted_and_said():
    f = facts(spill_dir=SpillDir("/spill", True, True, False, 0o770, 1001, 0, "ext4", "/spill", 50 * GiB))
    lv = levels(f)
    assert "WARNING" not in lv and any("0770 with group 0: accepted" in m for m in lv["OK"])
    loose = facts(spill_dir=SpillDir("/spill", True, True, False, 0o777, 0, 0, "ext4", "/spill", 50 * GiB))
    assert any("other users can read" in m for m in levels(loose)["WARNING"])


def test_dask_spilling_disabled_is_fatal_on_cpu_and_a_warning_under_dask_cuda():
    off = SpillConfig(True, False, False, 0.8, 0.95, "/spill")
    assert any("dask spilling is disabled" in m for m in levels(facts(spill_config=off))["FATAL"])
    gpu = GpuView(True, "", "580", "13.0", [Gpu(0, "H200", 140 * GiB, 139 * GiB)])
    cuda = replace(off, dask_cuda_available=True)
    lv = levels(facts(spill_config=cuda, gpu=gpu))
    assert "FATAL" not in lv and any("dask spilling is disabled" in m for m in lv["WARNING"])


def test_missing_dask_cudf_pre_import_is_a_finding():
    cfg = SpillConfig(True, None, None, None, None, "/spill", cudf_available=True, dask_cudf_available=True,
                      dask_cuda_available=True)
    assert any("not told to import dask_cudf" in m for m in levels(facts(spill_config=cfg))["WARNING"])
    fixed = replace(cfg, pre_import=["dask_cudf"])
    assert "WARNING" not in levels(facts(spill_config=fixed))
    preload = replace(cfg, preload=["dask_cudf"])      # measured: not enough for LocalCUDACluster workers
    assert any("not told to import dask_cudf" in m for m in levels(facts(spill_config=preload))["WARNING"])


def test_swap_above_the_limit_warns():
    f = facts(cgroup=CgroupMemory(1, GiB, None, 2 * GiB))
    assert any("swaps instead of spilling" in m for m in levels(f)["WARNING"])


def test_table_shows_both_memory_views_and_the_fatal_line():
    gpu = GpuView(True, "", "580.159.04", "13.0", [Gpu(0, "NVIDIA H200", 140 * GiB, 139 * GiB)])
    report = diagnose(facts(gpu=gpu, spill_dir=SpillDir(None)))
    text = render_table(report)
    assert "memory (cgroup)" in text and "1.00 GiB" in text
    assert "memory (GPU)" in text and "NVIDIA H200" in text and "580.159.04 / 13.0" in text
    assert "dask worker memory_limit" in text and "640.00 MiB" in text
    assert "FATAL: [spill] no spill directory configured" in text
    assert report["ok"] is False and len(report["fatal"]) == 1
    json.dumps(report)                                   # the --json form is plain data


def test_no_gpu_is_reported_not_a_crash():
    text = render_table(diagnose(facts()))
    assert "none (pynvml (nvidia-ml-py) is not installed)" in text
    view = gpu_view.read_gpus()
    assert isinstance(view, GpuView)                     # on a host without NVML: available False, a reason
    assert view.available or view.reason


# ---- the CLI, on this machine ----

def test_preflight_quiet_when_fine_and_one_fatal_line_when_not(tmp_path, monkeypatch, capsys):
    d = tmp_path / "spill"
    d.mkdir()
    d.chmod(0o700)
    monkeypatch.setenv("RAPIDS_SPILL_DIR", str(d))
    monkeypatch.setenv("DASK_TEMPORARY_DIRECTORY", str(d))
    monkeypatch.setattr(views, "read_cgroup", lambda: CgroupMemory(1, 4 * GiB))
    assert doctor.main(["--preflight"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""

    monkeypatch.setenv("RAPIDS_SPILL_DIR", str(tmp_path / "nowhere"))
    assert doctor.main(["--preflight"]) == doctor.FATAL_EXIT
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert out.out == "" and len(lines) == 1
    assert lines[0].startswith("rapids-doctor: FATAL: spill dir") and "does not exist" in lines[0]


def test_json_output(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAPIDS_SPILL_DIR", str(tmp_path))
    monkeypatch.setattr(views, "read_cgroup", lambda: CgroupMemory(2, 2 * GiB, None, 0))
    doctor.main(["--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["facts"]["cgroup"]["limit"] == 2 * GiB
    assert report["derived"]["worker_memory_limit"] == 2 * GiB - 384 * MiB


# ---- GPU architectures against the device code the image kept ----

@pytest.mark.parametrize("keep, cc, want", [
    ([80, 90], (8, 0), True), ([80, 90], (8, 6), True), ([80, 90], (8, 9), True), ([80, 90], (9, 0), True),
    ([80, 90], (10, 0), False), ([80, 90], (12, 0), False), ([80, 90], (7, 5), False),
    ([86], (8, 0), False), ([86], (8, 9), True), ([86], (8, 6), True), ([], (9, 0), False),
    ([120], (12, 1), True), ([121], (12, 0), False),
])
def test_covered_same_major_and_minor_at_most_the_gpus(keep, cc, want):
    assert rules.covered(*cc, keep) is want


def test_prune_record_missing_null_list_and_corrupt(tmp_path):
    missing = views.read_prune_record(str(tmp_path / "prune.json"))
    assert (missing.present, missing.keep, missing.error) == (False, None, None)
    (tmp_path / "null.json").write_text('{"keep": null}')
    assert views.read_prune_record(str(tmp_path / "null.json")) == PruneRecord(str(tmp_path / "null.json"), True)
    (tmp_path / "kept.json").write_text('{"keep": [90, 80], "libraries": []}')
    assert views.read_prune_record(str(tmp_path / "kept.json")).keep == [80, 90]
    for name, text, words in [("broken.json", '{"keep": [80,', "not valid JSON"),
                              ("list.json", "[80, 90]", "not a JSON object"),
                              ("nokeep.json", '{"libraries": []}', 'no "keep" key'),
                              ("strings.json", '{"keep": ["80"]}', "not a list of compute capabilities"),
                              ("bools.json", '{"keep": [true]}', "not a list of compute capabilities")]:
        (tmp_path / name).write_text(text)
        rec = views.read_prune_record(str(tmp_path / name))
        assert rec.present and rec.keep is None and words in rec.error, (name, rec)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe")
    assert "cannot be read" in views.read_prune_record(str(tmp_path / "binary.json")).error
    assert "cannot be read" in views.read_prune_record(str(tmp_path)).error      # a directory


def test_prune_record_path_from_env(tmp_path, monkeypatch):
    monkeypatch.delenv("RAPIDSHIP_PRUNE_RECORD", raising=False)
    assert views.prune_record_path() == "/opt/rapidship/prune.json"
    monkeypatch.setenv("RAPIDSHIP_PRUNE_RECORD", str(tmp_path / "p.json"))
    assert views.read_prune_record().path == str(tmp_path / "p.json")


def h200(index: int = 0, cc: tuple[int | None, int | None] = (9, 0), name: str = "NVIDIA H200") -> Gpu:
    return Gpu(index, name, 140 * GiB, 139 * GiB, cc_major=cc[0], cc_minor=cc[1])


def gpus(*devices: Gpu) -> GpuView:
    return GpuView(True, "", "580.159.04", "13.0", list(devices))


def test_gpu_not_covered_by_the_kept_device_code_is_one_fatal():
    pruned = PruneRecord("/opt/rapidship/prune.json", True, [80])
    lv = levels(facts(gpu=gpus(h200()), prune=pruned))
    assert lv["FATAL"] == ["GPU 0 NVIDIA H200 has compute capability 9.0, but this image's device code was pruned "
                           "to sm_80: no kernel can run there; rebuild with gpu_archs including 90 (variants.yaml) "
                           "or run on a covered GPU"]
    mixed = gpus(Gpu(0, "NVIDIA A100-SXM4-80GB", 80 * GiB, 79 * GiB, cc_major=8, cc_minor=0),
                 h200(1, (10, 0), "NVIDIA B200"))
    fatal = levels(facts(gpu=mixed, prune=replace(pruned, keep=[80, 90])))["FATAL"]
    assert len(fatal) == 1 and fatal[0].startswith("GPU 1 NVIDIA B200 has compute capability 10.0")
    assert "sm_80, sm_90" in fatal[0] and "including 100" in fatal[0]


def test_covered_gpus_no_record_no_gpu_pass():
    assert levels(facts(gpu=gpus(h200()), prune=PruneRecord("/p", True, [80, 90]))) == {}
    assert levels(facts(gpu=gpus(h200(cc=(8, 9), name="NVIDIA L40S")), prune=PruneRecord("/p", True, [86]))) == {}
    assert levels(facts(gpu=gpus(h200()), prune=PruneRecord("/p"))) == {}               # no record: not pruned
    assert levels(facts(gpu=gpus(h200()), prune=PruneRecord("/p", True, None))) == {}   # keep null
    assert levels(facts(prune=PruneRecord("/p", True, [80]))) == {}                     # no NVML: nothing to check
    assert levels(facts(gpu=gpus(), prune=PruneRecord("/p", True, [80]))) == {}         # NVML, no GPU


def test_unknown_capability_warns_and_corrupt_record_is_fatal_with_its_path():
    lv = levels(facts(gpu=gpus(h200(cc=(None, None))), prune=PruneRecord("/p", True, [80])))
    assert "FATAL" not in lv and "did not report its compute capability" in lv["WARNING"][0]
    corrupt = PruneRecord("/opt/rapidship/prune.json", True, error="is not valid JSON (Expecting value)")
    for gpu in (gpus(h200()), GpuView(False, "no NVML")):     # the record is the image's own: fatal either way
        fatal = levels(facts(gpu=gpu, prune=corrupt))["FATAL"]
        assert len(fatal) == 1 and fatal[0].startswith("prune record /opt/rapidship/prune.json is not valid JSON")


def test_table_and_json_show_capability_and_kept_archs():
    report = diagnose(facts(gpu=gpus(h200()), prune=PruneRecord("/opt/rapidship/prune.json", True, [80])))
    text = render_table(report)
    assert "cc 9.0" in text and "sm_80 (/opt/rapidship/prune.json)" in text
    assert "FATAL: [gpu-archs] GPU 0 NVIDIA H200 has compute capability 9.0" in text
    data = json.loads(json.dumps(report))
    assert data["facts"]["gpu"]["gpus"][0]["cc_major"] == 9 and data["facts"]["gpu"]["gpus"][0]["cc_minor"] == 0
    assert data["facts"]["prune"]["keep"] == [80] and data["ok"] is False
    assert "all (not pruned; no record at /x)" in render_table(diagnose(facts(prune=PruneRecord("/x"))))


def test_preflight_stops_on_an_uncovered_gpu_and_passes_on_a_covered_one(tmp_path, monkeypatch, capsys):
    d = tmp_path / "spill"
    d.mkdir()
    d.chmod(0o700)
    record = tmp_path / "prune.json"
    monkeypatch.setenv("RAPIDS_SPILL_DIR", str(d))
    monkeypatch.setenv("DASK_TEMPORARY_DIRECTORY", str(d))
    monkeypatch.setenv("RAPIDSHIP_PRUNE_RECORD", str(record))
    monkeypatch.setattr(views, "read_cgroup", lambda: CgroupMemory(1, 4 * GiB))
    monkeypatch.setattr(views, "read_gpus", lambda: gpus(h200()))
    record.write_text('{"keep": [80]}')
    assert doctor.main(["--preflight"]) == doctor.FATAL_EXIT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rapids-doctor: FATAL: GPU 0 NVIDIA H200 has compute capability 9.0")
    record.write_text('{"keep": [80, 90]}')
    assert doctor.main(["--preflight"]) == 0
    assert capsys.readouterr().err == ""
    record.write_text("{not json")
    assert doctor.main(["--preflight"]) == doctor.FATAL_EXIT
    assert f"FATAL: prune record {record} is not valid JSON" in capsys.readouterr().err



def test_a_cache_a_library_would_create_on_a_read_only_path_is_a_warning(tmp_path):
    """Pure over the facts: each unwritable cache is one WARNING naming its variable and the fix;
    writable ones say nothing. (The container test checks the view under a real read-only root.)"""
    from rapidship.runtime.views import CacheDir, read_cache_dirs

    caches = [CacheDir("CuPy's kernel cache", "CUPY_CACHE_DIR", "/tmp/.cache/cupy", False),
              CacheDir("the XDG cache", "XDG_CACHE_HOME", "/tmp/.cache", True)]
    f = replace(facts(), caches=caches)
    found = [x for x in rules.findings_for(f, derive(f)) if x.topic == "cache"]
    assert [(x.level, x.message.split(" (")[0]) for x in found] == [("WARNING", "CuPy's kernel cache")]
    assert "CUPY_CACHE_DIR=/tmp/.cache/cupy" in found[0].message and "tmpfs at /tmp" in found[0].message
    # the view: a variable names the place, else the library's own default under the home; unset numba: none
    seen = read_cache_dirs({"CUPY_CACHE_DIR": str(tmp_path / "c"), "XDG_CACHE_HOME": "", "MPLCONFIGDIR": "",
                            "NUMBA_CACHE_DIR": ""})
    assert [c.env for c in seen] == ["CUPY_CACHE_DIR", "XDG_CACHE_HOME", "MPLCONFIGDIR"]
    assert seen[0].path == str(tmp_path / "c") and seen[0].writable
