"""Size report: the pure summary, the builder's trim measurement, and the task on a real image."""

from __future__ import annotations

import json

import pytest

from support.commands import invoke

from support.commands import ROOT  # noqa: E402

from rapidship.builder.measure_trims import measure  # noqa: E402
from rapidship.imagebuild.size_report import Entry, summarize  # noqa: E402

SP = "opt/rapids/lib/python3.11/site-packages"


def test_summary_lists_the_largest_directories_and_files_against_the_budget():
    entries = [Entry(f"{SP}/nvidia/cublas/lib/libcublasLt.so.12", 700), Entry(f"{SP}/nvidia/curand/lib/x.so", 100),
               Entry(f"{SP}/libcudf/lib64/libcudf.so", 900), Entry("usr/bin/bash", 10)]
    rep = summarize(entries, variant="v", arch="amd64", ref="r", image_bytes=1800, zstd_bytes=700, budget_bytes=1750)
    assert rep.files_bytes == 1710 and rep.files == 4
    assert not rep.within_budget and rep.headroom_bytes == -50
    assert rep.largest_files[0].path == f"/{SP}/libcudf/lib64/libcudf.so"
    dirs = [d.path for d in rep.largest_dirs]
    # /opt, /opt/rapids ... are (almost) all site-packages: only the levels that split are shown
    assert dirs[:4] == [f"/{SP}", f"/{SP}/libcudf/lib64", f"/{SP}/nvidia", f"/{SP}/nvidia/cublas/lib"]
    assert "/opt" not in dirs and f"/{SP}/libcudf" not in dirs
    ok = summarize(entries, variant="v", arch="amd64", ref="r", image_bytes=1700, zstd_bytes=None, budget_bytes=1750)
    assert ok.within_budget and ok.to_json()["headroom_bytes"] == 50


def test_trim_measurement_follows_conda_pack_and_find_semantics(tmp_path):
    env = tmp_path / "env"
    for rel, size in {"include/a.h": 10, "lib/libx.a": 20, "lib/libx.so": 40,
                      "lib/python3.11/site-packages/pkg/tests/test_a.py": 5,
                      "lib/python3.11/site-packages/pkg/__pycache__/m.cpython-311.pyc": 7}.items():
        (env / rel).parent.mkdir(parents=True, exist_ok=True)
        (env / rel).write_bytes(b"x" * size)
    pack = measure(env, ["include/*", "*.a", "lib/python*/site-packages/*/tests/*"], "pack")
    assert pack["before_bytes"] == 82 and pack["trimmed_bytes"] == 35 and pack["pyc_bytes"] == 7
    assert pack["patterns"] == {"include/*": 10, "*.a": 20, "lib/python*/site-packages/*/tests/*": 5}
    found = measure(env, ["*/site-packages/*/tests", "*/include"], "find")  # a matched directory takes its files
    assert found["patterns"] == {"*/site-packages/*/tests": 5, "*/include": 10}
    assert str(env) not in json.dumps(pack)  # the record lands in the image: no build prefix in it


@pytest.mark.docker
def test_size_report_task_passes_within_the_budget_and_fails_over_it(cpu_image, tmp_path):
    proc = invoke("size-report", "--variant", "cpu-debian12", "--arch", "amd64", "--json")
    rep = json.loads(proc.stdout)
    assert rep["ref"] == cpu_image.ref and rep["image_bytes"] == cpu_image.size_bytes
    assert rep["within_budget"] and rep["zstd_bytes"] == cpu_image.zstd_bytes
    assert rep["trims"]["style"] == "find" and rep["trims"]["after_bytes"] <= rep["trims"]["before_bytes"]
    assert any(d["path"].startswith("/opt/rapids/lib/python3.11/site-packages") for d in rep["largest_dirs"])
    assert json.loads((ROOT / "build/cpu-debian12/size-amd64.json").read_text())["image_bytes"] == cpu_image.size_bytes
    tight = tmp_path / "variants.yaml"
    tight.write_text((ROOT / "variants.yaml").read_text().replace("budget_bytes: 4700000000", "budget_bytes: 1000000"))
    over = invoke("size-report", "--variant", "cpu-debian12", "--arch", "amd64", "--variants-file", str(tight), check=False)
    assert over.returncode == 1
    assert "over the budget: cpu-debian12 amd64" in over.stderr
