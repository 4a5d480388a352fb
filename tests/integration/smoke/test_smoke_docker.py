"""The spill smoke test in the real cpu-debian12 image, under a real memory cap (dockerd, cgroup v1 here).

Positive: 2 GiB of data in a 1 GiB container (and 1.5 GiB in 768 MiB as a random uid) spills to
disk, reads back right and nobody is killed. Negative: no spill dir, an unwritable spill dir, no
spill configuration, dask spilling switched off, and the same with the preflight skipped (then
the kernel kills the worker and the smoke run says so). Each fails with its own clear message.
"""

from __future__ import annotations

import json

import pytest

from support.commands import CPU_VARIANT, invoke

pytestmark = pytest.mark.docker

GiB, MiB = 2**30, 2**20
DASK_OFF = ["--env", "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=False",
            "--env", "DASK_DISTRIBUTED__WORKER__MEMORY__SPILL=False"]


def smoke(tmp_path, *args, check=True):
    proc = invoke("smoke", "--variant", CPU_VARIANT, "--out", str(tmp_path), *args, check=check)
    records = sorted(tmp_path.glob(f"{CPU_VARIANT}-amd64-cpu-uid*.json"))
    assert len(records) == 1, proc.stderr
    return proc, json.loads(records[0].read_text())


def assert_spilled(record, cap):
    assert record["verdict"] == "PASS" and record["exit_code"] == 0 and not record["oom_killed"]
    plan = record["plan"]
    assert plan["memory_bytes"] == cap and "--memory-swap" in record["argv"]
    (stage,) = record["report"]["stages"]
    tiers = {t["name"]: t for t in stage["tiers"]}
    assert stage["data_bytes"] >= 2 * cap
    assert tiers["disk"]["keys"] > 0 and tiers["disk"]["bytes"] > stage["data_bytes"] - cap
    assert stage["spill_files"] == tiers["disk"]["keys"] and stage["spill_file_bytes"] > cap
    assert tiers["memory"]["bytes"] <= stage["limits"]["memory"]
    assert stage["result_ok"] and stage["got"] == stage["expected"]
    assert record["report"]["limits"]["container"] == cap      # the image saw the cgroup cap


def test_cpu_image_spills_to_disk_under_a_1g_cap(cpu_image, tmp_path):
    proc, record = smoke(tmp_path, "--memory", "1g")
    assert_spilled(record, GiB)
    assert record["plan"]["uid"] == 1001 and "PASS" in proc.stderr
    assert not [f for f in record["report"]["doctor"]["findings"] if f["level"] == "FATAL"]


def test_cpu_image_spills_as_a_random_uid(cpu_image, tmp_path):
    _, record = smoke(tmp_path, "--memory", "768m", "--uid", "random")
    assert record["plan"]["uid"] >= 100000
    assert_spilled(record, 768 * MiB)


@pytest.mark.parametrize("args, message", [
    (["--no-spill-mount"], "spill dir /spill is on a read-only filesystem: no spill directory is mounted there"),
    (["--spill-owner", "0"], "spill dir /spill is not writable by uid 1001 (owner 0:0, mode 0700)"),
    (["--env", "RAPIDS_SPILL_DIR="], "no spill directory configured: set RAPIDS_SPILL_DIR"),
    (DASK_OFF, "dask spilling is disabled (distributed.worker.memory.target and .spill are false)"),
], ids=["no-spill-dir", "unwritable-spill-dir", "no-spill-config", "dask-spilling-off"])
def test_misconfigured_container_is_refused_with_one_clear_message(cpu_image, tmp_path, args, message):
    proc, record = smoke(tmp_path, *args, check=False)
    assert proc.returncode == 1, proc.stderr
    assert record["verdict"] == "FAIL" and record["exit_code"] == 3       # the doctor's FATAL exit
    assert len(record["problems"]) == 1 and record["problems"][0].startswith("preflight refused to start: ")
    assert message in record["problems"][0]
    assert "error: smoke cpu-debian12" in proc.stderr and "preflight refused to start" in proc.stderr
    assert "fix: each problem says what failed; docs/spill.md" in " ".join(proc.stderr.split())  # a fix, not a path
    assert record["report"] is None                                     # nothing ran


def test_without_the_preflight_no_spilling_ends_in_a_clear_oom_failure(cpu_image, tmp_path):
    """Skip the doctor and switch dask spilling off: the kernel kills the worker; we say so, fast."""
    off = DASK_OFF + ["--env", "DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE=False",
                      "--env", "DASK_DISTRIBUTED__WORKER__MEMORY__TERMINATE=False"]
    proc, record = smoke(tmp_path, "--env", "RAPIDS_DOCTOR=off", *off, check=False)
    assert proc.returncode == 1 and record["verdict"] == "FAIL"
    assert record["oom_killed"] and record["problems"][0].startswith("OOM KILL")
    (stage,) = record["report"]["stages"]
    assert "worker died" in stage["error"] and stage["spill_files"] == 0
    assert record["seconds"] < 120
