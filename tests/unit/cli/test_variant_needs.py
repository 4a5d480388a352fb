"""A variant this machine cannot build says what it needs first: `invoke build` names the base and
the mirror and the commands that provide each before the lock it lacks, and the local CI profile
takes the variants it can build, naming each one it left out and why."""

from __future__ import annotations

import subprocess

import yaml

from rapidship.config.matrix import load_matrix
from rapidship.config.needs import missing_here, needs, needs_sentence
from support.commands import ROOT


def invoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["invoke", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)


def test_build_of_a_conda_ubuntu_variant_says_what_it_needs_before_the_lock():
    run = invoke("build", "--variant", "cuda12-ubuntu22")
    assert run.returncode == 2, run.stderr
    first = run.stderr.split("\n")[0]
    base, mirror, lock = (first.find(s) for s in ("Ubuntu 22.04 base in the registry", "a conda mirror",
                                                  "locks/rapids/py3.11-cuda12.9/conda-amd64.lock"))
    assert -1 < base < mirror < lock, first
    for command in ("invoke harbor.apply", "invoke base --os ubuntu22 --mirror URL",
                    "invoke lock --env rapids --conda-channel NAME=URL", "--conda-channel URL"):
        assert command in first, (command, first)
    assert "Traceback" not in run.stderr


def test_the_needs_follow_the_matrix():
    m = load_matrix(ROOT / "variants.yaml")
    assert missing_here(m.get("cpu-debian12")) == [] and missing_here(m.get("cuda12-debian12")) == []
    assert [n.what for n in missing_here(m.get("cuda12-kylin10"))] == ["a Kylin V10-SP3 base in the registry",
                                                                        "a conda mirror"]
    assert "mmdebstrap cannot make an RPM-family base" in needs(m.get("cuda12-kylin10"))[0].provided_by
    assert needs_sentence(m.get("cuda13-ubuntu24")).startswith("cuda13-ubuntu24 needs an Ubuntu 24.04 base")


def test_the_local_pipeline_takes_what_this_machine_can_build_and_names_what_it_left_out(tmp_path):
    out = tmp_path / "child.yml"
    run = invoke("ci.generate", "--profile", "local", "--out", str(out))
    assert run.returncode == 0, run.stderr
    jobs = yaml.safe_load(out.read_text())
    built = {name.split(":")[1] for name in jobs if name.startswith("build:")}
    assert "cuda12-kylin10" not in built and {"cpu-debian12", "cuda12-debian12"} <= built
    assert "left out cuda12-kylin10: needs its kylin base from a registry" in run.stderr, run.stderr
    named = invoke("ci.generate", "--profile", "local", "--variant", "cuda12-kylin10", "--out", str(out))
    assert named.returncode == 2 and "cuda12-kylin10 needs its kylin base from a registry" in named.stderr
