"""The GPU jobs of bench/gpu, checked where no GPU is: the runner knows every job, each job's steps
are valid bash and name only programs that exist, every program imports, and the plan carries
what the job needs in calls that fit one carry."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.commands import ROOT

GPU = ROOT / "bench" / "gpu"


def load(path: Path, name: str):
    """A bench/gpu program as a module of its own name, without putting its folder on sys.path
    (where its names would shadow any other module's for the rest of the run)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module      # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


carry = load(GPU / "carry.py", "gpu_jobs_carry")   # the runner's table of jobs

PROGRAMS = sorted((GPU / "jobs").glob("*.py"))
SHELL = [GPU / "run.sh", GPU / "lib.sh", *sorted((GPU / "jobs").glob("*.sh"))]


def test_every_job_has_its_steps_and_every_steps_file_is_a_job():
    assert {p.stem for p in (GPU / "jobs").glob("*.sh")} == set(carry.JOBS)
    assert all(job.steps.is_file() and job.wheels in ("parts", "dir", "none") for job in carry.JOBS.values())


@pytest.mark.parametrize("script", SHELL, ids=lambda p: p.name)
def test_the_shell_parses(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_steps_run_only_programs_that_exist_and_every_program_is_run():
    named: set[str] = set()
    for steps in [*(GPU / "jobs").glob("*.sh"), GPU / "lib.sh"]:   # lib.sh: the helpers the steps share
        named |= set(re.findall(r"\$HERE/jobs/(\w+\.py)", steps.read_text()))
        assert "bench/gpu_" not in steps.read_text(), f"{steps.name} names a script that moved"
    assert named == {p.name for p in PROGRAMS}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_every_program_imports(program):
    module = load(program, f"gpu_job_{program.stem}")   # its main() only runs as __main__
    assert callable(getattr(module, "main", None))


def test_no_bench_folder_is_put_on_the_import_path():
    assert not [p for p in sys.path if Path(p).resolve().is_relative_to(ROOT / "bench")], sys.path


def whl(root: Path, *files: tuple[str, int]) -> Path:
    for name, size in files:
        path = root / ".whl" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * size)
    return root


def test_wheel_parts_go_one_carry_at_a_time_and_the_job_runs_with_the_last(tmp_path):
    root = whl(tmp_path, ("SUM", 80), ("p00", 60), ("p01", 60), ("p02", 20))
    calls = carry.plan(carry.JOBS["smoke_big"], ["--x"], root, budget=100)
    assert calls == [{"carry": [".whl/SUM", ".whl/p00"], "command": "bash bench/gpu/run.sh --gather"},
                     {"carry": [".whl/SUM", ".whl/p01", ".whl/p02"], "command": "bash bench/gpu/run.sh smoke_big --x"}]


def test_a_folder_of_wheels_and_the_extra_files_go_with_the_job(tmp_path):
    root = whl(tmp_path, ("w/a.whl", 1), ("w/b.whl", 1), ("prometheus.gz", 1), ("prometheus.sha256", 1))
    assert carry.plan(carry.JOBS["metrics"], [], root) == [
        {"carry": [".whl/w/a.whl", ".whl/w/b.whl", ".whl/prometheus.gz", ".whl/prometheus.sha256"],
         "command": "bash bench/gpu/run.sh metrics"}]
    assert carry.plan(carry.JOBS["forms"], ["nccl", "tree"], tmp_path / "bare") == [
        {"carry": [], "command": "bash bench/gpu/run.sh forms nccl tree"}]


def test_nothing_to_carry_is_said_before_any_call(tmp_path):
    with pytest.raises(SystemExit, match=r"prune: nothing to carry at \['.whl/SUM'\]"):
        carry.plan(carry.JOBS["prune"], [], whl(tmp_path, ("p00", 1)))
    with pytest.raises(SystemExit, match="round2: nothing to carry"):
        carry.plan(carry.JOBS["round2"], [], tmp_path)


def test_the_runner_asks_the_table_and_refuses_an_unknown_job():
    plan = subprocess.run([sys.executable, str(GPU / "carry.py"), "wheels", "metrics"], capture_output=True,
                          text=True, check=True)
    assert plan.stdout == "dir\n"
    unknown = subprocess.run(["bash", "bench/gpu/run.sh", "no-such-job"], cwd=ROOT, capture_output=True,
                             text=True, check=False)
    assert unknown.returncode == 2 and "no GPU job 'no-such-job': one of prune, forms" in unknown.stderr
    listed = subprocess.run([sys.executable, str(GPU / "carry.py")], capture_output=True, text=True, check=True)
    assert [line.split()[0] for line in listed.stdout.splitlines()] == list(carry.JOBS)
    assert json.loads(subprocess.run([sys.executable, str(GPU / "carry.py"), "plan", "nccl"], capture_output=True,
                                     text=True, check=True).stdout)["calls"][0]["command"] == "bash bench/gpu/run.sh nccl"
