"""Pure parts of the spill smoke test: the in-image verdict and the host-side run profile."""

from __future__ import annotations

import json
import random

import pytest

from rapidship.errors import ConfigError
from rapidship.config.matrix import load_matrix
from rapidship.runtime.smoke import plan_limits
from rapidship.runtime.smoke_verdict import Stage, Tier, judge, verdict
from rapidship.runtime.spill_view import dir_usage
from rapidship.runtime.units import parse_bytes
from rapidship.smoke.run import gpu_flag, judge_run, memlock_for, parse_size, pick_uid, plan_smoke, run_argv

GiB, MiB = 2**30, 2**20


def cpu_stage(**over) -> Stage:
    s = Stage("cpu-array", 2 * GiB, {"memory": 640 * MiB},
              tiers=[Tier("memory", 9, 288 * MiB), Tier("disk", 55, 1760 * MiB)],
              spill_files=55, spill_file_bytes=1760 * MiB, result_ok=True, expected=1, got=1)
    for k, v in over.items():
        setattr(s, k, v)
    return s


# ---- the verdict inside the image ----

def test_spilled_to_disk_with_the_right_answer_passes():
    assert verdict([cpu_stage()]) == ("PASS", [])


def test_data_above_the_limits_that_never_left_memory_is_a_failure():
    """The silent case: the job 'succeeded', the answer is right, nothing spilled."""
    s = cpu_stage(tiers=[Tier("memory", 64, 2 * GiB), Tier("disk", 0, 0)], spill_files=0, spill_file_bytes=0)
    state, problems = verdict([s])
    assert state == "FAIL" and len(problems) == 1
    assert "NO SPILL" in problems[0] and "stayed in the memory tier" in problems[0]


def test_dask_cudf_without_pre_import_is_a_failure():
    """Measured on the H200: 24 partitions held on the device, sizeof unknown (48 B each)."""
    s = Stage("dask-cudf", 3 * GiB, {"device": 10**9, "host": 10**9},
              tiers=[Tier("device", 24, 1152), Tier("host", 0, 0), Tier("disk", 0, 0)],
              result_ok=True, expected=5, got=5)
    state, problems = verdict([s])
    assert state == "FAIL" and "stayed in the device tier" in problems[0]


def test_disk_keys_without_files_under_the_spill_dir_is_a_failure():
    s = cpu_stage(spill_files=0, spill_file_bytes=0)
    assert "NO SPILL" in judge(s)[0]


def test_wrong_result_fails_even_when_spilled():
    problems = judge(cpu_stage(got=2))
    assert problems == ["cpu-array: WRONG RESULT: expected 1, got 2"]


def test_a_dataset_that_fits_proves_nothing():
    problems = judge(cpu_stage(data_bytes=600 * MiB))
    assert any("proves nothing" in p for p in problems)


def test_a_failed_workload_is_reported_as_such():
    assert judge(cpu_stage(error="KilledWorker: ...")) == ["cpu-array: the workload failed: KilledWorker: ..."]


def test_cudf_own_spilling_is_judged_on_the_host_tier():
    ok = Stage("cudf-spill", 3 * GiB, {"device": 10**9}, tiers=[Tier("device", 12, 8 * 10**8), Tier("host", 1, 5 * GiB)],
               result_ok=True, expected=1, got=1, spill_tier="host")
    assert judge(ok) == []
    none = Stage("cudf-spill", 3 * GiB, {"device": 10**9}, tiers=[Tier("device", 12, 3 * GiB), Tier("host", 0, 0)],
                 result_ok=True, expected=1, got=1, spill_tier="host")
    assert "nothing reached the host tier" in judge(none)[0]


def test_no_stage_is_no_pass():
    assert verdict([])[0] == "FAIL"


def test_dir_usage_counts_only_spill_storage(tmp_path):
    storage = tmp_path / "dask-scratch-space" / "worker-1" / "storage"
    storage.mkdir(parents=True)
    (storage / "a").write_bytes(b"x" * 100)
    (storage / "b").write_bytes(b"y" * 50)
    (storage / "empty").write_bytes(b"")
    (tmp_path / "dask-scratch-space" / "global.lock").write_bytes(b"z" * 7)
    assert dir_usage(str(tmp_path)) == (2, 150)


def test_parse_bytes_and_limits_from_the_doctor():
    assert parse_bytes("1GB") == 10**9 and parse_bytes("1GiB") == GiB and parse_bytes("512m") == 512 * MiB
    assert parse_bytes(None) is None and parse_bytes("123") == 123
    report = {"derived": {"worker_memory_limit": 640 * MiB, "memory_budget": GiB, "device_memory_limit": None},
              "facts": {"cgroup": {"limit": GiB}}}

    class Args:
        memory_limit = None
        device_memory_limit = None

    assert plan_limits(report, Args) == {"container": GiB, "worker": 640 * MiB, "host": 640 * MiB, "device": None}
    Args.memory_limit, Args.device_memory_limit = 10**9, 2 * 10**9
    assert plan_limits(report, Args)["device"] == 2 * 10**9 and plan_limits(report, Args)["worker"] == 10**9


