"""A conda env's layer plan and its lock's parts: the pip plan's rules, fed by a conda lock.

The lock lines are what `lock_conda` writes (tests/unit/lock/test_conda_lock.py makes them from a
real channel); here they are written out so each rule shows on its own.
"""

from __future__ import annotations

import json

import pytest

from rapidship.builder.install_lock import read_lock
from rapidship.builder.layer_record import measure
from rapidship.render.layer_plan import CONDA_REST, GROUP_DISC_BYTES, conda_lock_parts, from_conda_locks, kind_of, plan_layers

HEAD = "# rapidship conda lock for env rapids (...)\n# lock-format: 1\n# platform: linux-64\n# spec-sha256: {spec}\n"


def _rec(name: str, version: str, size: int, channel: str = "conda-forge", noarch: str | None = None) -> dict:
    fn = f"{name}-{version}-h0_0.conda"
    return {"name": name, "version": version, "build": "h0_0", "build_number": 0, "subdir": "noarch" if noarch else "linux-64",
            "noarch": noarch, "depends": [], "constrains": [], "size": size, "sha256": f"{abs(hash(fn)):064x}"[:64],
            "md5": None, "license": "BSD", "channel": channel, "fn": fn, "url": f"https://mirror.example/{channel}/{fn}"}


def _lock(records: list[dict], spec: str = "0" * 64) -> str:
    return HEAD.format(spec=spec) + "".join(json.dumps(r, sort_keys=True) + "\n" for r in sorted(records, key=lambda r: r["name"]))


RECORDS = [
    _rec("python", "3.11.9", 31_000_000),
    _rec("numpy", "2.4.1", 8_000_000),
    _rec("libcublas", "12.9.1.4", 400_000_000, channel="nvidia"),
    _rec("cuda-cudart", "12.9.79", 200_000),
    _rec("libcudf", "26.10.02", 900_000_000, channel="rapidsai"),
    _rec("dask-cuda", "26.10.00", 150_000, channel="rapidsai", noarch="python"),
    _rec("toolz", "1.0.0", 52_000, noarch="python"),
    _rec("tzdata", "2025b", 120_000, noarch="generic"),
    _rec("libcurl", "8.14.1", 400_000),
]


def test_kinds_come_from_the_channel_or_the_name_of_a_cuda_package():
    assert kind_of("libcudf", False, "rapidsai") == "rapids"
    assert kind_of("dask-cuda", True, "rapidsai") == "rapids"
    assert kind_of("libcublas", False, "nvidia") == "cuda"
    assert kind_of("libcublas", False, "conda-forge") == "cuda"     # conda-forge's CUDA packages too
    assert kind_of("cuda-cudart", False, "conda-forge") == "cuda"
    assert kind_of("libcurl", False, "conda-forge") == "compiled"   # not a CUDA library for its first letters
    assert kind_of("toolz", True, "conda-forge") == "python"
    assert kind_of("nvidia-cublas-cu12", False) == "cuda"          # the pip names read as before
    assert kind_of("cudf-cu12", False) == "rapids"


def test_a_conda_lock_plans_like_a_pip_lock_large_alone_small_grouped_the_env_last():
    plan = plan_layers(from_conda_locks([_lock(RECORDS)]), 80, rest=CONDA_REST)
    layers = {layer.name: [d.name for d in layer.distributions] for layer in plan.layers}
    # by releases a year per byte (a conda channel gives no history: each kind's), the fewest lowest
    assert list(layers) == ["cuda/libcublas", "rapids/libcudf", "compiled/python", "compiled/numpy", "compiled/small_1",
                            "cuda/small_1", "rapids/small_1", "python/small_1", "env"]
    assert layers["cuda/small_1"] == ["cuda-cudart"] and layers["compiled/small_1"] == ["libcurl"]
    assert layers["python/small_1"] == ["toolz", "tzdata"] and layers["env"] == []
    assert plan.to_json("the conda locks")["rest"] == "env"
    assert all(d.disc_bytes > GROUP_DISC_BYTES for layer in plan.layers if "small" not in layer.name
               for d in layer.distributions)


