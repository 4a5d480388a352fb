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
