"""Every task answers `--help` (even one with a required value), short flags mean one thing in
every task and -h is help's alone; a needed flag left out is one error naming it, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rapidship.cli.options import SHORT_FLAGS
from support.commands import ROOT


def collection():
    sys.path.insert(0, str(ROOT))
    import tasks  # noqa: PLC0415 - the project's own invoke collection

    return tasks.ns


def invoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["invoke", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60)


def test_short_flags_are_the_table_s_and_never_h():
    ns = collection()
    meaning: dict[str, set[str]] = {}
    for name in ns.task_names:
        for arg in ns[name].get_arguments():
            long, *short = arg.names
            assert all(len(s) == 1 and s.isalpha() for s in short), (name, arg.names)   # no `--` short flag
            for s in short:
                meaning.setdefault(s, set()).add(long)
    assert "h" not in meaning
    assert all(len(longs) == 1 for longs in meaning.values()), meaning
    assert {s: longs.pop() for s, longs in meaning.items()} == {v: k for k, v in SHORT_FLAGS.items()
                                                                 if v in meaning}


def test_every_task_answers_help_in_process(capsys):
    """`invoke TASK --help` for every task, through invoke's own Program with the project's parse step."""
    from invoke import Program

    ns = collection()
    for name in ns.task_names:
        Program(namespace=ns).run(["invoke", name, "--help"], exit=False)
        out = capsys.readouterr().out
        assert out.startswith(f"Usage: invoke [--core-opts] {name}"), (name, out[:300])
        assert "--=" not in out and "--, " not in out, (name, out)


@pytest.mark.parametrize("args", [["deploy", "--help"], ["prune", "--help"], ["push", "-h"],
                                  ["deploy", "--variant", "cpu-debian12", "--help"]])
def test_help_works_where_a_value_was_wanted(args):
    """deploy, push and prune took `--help` as the value of a positional (their variant or path)."""
    run = invoke(*args)
    assert run.returncode == 0 and run.stdout.startswith("Usage: inv[oke] [--core-opts] " + args[0]), run.stderr


@pytest.mark.parametrize("args,flag", [(["deploy"], "--variant"), (["push"], "--variant"),
                                       (["ci.build", "--variant", "cpu-debian12"], "--arch")])
def test_a_needed_flag_left_out_is_named(args, flag):
    run = invoke(*args)
    assert run.returncode == 2 and f"error: {flag}: this task needs it" in run.stderr and "Traceback" not in run.stderr


def test_a_misspelt_flag_is_answered_with_the_closest_flag_of_that_task():
    proc = invoke("build", "--varient", "cpu-debian12")
    assert proc.returncode == 2
    assert "did you mean --variant?" in proc.stderr and "`invoke build --help`" in proc.stderr
    assert "TASK" not in proc.stderr
    far = invoke("matrix", "--zzz")
    assert far.returncode == 2 and "did you mean" not in far.stderr and "`invoke matrix --help`" in far.stderr


def test_deploy_prints_its_json_only_with_json(tmp_path):
    import json

    args = ["deploy", "--variant", "cpu-debian12", "--image", "sha256:" + "d" * 64, "--memory", "1g"]
    quiet = invoke(*args, "--out", str(tmp_path / "a"))
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "" and "wrote " in quiet.stderr and "worker(s) x 1024 MiB" in quiet.stderr
    loud = invoke(*args, "--out", str(tmp_path / "b"), "--json")
    assert loud.returncode == 0, loud.stderr
    assert json.loads(loud.stdout)["plan"]["memory_bytes"] == 2**30


def test_every_list_line_is_a_complete_sentence():
    # invoke --list shows a docstring's first line: a sentence cut there reads as a broken one
    ns = collection()
    cut = [name for name in ns.task_names
           if not (ns[name].__doc__ or "").strip().splitlines()[0].rstrip().endswith((".", ".)"))]
    assert cut == []


def test_the_gate_tasks_are_named_for_what_they_do_and_the_old_names_still_run():
    names = set(collection().task_names)
    assert {"gates", "scan-report", "harbor.scan"} <= names and not {"gate", "harbor.gate"} & names
    listed = invoke("--list").stdout
    lines = [line.split()[0] for line in listed.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    assert "scan-report" in lines and "harbor.scan" in lines and not {"gate", "harbor.gate"} & set(lines)
    old = invoke("gate")   # a hidden alias: the same task, the same error for its missing --report
    assert old.returncode == 2 and "--report" in old.stderr and "invoke scan-report" in old.stderr


def test_no_flag_is_answered_with_as_for_another_task():
    ns = collection()
    vague = [(name, flag) for name in ns.task_names for flag, text in ns[name].help.items() if "as for " in text]
    assert vague == []