def test_one_plan_serves_every_arch_each_package_weighs_its_largest_file():
    arm = [dict(r, size=r["size"] * 2 if r["name"] == "libcurl" else r["size"]) for r in RECORDS if r["name"] != "tzdata"]
    dists = {d.name: d for d in from_conda_locks([_lock(RECORDS), _lock(arm)])}
    assert dists["libcurl"].wheel_bytes == 800_000 and "tzdata" in dists   # an amd64-only package is planned too


def test_each_layer_gets_its_packages_and_python_as_a_companion_where_noarch_needs_it():
    plan = plan_layers(from_conda_locks([_lock(RECORDS)]), 80, rest=CONDA_REST)
    parts = conda_lock_parts(_lock(RECORDS), plan)
    assert "env" not in parts                                  # the rest layer installs nothing
    header, recs = read_lock(parts["python/small_1"])
    assert header == {"lock-format": "1", "platform": "linux-64", "layer": "python/small_1"}
    assert [(r["name"], r.get("companion", False)) for r in recs] == [("toolz", False), ("tzdata", False),
                                                                        ("python", True)]
    rapids = read_lock(parts["rapids/small_1"])[1]   # dask-cuda is noarch: python
    assert [r["name"] for r in rapids] == ["dask-cuda", "python"] and rapids[1]["companion"]
    assert [r["name"] for r in read_lock(parts["compiled/python"])[1]] == ["python"]   # installed there, once
    assert all(not r.get("companion") for r in read_lock(parts["cuda/libcublas"])[1])


def test_a_relock_that_changes_one_package_changes_that_layer_s_part_only():
    plan = plan_layers(from_conda_locks([_lock(RECORDS)]), 80, rest=CONDA_REST)
    before = conda_lock_parts(_lock(RECORDS), plan)
    patched = [dict(r, version="2.4.2", fn="numpy-2.4.2-h0_0.conda") if r["name"] == "numpy" else r for r in RECORDS]
    after = conda_lock_parts(_lock(patched, spec="1" * 64), plan)   # a pin in the spec moves its digest too
    assert [layer for layer in before if before[layer] != after[layer]] == ["compiled/numpy"]


def test_a_package_no_layer_holds_is_named():
    plan = plan_layers(from_conda_locks([_lock(RECORDS)]), 80, rest=CONDA_REST)
    with pytest.raises(ValueError, match="zlib is in the lock but in no planned layer"):
        conda_lock_parts(_lock(RECORDS + [_rec("zlib", "1.3.1", 90_000)]), plan)


def test_a_conda_layer_is_measured_per_package_from_its_conda_meta(tmp_path):
    layer = tmp_path / "layer"
    (layer / "lib/python3.11/site-packages/toolz/__pycache__").mkdir(parents=True)
    (layer / "lib/python3.11/site-packages/toolz/__init__.py").write_text("x = 1\n")
    (layer / "lib/python3.11/site-packages/toolz/__pycache__/__init__.cpython-311.pyc").write_bytes(b"\0" * 40)
    dist = layer / "lib/python3.11/site-packages/toolz-1.0.0.dist-info"   # pip's name for it: conda-meta decides
    dist.mkdir()
    (dist / "METADATA").write_text("Name: Toolz\n\n")
    (dist / "RECORD").write_text("toolz/__init__.py,,\ntoolz-1.0.0.dist-info/RECORD,,\n")
    (layer / "conda-meta").mkdir()
    (layer / "conda-meta/toolz-1.0.0-pyh0_0.json").write_text(json.dumps({"name": "toolz", "version": "1.0.0", "build": "pyh0_0", "files": [
        "lib/python3.11/site-packages/toolz/__init__.py", "lib/python3.11/site-packages/toolz-1.0.0.dist-info/METADATA",
        "lib/python3.11/site-packages/toolz-1.0.0.dist-info/RECORD"]}))
    held = measure(layer, "python/small_1")
    assert held["files"] == 5 and set(held["distributions"]) == {"toolz"}
    assert held["distributions"]["toolz"]["files"] == 5   # its sources, bytecode, dist-info and own record
