"""Disk spill is required only where something spills to disk, and a worker memory limit must fit the
container: the doctor's command classification, its findings, --preflight and the entrypoint."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.doctor_facts import facts

from rapidship.runtime import doctor
from rapidship.runtime.cgroup_view import CgroupMemory
from rapidship.runtime.command import Intent, classify, dask_memory_limit, intent_for
from rapidship.runtime.doctor import diagnose
from rapidship.runtime.rules import derive, findings_for
from rapidship.runtime.spill_view import SpillConfig, SpillDir
from rapidship.runtime.views import Facts

GiB, MiB = 2**30, 2**20
SRC = Path(__file__).resolve().parents[3] / "src"
BIN = SRC / "rapidship" / "runtime" / "bin"

READ_ONLY = SpillDir("/spill", True, False, True, 0o755, 0, 0, "overlay", "/", 9 * GiB)


def levels(f: Facts, intent: Intent | None = None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for x in findings_for(f, derive(f), intent):
        out.setdefault(x.level, []).append(x.message)
    return out


# ---- which commands need disk spill ----

@pytest.mark.parametrize("command, program", [
    (["dask", "cuda", "worker", "tcp://scheduler:8786"], "dask cuda worker"),
    (["dask-cuda-worker", "tcp://scheduler:8786"], "dask cuda worker"),
    (["/opt/rapids/bin/dask-cuda-worker"], "dask cuda worker"),
    (["dask", "worker", "tcp://scheduler:8786", "--nworkers", "2"], "dask worker"),
    (["dask-worker", "tcp://scheduler:8786"], "dask worker"),
    (["python", "-m", "distributed.cli.dask_worker", "tcp://s:8786"], "dask worker"),
    (["python3.12", "-u", "-m", "dask", "worker", "tcp://s:8786"], "dask worker"),
    (["/opt/rapids/bin/python", "-X", "faulthandler", "-m", "dask", "cuda", "worker"], "dask cuda worker"),
    (["env", "A=1", "B=2", "dask", "cuda", "worker"], "dask cuda worker"),
    (["rapids-smoke", "spill", "--mode", "gpu"], "rapids-smoke"),
    (["python", "-m", "rapids_runtime.smoke", "spill"], "rapids-smoke"),
])
def test_dask_workers_and_the_spill_smoke_require_disk_spill(command, program):
    assert classify(command)[0] == program
    intent = intent_for(command, {})
    assert (intent.program, intent.disk_spill) == (program, "required")


@pytest.mark.parametrize("command", [
    ["python", "job.py"], ["python"], ["dask", "scheduler"], ["dask-scheduler"], ["python", "-m", "pytest"],
    ["jupyter", "lab"], ["dask"], ["python", "-c", "import cudf"],
])
def test_any_other_command_makes_disk_spill_optional(command):
    intent = intent_for(command, {})
    assert intent.program is None and intent.disk_spill == "optional"
    assert "no dask worker and no rapids-smoke" in intent.why


def test_no_command_is_the_full_check_and_overrides_win():
    assert intent_for(None, {}).disk_spill == "required"
    assert intent_for(["python", "job.py"], {"RAPIDS_DISK_SPILL": "required"}).disk_spill == "required"
    opt = intent_for(["dask", "cuda", "worker"], {"RAPIDS_DISK_SPILL": "Optional"})
    assert opt.disk_spill == "optional" and opt.why == "RAPIDS_DISK_SPILL=optional"
    assert intent_for(["python", "job.py"], {"RAPIDS_DISK_SPILL": "auto"}).disk_spill == "optional"
    flag = intent_for(["python", "job.py"], {"RAPIDS_DISK_SPILL": "optional"}, override="required")
    assert flag.disk_spill == "required" and flag.why == "--disk-spill=required"


def test_a_bad_override_is_one_fatal_naming_it():
    intent = intent_for(["python", "job.py"], {"RAPIDS_DISK_SPILL": "yes"})
    fatal = levels(facts(), intent)["FATAL"]
    assert len(fatal) == 1 and fatal[0].startswith("RAPIDS_DISK_SPILL='yes' is not one of required, optional, auto")


# ---- the findings: FATAL where required, a WARNING elsewhere ----

@pytest.mark.parametrize("spill_dir, needle", [
    (SpillDir(None), "no spill directory configured"),
    (SpillDir("/spill"), "does not exist"),
    (READ_ONLY, "spill dir /spill is on a read-only filesystem"),
    (SpillDir("/spill", True, False, False, 0o700, 0, 0, "ext4", "/spill", 9 * GiB), "not writable by uid 1001"),
])
def test_spill_dir_problems_are_warnings_for_a_plain_job(spill_dir, needle):
    job = intent_for(["python", "job.py"], {})
    lv = levels(facts(spill_dir=spill_dir), job)
    assert "FATAL" not in lv
    (warning,) = [m for m in lv["WARNING"] if needle in m]
    assert "not fatal: `python job.py` is no dask worker and no rapids-smoke" in warning
    worker = levels(facts(spill_dir=spill_dir), intent_for(["dask", "cuda", "worker"], {}))
    assert len(worker["FATAL"]) == 1 and needle in worker["FATAL"][0]


def test_dask_spilling_off_is_fatal_only_where_disk_spill_is_required():
    off = SpillConfig(True, False, False, 0.8, 0.95, "/spill")
    assert any("dask spilling is disabled" in m for m in levels(facts(spill_config=off), Intent())["FATAL"])
    lv = levels(facts(spill_config=off), intent_for(["python", "job.py"], {}))
    assert "FATAL" not in lv and any("dask spilling is disabled" in m for m in lv["WARNING"])


def test_the_report_lists_the_warnings_preflight_prints():
    report = diagnose(facts(spill_dir=READ_ONLY), intent=intent_for(["python", "job.py"], {}))
    assert report["ok"] and report["fatal"] == []
    assert len(report["warnings"]) == 1 and "read-only filesystem" in report["warnings"][0]
    assert report["intent"]["disk_spill"] == "optional"
    text = doctor.render_table(report)
    assert "python job.py" in text and "optional (`python job.py` is no dask worker" in text


def run_preflight(monkeypatch, capsys, f: Facts, argv: list[str], env: dict | None = None):
    monkeypatch.setattr(doctor, "collect", lambda spill_path=None: f)
    monkeypatch.delenv("RAPIDS_DISK_SPILL", raising=False)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    code = doctor.main(argv)
    return code, capsys.readouterr()


def test_preflight_of_a_hardened_cudf_job_warns_once_and_passes(monkeypatch, capsys):
    """docker run --read-only --tmpfs /tmp IMAGE python job.py: no spill mount, still runs."""
    code, out = run_preflight(monkeypatch, capsys, facts(spill_dir=READ_ONLY), ["--preflight", "--", "python", "job.py"])
    assert code == 0 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rapids-doctor: WARNING: spill dir /spill is on a read-only "
                                                   "filesystem")


def test_preflight_of_a_worker_or_with_required_still_refuses(monkeypatch, capsys):
    code, out = run_preflight(monkeypatch, capsys, facts(spill_dir=READ_ONLY),
                              ["--preflight", "--", "dask", "cuda", "worker", "tcp://s:8786"])
    assert code == doctor.FATAL_EXIT
    assert out.err.strip().splitlines() == ["rapids-doctor: FATAL: spill dir /spill is on a read-only filesystem: no "
                                            "spill directory is mounted there; mount a host directory (docker run "
                                            "-v HOST_DIR:/spill)"]
    code, _ = run_preflight(monkeypatch, capsys, facts(spill_dir=READ_ONLY), ["--preflight", "--", "python", "job.py"],
                            {"RAPIDS_DISK_SPILL": "required"})
    assert code == doctor.FATAL_EXIT
    code, _ = run_preflight(monkeypatch, capsys, facts(spill_dir=READ_ONLY),
                            ["--preflight", "--disk-spill", "optional", "--", "rapids-smoke", "spill"])
    assert code == 0
    code, _ = run_preflight(monkeypatch, capsys, facts(spill_dir=READ_ONLY), ["--preflight"])   # no command
    assert code == doctor.FATAL_EXIT


@pytest.mark.parametrize("command", [["python", "job.py"], ["dask", "worker", "tcp://s:8786"], []])
def test_preflight_says_unlimited_swap_in_the_tables_words(monkeypatch, capsys, command):
    """--memory-swap -1 makes the cap no cap: the quiet preflight says so too, the same line from the same rule."""
    f = facts(cgroup=CgroupMemory(1, GiB, None, None, swap_unlimited=True))
    swap = [x.message for x in findings_for(f, derive(f)) if x.message.startswith("swap is unlimited")]
    assert len(swap) == 1
    code, out = run_preflight(monkeypatch, capsys, f, ["--preflight", "--", *command] if command else ["--preflight"])
    assert code == 0 and out.out == ""
    assert out.err.strip().splitlines() == [f"rapids-doctor: WARNING: {swap[0]}"]
    code, out = run_preflight(monkeypatch, capsys, f, [])
    assert f"WARNING: [memory] {swap[0]}" in out.out.splitlines()


# ---- the entrypoint hands the doctor the command it is about to run ----

def entrypoint(tmp_path: Path, *command: str, **env: str) -> subprocess.CompletedProcess:
    """The real entrypoint and the real doctor (this checkout's, on this machine's facts)."""
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        shutil.copy2(BIN / "rapids-entrypoint", bin_dir / "rapids-entrypoint")
        doctor_sh = bin_dir / "rapids-doctor"
        doctor_sh.write_text(f'#!/bin/sh\nPYTHONPATH="{SRC}" exec "{sys.executable}" -m rapidship.runtime.doctor "$@"\n')
        doctor_sh.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAPIDS", "DASK_"))}
    base.update({"RAPIDS_SPILL_DIR": str(tmp_path / "not-mounted"), "RAPIDSHIP_PRUNE_RECORD": str(tmp_path / "none"),
                 **env})
    return subprocess.run(["sh", str(bin_dir / "rapids-entrypoint"), *command], env=base, capture_output=True,
                          text=True, timeout=120, check=False)


def test_entrypoint_runs_a_plain_job_without_a_spill_dir_and_stops_a_worker(tmp_path):
    job = entrypoint(tmp_path, sys.executable, "-c", "print('job ran')")
    assert job.returncode == 0, job.stderr
    assert job.stdout == "job ran\n"
    warnings = job.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith(f"rapids-doctor: WARNING: spill dir {tmp_path}/not-mounted "
                                                         "does not exist")
    worker = entrypoint(tmp_path, "dask", "cuda", "worker", "tcp://127.0.0.1:8786")
    assert worker.returncode == doctor.FATAL_EXIT and worker.stdout == ""
    assert worker.stderr.startswith(f"rapids-doctor: FATAL: spill dir {tmp_path}/not-mounted does not exist")
    insisted = entrypoint(tmp_path, sys.executable, "-c", "print('job ran')", RAPIDS_DISK_SPILL="required")
    assert insisted.returncode == doctor.FATAL_EXIT and insisted.stdout == ""
    off = entrypoint(tmp_path, "sh", "-c", "echo worker would run", RAPIDS_DOCTOR="off", RAPIDS_DISK_SPILL="required")
    assert off.returncode == 0 and off.stdout == "worker would run\n" and off.stderr == ""


# ---- a worker memory limit above the container's memory budget ----

@pytest.mark.parametrize("text, want", [
    ("2GB", 2 * 10**9), ("2 GB", 2 * 10**9), ("2GiB", 2 * GiB), ("2G", 2 * 10**9), ("1.5e9", 1_500_000_000),
    ("4000000000", 4 * 10**9), ("auto", None), ("0", None), ("0.5", None), ("1", None), ("lots", None), (None, None),
])
def test_dask_memory_limit_reads_sizes_as_dask_does(text, want):
    assert dask_memory_limit(text) == want


def test_worker_memory_limits_read_from_the_command():
    w = intent_for(["dask", "worker", "tcp://s:8786", "--nworkers", "2", "--memory-limit=600MB"], {})
    assert (w.memory_limit, w.workers, w.limit_source) == (600 * 10**6, 2, "dask worker --memory-limit")
    c = intent_for(["dask", "cuda", "worker", "--memory-limit", "2GB"], {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert (c.memory_limit, c.workers) == (2 * 10**9, 2)
    assert intent_for(["dask-cuda-worker", "--memory-limit", "2GB"], {}, gpu_count=4).workers == 4
    s = intent_for(["rapids-smoke", "spill", "--memory-limit", "2GB", "--workers", "3"], {})
    assert (s.memory_limit, s.workers) == (2 * 10**9, 3)
    assert intent_for(["rapids-smoke", "spill", "--mode", "gpu", "--memory-limit", "1g", "--workers", "3"],
                      {}).workers == 1
    assert intent_for(["python", "job.py", "--memory-limit", "2GB"], {}).memory_limit is None


def test_a_worker_limit_above_a_1gib_cap_is_one_fatal_naming_both_numbers():
    intent = intent_for(["dask", "cuda", "worker", "--memory-limit", "2GB"], {})
    fatal = levels(facts(), intent)["FATAL"]
    assert len(fatal) == 1
    assert fatal[0].startswith("worker memory limit above the container's memory budget: dask cuda worker "
                               "--memory-limit 2000000000 B (1.86 GiB) > 1073741824 B (1.00 GiB, cgroup v1 limit)")
    assert f"at most {GiB - 384 * MiB} B (640.00 MiB)" in fatal[0]
    two = levels(facts(), intent_for(["dask", "worker", "--nworkers", "2", "--memory-limit", "600MB"], {}))["FATAL"]
    assert "x 2 workers = 1200000000 B" in two[0] and "at most 335544320 B" in two[0]


def test_a_worker_limit_into_the_headroom_warns_and_one_that_fits_is_quiet():
    lv = levels(facts(), intent_for(["dask", "worker", "--memory-limit", "900MB"], {}))
    assert "FATAL" not in lv and any("leaves less than 384.00 MiB" in m for m in lv["WARNING"])
    assert levels(facts(), intent_for(["dask", "worker", "--memory-limit", "600MiB"], {})) == {}


def test_preflight_and_the_doctor_refuse_a_limit_above_the_cap(monkeypatch, capsys):
    code, out = run_preflight(monkeypatch, capsys, facts(),
                              ["--preflight", "--", "dask", "worker", "tcp://s:8786", "--memory-limit", "2GB"])
    assert code == doctor.FATAL_EXIT
    assert out.err.startswith("rapids-doctor: FATAL: worker memory limit above the container's memory budget")
    code, out = run_preflight(monkeypatch, capsys, facts(), ["--memory-limit", "2GB"])
    assert code == doctor.FATAL_EXIT
    assert "FATAL: [memory-limit] worker memory limit above the container's memory budget: rapids-doctor " \
           "--memory-limit 2000000000 B (1.86 GiB) > 1073741824 B" in out.out
