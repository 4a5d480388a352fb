"""A gpu_archs GPU the locked wheels carry no device code for is refused at render time, from the
coverage recorded beside the lock (`invoke device-code`, read from the built images' prune records)."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from rapidship.config.matrix import parse_matrix
from rapidship.errors import ConfigError
from rapidship.render import coverage
from rapidship.render.dockerfile import render
from support.commands import ROOT


def variant(gpu_archs):
    doc = yaml.safe_load((ROOT / "variants.yaml").read_text())
    doc["overrides"]["cuda12-debian12"]["gpu_archs"] = gpu_archs
    return parse_matrix(yaml.safe_dump(doc), "variants.yaml").variants["cuda12-debian12"]


def test_the_cuda_rule_decides_what_runs_where():
    assert coverage.runs_on(["sm_80", "sm_86"], 89)            # same major, lower minor: runs
    assert not coverage.runs_on(["sm_80", "sm_86"], 90)        # never across majors
    assert coverage.runs_on(["sm_90a"], 90) and not coverage.runs_on(["sm_90a"], 100)  # arch-specific: exact
    assert coverage.runs_on(["sm_70", "ptx_80"], 121)          # PTX: JIT for any later GPU
    assert not coverage.runs_on(["ptx_120"], 90)


def test_the_committed_coverage_passes_the_fleets_and_refuses_a_gpu_no_wheel_runs_on(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    for arch in ("amd64", "arm64"):
        doc = json.loads((ROOT / "locks" / "rapids-pip" / f"device-code-{arch}.json").read_text())
        assert doc["arch"] == arch and len(doc["files"]) >= 20
    # A100 + H100 on amd64, GH200 + GB10 on arm64: every library has code for them
    render(variant({"amd64": [80, 90], "arm64": [90, 121]}), out_root=tmp_path)
    # sm_61 (a Pascal P100-class card): RAPIDS' libraries start at sm_70, and have no PTX old enough
    with pytest.raises(ConfigError) as caught:
        render(variant({"amd64": [80, 90], "arm64": [61, 90]}), out_root=tmp_path)
    err = caught.value
    assert err.where == "variants.yaml: gpu_archs of cuda12-debian12 (arm64)"
    assert "sm_61 has no device code in" in err.problem and "libcudf" in err.problem
    assert "drop 61 from gpu_archs" in err.fix


def test_a_coverage_of_another_lock_is_not_trusted(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    locks = tmp_path / "locks"
    shutil.copytree(ROOT / "locks", locks)
    shutil.copytree(ROOT / "envs", tmp_path / "envs")
    lock = locks / "rapids-pip" / "requirements.txt"
    lock.write_text(lock.read_text() + "# another lock\n")
    v = variant([61, 90])
    note = coverage.check(v, "amd64", (b"other bytes"), locks)
    assert "describes another lock" in note
    render(v, out_root=tmp_path / "build", locks=locks)  # not refused here: the build's pruner is the check
    (locks / "rapids-pip" / "device-code-amd64.json").write_text("{not json")
    with pytest.raises(ConfigError, match="is not a device-code coverage document"):
        render(v, out_root=tmp_path / "build", locks=locks)
