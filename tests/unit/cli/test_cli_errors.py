"""The task layer's own promises: bad input is exit 2 with one message, never a traceback."""

from __future__ import annotations

import subprocess

import pytest

from support.commands import ROOT


def invoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["invoke", *args], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("args,message", [
    (["build", "--no-such-flag"], "No idea what '--no-such-flag' is"),
    (["prune", "--keep"], "needed value and was not given one"),
    (["no-such-task"], "No idea what 'no-such-task' is"),
    (["lock", "--wheels"], "--wheels: is a check of the committed locks"),
    (["deploy", "--variant", "cpu-debian12", "--target", "swarm"], "--target: 'swarm' is not a deploy target"),
])
def test_flags_invoke_cannot_parse_exit_2(args, message):
    run = invoke(*args)
    assert run.returncode == 2 and message in run.stderr and "fix:" in run.stderr


def test_an_output_path_in_the_way_is_named_not_a_traceback(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    base = ["ci.generate", "--profile", "local", "--variant", "cpu-debian12"]
    run = invoke(*base, "--out", str(blocker / "pipeline.yml"))
    assert run.returncode == 2 and f"{blocker}: is in the way" in run.stderr and "Traceback" not in run.stderr
    run = invoke(*base, "--out", str(tmp_path))
    assert run.returncode == 2 and "is a directory where a file is expected" in run.stderr


def test_running_from_a_subfolder_says_where_to_run_instead_of_a_wrong_reason():
    # invoke finds tasks.py in a parent folder; the tasks read variants.yaml, templates/ and build/
    # where they start, so a subfolder would otherwise end in "template not found" or the like.
    run = subprocess.run(["invoke", "render", "--variant", "cpu-debian12"], cwd=ROOT / "docs",
                         capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "not in the project root" in run.stderr and f"cd {ROOT}" in run.stderr
