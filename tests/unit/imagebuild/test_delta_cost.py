"""The delta-cost table's pure core, and the defect it measures: with the env in parts by kind (the
layout before layers were planned per distribution), a patch of one small package re-ships its whole
part; with the plan render makes from the lock, every distribution of both committed locks is within
1.25 x its own bytes + 2 MB. Sizes are the committed wheel-sizes records (what `invoke lock` writes),
each layer weighed as the sum of what it holds."""

from __future__ import annotations

import json
import re

import pytest

from support.commands import ROOT

from rapidship.imagebuild.delta_cost import GOAL_SLACK_BYTES, Cost, cost_table, summary, within_goal
from rapidship.render.layer_plan import from_sizes, plan_layers

RECORDS = 2_427  # zstd bytes of the image's env records (layers.json, trims.json, dedupe.json) on cpu-debian12


def _sizes(env: str) -> dict[str, dict]:
    return json.loads((ROOT / "locks" / env / "wheel-sizes.json").read_text())["distributions"]


def _todays_part(name: str, pure: bool) -> str:
    """The parts of the layout this change replaces (split_layers.part_of before): one per CUDA wheel,
    then rapids, compiled, python."""
    if name.startswith("nvidia-"):
        return f"cuda/{name}"
    if re.search(r"-cu\d+$", name) or name in {"dask-cuda", "rapids-dask-dependency", "rapids-logger",
                                                 "distributed-ucxx", "dask-cudf"}:
        return "rapids"
    return "python" if pure else "compiled"


def _table(layer_of: dict[str, str], own: dict[str, int]) -> list[Cost]:
    names = sorted(set(layer_of.values()))
    index = {layer: i for i, layer in enumerate(names)}
    layer_bytes = {i: sum(own[d] for d in own if layer_of[d] == layer) for layer, i in index.items()}
    layer_bytes[len(names)] = RECORDS
    return cost_table(own, {d: {index[layer_of[d]]} for d in own}, layer_bytes, {len(names)})


def test_the_goal_and_the_order_of_the_table():
    assert within_goal(1_250_000 + GOAL_SLACK_BYTES, 1_000_000) and not within_goal(1_250_001 + GOAL_SLACK_BYTES, 1_000_000)
    rows = cost_table({"a": 100, "b": 10_000_000, "c": 50}, {"a": {1}, "b": {1}, "c": {2}}, {1: 10_000_100, 2: 60, 3: 7},
                      {3})
    assert [r.distribution for r in rows] == ["a", "c", "b"]  # worst ratio first
    assert rows[0].layers == (1, 3) and rows[0].carried_bytes == 10_000_107 and not rows[0].within_goal
    assert rows[1].within_goal and rows[2].ratio == pytest.approx(1.0000107)
    doc = summary(rows, [])
    assert doc["misses"] == 1 and doc["worst"]["distribution"] == "a" and json.dumps(doc)


@pytest.mark.parametrize("env", ["dask-cpu", "rapids-pip"])
def test_todays_parts_miss_the_goal_and_the_plan_meets_it(env):
    sizes = _sizes(env)
    own = {name: d["wheel_bytes"] for name, d in sizes.items()}
    today = _table({name: _todays_part(name, d["pure"]) for name, d in sizes.items()}, own)
    misses = [r for r in today if not r.within_goal]
    assert len(misses) >= len(own) // 2, [r.distribution for r in today[:5]]  # the defect: most packages
    assert today[0].ratio > 50  # a small pure-Python package re-ships all of them
    plan = plan_layers(from_sizes(sizes), 80)
    planned = _table({d.name: layer.name for layer in plan.layers for d in layer.distributions}, own)
    assert {r.distribution for r in planned} == set(own)
    assert all(r.within_goal for r in planned), [r.to_json() for r in planned if not r.within_goal]
    assert len(plan.layers) <= 80


def test_a_tight_budget_is_kept_and_said_in_the_plan():
    plan = plan_layers(from_sizes(_sizes("rapids-pip")), 20)
    assert len(plan.layers) == len(set(plan.names)) <= 20 and plan.group_bytes >= 4 * 512 * 1024
    assert plan.layers[-1].name == "venv"
    with pytest.raises(ValueError):
        plan_layers(from_sizes(_sizes("dask-cpu")), 4)