# ---- the host side: the hardened profile and the judgement ----

@pytest.fixture(scope="module")
def matrix(root):
    return load_matrix(root / "variants.yaml")


def test_run_argv_is_the_hardened_profile(matrix, tmp_path):
    v = matrix.get("cpu-debian12")
    plan = plan_smoke(v, "amd64", "cpu", 1001, "1g", "256m", None, tmp_path, image="sha256:abc")
    argv = run_argv(plan)
    joined = " ".join(argv)
    i = argv.index("--memory")
    assert argv[i + 1] == str(GiB) and argv[argv.index("--memory-swap") + 1] == str(GiB)
    assert "--read-only" in argv and "--tmpfs /tmp:rw,nosuid,nodev" in joined
    assert "--user 1001:0" in joined and "--cap-drop ALL" in joined
    assert "--security-opt no-new-privileges" in joined and "--ulimit memlock=-1:-1" in joined
    assert f"--shm-size {256 * MiB}" in joined and "--network none" in joined
    assert f"--volume {tmp_path / plan.name}:/spill:rw" in joined and "--gpus" not in argv
    assert argv[-5:] == ["sha256:abc", "rapids-smoke", "spill", "--mode", "cpu"]


def test_no_spill_mount_and_gpu_flags(matrix):
    cpu = plan_smoke(matrix.get("cpu-debian12"), "amd64", "cpu", 1001, "1g", "1g", None, None)
    assert "--volume" not in run_argv(cpu)
    gpu_variant = next(v for v in matrix.variants.values() if v.cuda)
    gpu = plan_smoke(gpu_variant, "amd64", "gpu", 1001, "8g", "1g", "0,1", None)
    argv = run_argv(gpu)
    assert argv[argv.index("--gpus") + 1] == '"device=0,1","capabilities=compute,utility"'
    assert gpu_flag("all") == 'all,"capabilities=compute,utility"'
    with pytest.raises(ConfigError, match="needs GPUs"):
        plan_smoke(gpu_variant, "amd64", "gpu", 1001, "8g", "1g", None, None)
    with pytest.raises(ConfigError, match="has no CUDA"):
        plan_smoke(matrix.get("cpu-debian12"), "amd64", "cudf", 1001, "8g", "1g", "all", None)


def test_memlock_falls_back_only_for_cpu_where_the_host_forbids_it():
    assert memlock_for("cpu", None, True) == (None, ())
    assert memlock_for("cpu", 8 * MiB, True) == (None, ())
    limit, notes = memlock_for("cpu", 8 * MiB, False)
    assert limit == 8 * MiB and "refused" in notes[0]
    assert memlock_for("gpu", 8 * MiB, False) == (None, ())


def test_sizes_and_uids():
    assert parse_size("1g", "--memory") == GiB and parse_size("768m", "--memory") == 768 * MiB
    with pytest.raises(ConfigError, match="--memory"):
        parse_size("lots", "--memory")
    assert pick_uid(None, 1001) == 1001 and pick_uid("4242", 1001) == 4242
    uid = pick_uid("random", 1001, random.Random(7))
    assert 100000 <= uid < 2**31 - 1
    with pytest.raises(ConfigError, match="non-root"):
        pick_uid("0", 1001)


def report(verdict_="PASS", problems=()):
    return json.dumps({"verdict": verdict_, "problems": list(problems), "stages": []}, indent=2)


def test_judge_run():
    assert judge_run(0, False, report(), "")[:2] == ("PASS", [])
    state, problems, _ = judge_run(137, True, "", "Killed")
    assert state == "FAIL" and problems[0].startswith("OOM KILL")
    state, problems, _ = judge_run(3, False, "", "rapids-doctor: FATAL: spill dir /spill does not exist: mount")
    assert problems == ["preflight refused to start: spill dir /spill does not exist: mount"]
    state, problems, _ = judge_run(1, False, report("FAIL", ["dask-cudf: NO SPILL: ..."]), "")
    assert state == "FAIL" and problems == ["dask-cudf: NO SPILL: ..."]
    state, problems, _ = judge_run(1, False, "not json", "Traceback\nValueError: boom")
    assert "no JSON report" in problems[0] and "boom" in problems[0]
    assert judge_run(None, False, "", "")[1][0] == "the container did not finish in time"
    noisy = "some log line\n" + report()                 # a log line before the report is tolerated
    assert judge_run(0, False, noisy, "")[0] == "PASS"


def test_stage_seconds_print_as_words_not_a_python_dict():
    from rapidship.stages.smoke import seconds_text

    assert seconds_text({"persist": 10.97, "read_back": 33.32, "total": 44.3}) == \
        "persist 11.0 s, read_back 33.3 s, total 44.3 s"
    assert seconds_text(44.26) == "44.3 s" and seconds_text(None) == "-" and seconds_text({}) == "-"