def test_a_conda_image_names_its_files_by_conda_meta():
    """A conda image's table: the conda-meta records name each file's package (a file a wheel-made
    package's RECORD names too goes to the conda package, as the builder's reading decides), and each
    record goes with its package; before, python and every conda-only file counted to nobody."""
    import io
    import tarfile

    from support.signed_discs import layer_tar as _tar

    from rapidship.imagebuild.delta_cost import _owners

    site = "opt/rapids/lib/python3.11/site-packages"
    numpy = {"name": "numpy", "version": "2.4.5", "build": "py311h0_0",
             "files": ["lib/python3.11/site-packages/numpy/__init__.py", "lib/libnumpy-extra.so"]}
    python = {"name": "python", "version": "3.11.2", "build": "deb_0", "files": ["bin/python3.11"]}
    layer1 = _tar({"opt/rapids/bin/python3.11": b"\x7fELF", "opt/rapids/conda-meta/python-3.11.2-deb_0.json":
                   json.dumps(python).encode()})
    layer2 = _tar({f"{site}/numpy/__init__.py": b"x = 1\n", "opt/rapids/lib/libnumpy-extra.so": b"so",
                   f"{site}/numpy-2.4.5.dist-info/METADATA": b"Name: NumPy-Wheel\n",
                   f"{site}/numpy-2.4.5.dist-info/RECORD": b"numpy/__init__.py,,\n",
                   "opt/rapids/conda-meta/numpy-2.4.5-py311h0_0.json": json.dumps(numpy).encode()})
    with tarfile.open(fileobj=io.BytesIO(_tar({"1/layer.tar": layer1, "2/layer.tar": layer2}))) as outer:
        owned, _ = _owners(outer, ["1/layer.tar", "2/layer.tar"])
    from pathlib import Path
    assert owned[Path(f"{site}/numpy/__init__.py")] == "numpy"
    assert owned[Path("opt/rapids/lib/libnumpy-extra.so")] == "numpy"
    assert owned[Path("opt/rapids/conda-meta/numpy-2.4.5-py311h0_0.json")] == "numpy"
    assert owned[Path("opt/rapids/bin/python3.11")] == "python"
    assert owned[Path("opt/rapids/conda-meta/python-3.11.2-deb_0.json")] == "python"


def test_a_file_two_packages_ship_belongs_in_each_layer_to_the_package_installed_there():
    """NVIDIA's packages share paths: curand's layer (lower) holds the shared file, cccl's names it too
    and links its copy down. A cccl patch does not change curand's layer, so there the file is
    curand's (the RAPIDS-scale conda image counted it to cccl, whose 1.7 MB patch then 'carried' 40 MB)."""
    import io
    import tarfile
    from pathlib import Path

    from support.signed_discs import layer_tar as _tar

    from rapidship.imagebuild.delta_cost import _owners, owner_here

    shared = "lib/python3.11/site-packages/nvidia/__init__.py"
    curand = {"name": "nvidia-curand-cu12", "version": "10.3", "build": "0", "files": [shared, "lib/libcurand.so"]}
    cccl = {"name": "nvidia-cuda-cccl-cu12", "version": "12.9", "build": "0", "files": [shared, "include/cub.h"]}
    layers = {"1/layer.tar": _tar({f"opt/rapids/{shared}": b"", "opt/rapids/lib/libcurand.so": b"so",
                                   "opt/rapids/conda-meta/nvidia-curand-cu12-10.3-0.json": json.dumps(curand).encode()}),
              "2/layer.tar": _tar({"opt/rapids/include/cub.h": b"h",
                                   "opt/rapids/conda-meta/nvidia-cuda-cccl-cu12-12.9-0.json": json.dumps(cccl).encode()})}
    with tarfile.open(fileobj=io.BytesIO(_tar(layers))) as outer:  # docker save's outer archive
        owned, by_layer = _owners(outer, list(layers))
    path = Path(f"opt/rapids/{shared}")
    assert owned[path] == "nvidia-cuda-cccl-cu12"  # the last record read names it: what the table used
    assert owner_here(path, 0, owned, by_layer) == "nvidia-curand-cu12"
    assert owner_here(Path("opt/rapids/include/cub.h"), 1, owned, by_layer) == "nvidia-cuda-cccl-cu12"


def test_a_year_of_patches_is_each_layers_releases_times_the_bytes_above_it():
    from rapidship.imagebuild.delta_cost import LayerCost, yearly

    layers = [LayerCost(0, "apt-get install ...", 1, (), False, 100),   # the base: no rate known
              LayerCost(1, "python/small_1", 1, (), False, 10),         # patched often, but low
              LayerCost(2, "cuda/big", 1, (), False, 1000),
              LayerCost(3, "env-records", 1, (), True, 1)]
    year = yearly(layers, {"python/small_1": 12, "cuda/big": 2})
    assert year["plan_bytes"] == 12 * 1001 + 2 * 1
    # the best order of the same layers puts the big, seldom patched one lowest: 12 x 1 + 2 x 11
    assert year["best_order_bytes"] == 2 * (10 + 1) + 12 * 1
    assert year["ratio"] == round(12014 / 34, 4)
    assert year["base_update_refed_bytes"] == 1011  # every layer from the env's lowest up
    assert "per_year" in summary([], layers, {"cuda/big": 2}) and "per_year" not in summary([], layers)
