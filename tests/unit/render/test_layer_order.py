"""The env's layer order is the import's cost: a site's engine writes again every layer above the
lowest one a patch changes (their chain IDs change). A year of patches costs each layer's releases
times the bytes above it; the kind order this replaces (cuda, compiled, rapids, python; inside a
kind by releases) cost the RAPIDS image 3.4x the best order of its own layers. These tests weigh each
layer by its installed bytes (its wheels' members uncompressed: what the image layer holds, not the
deflated wheel) from the committed wheel-sizes record (what `invoke lock` writes), with the releases
the index showed in the year before each major series began."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random

import pytest
from support.commands import ROOT

from rapidship.config.matrix import DEFAULT_LAYER_BUDGET
from rapidship.imagebuild.delta_cost import cost_table
from rapidship.render.layer_plan import KINDS, best_order, from_sizes, plan_layers, yearly_refeed

HOTFIX = {"cudf-cu12", "libcudf-cu12", "pylibcudf-cu12", "dask-cudf-cu12"}


def _dists(env: str = "rapids-pip", **resized: float):
    sizes = json.loads((ROOT / "locks" / env / "wheel-sizes.json").read_text())["distributions"]
    return [dataclasses.replace(d, wheel_bytes=int(d.wheel_bytes * resized.get(d.name.replace("-", "_"), 1.0)),
                                installed_bytes=int(d.installed_bytes * resized.get(d.name.replace("-", "_"), 1.0)))
            for d in from_sizes(sizes)]


def _plan(budget: int = DEFAULT_LAYER_BUDGET, env: str = "rapids-pip", **resized: float):
    return plan_layers(_dists(env, **resized), budget)


def _chain(layers) -> list[tuple[int, int]]:
    return [(layer.rate, layer.installed_bytes) for layer in layers]


def test_the_best_order_is_the_order_of_least_yearly_refeed():
    rng = random.Random(7)
    for _ in range(40):
        chain = [(rng.randint(0, 30), rng.randint(1, 10**9)) for _ in range(6)]
        least = min(yearly_refeed(order) for order in itertools.permutations(chain))
        assert yearly_refeed(best_order(chain)) == pytest.approx(least)
    # the cost itself: each layer's releases times the bytes above it
    assert yearly_refeed([(2, 100), (5, 10), (1, 1)]) == 2 * 11 + 5 * 1


@pytest.mark.parametrize("env", ["rapids-pip", "dask-cpu"])
def test_the_plan_is_within_1_05x_of_the_best_order_of_its_own_layers(env):
    plan = _plan(env=env)
    best = yearly_refeed(best_order(_chain(plan.layers)))
    assert yearly_refeed(_chain(plan.layers)) <= 1.05 * best
    if env != "rapids-pip":  # the CPU env's 9 layers in kind order lie near the best order too (1.02x)
        return
    # the kind order it replaces, on the same layers, was far from it: the test can fail
    kinds = sorted(plan.layers, key=lambda layer: ([*KINDS, plan.rest].index(layer.kind), "/small_" in layer.name,
                                                   layer.rate, layer.name))
    assert yearly_refeed(_chain(kinds)) > 1.5 * best


def test_a_pin_in_the_same_series_moves_no_layer_whatever_its_wheel_weighs():
    """N and N+1 must plan alike: the order reads each distribution's series figures
    (order_bytes, releases_per_year), not this version's wheels, so the cuDF hotfix's wheels a tenth
    larger or smaller move no layer; weighed by this version's installed bytes, a tenth more did (by its
    wheel bytes, before installed bytes were recorded, 3 % did)."""
    before = _plan().names
    for factor in (0.9, 0.97, 1.03, 1.1):
        assert _plan(**{name.replace("-", "_"): factor for name in HOTFIX}).names == before

    def by_own_size(factor: float):
        return plan_layers([dataclasses.replace(d, order_bytes=int(d.installed_bytes * (factor if d.name in HOTFIX else 1)))
                            for d in _dists()], DEFAULT_LAYER_BUDGET).names
    assert {by_own_size(0.9), by_own_size(1.1)} != {by_own_size(1.0)}


def test_a_layer_of_unknown_releases_is_weighed_by_its_kind():
    from rapidship.render.layer_plan import KIND_RATES, Distribution

    assert Distribution("toolz", "1", 10, True).rate == KIND_RATES["python"]
    assert Distribution("libcudf", "1", 10, False, channel="rapidsai").rate == KIND_RATES["rapids"]
    assert Distribution("numpy", "1", 10, False, releases_per_year=9).rate == 9


def test_the_table_counts_the_unchanged_layers_above_the_lowest_changed_one_as_refed():
    rows = {r.distribution: r for r in cost_table({"low": 10, "mid": 10, "top": 10}, {"low": {0}, "mid": {1}, "top": {2}},
                                                  {0: 5, 1: 5, 2: 5, 3: 1}, {3}, {0: 1000, 1: 200, 2: 30, 3: 4})}
    assert rows["low"].refed_bytes == 230 and rows["mid"].refed_bytes == 30 and rows["top"].refed_bytes == 0
    assert rows["low"].to_json()["refed_bytes"] == 230
    assert cost_table({"a": 1}, {"a": {0}}, {0: 1}, set())[0].refed_bytes == 0  # no tar sizes: nothing claimed


def test_releases_per_year_count_the_year_before_the_major_series_began_the_same_up_or_down():
    from rapidship.lock.sizes import releases_per_year

    def f(version: str, when: str, kind: str = "-py3-none-any.whl") -> dict:
        return {"filename": f"libx-{version}{kind}" if kind.startswith("-") else f"libx-{version}.tar.gz",
                "upload-time": when}

    files = [f("25.8.0", "2025-08-01T00:00:00Z"), f("25.8.1", "2025-08-20T00:00:00Z"),
             f("25.10.0", "2025-10-05T00:00:00Z", ".tar.gz"), f("26.2.0rc1", "2026-01-20T00:00:00Z"),
             f("24.6.0", "2024-06-01T00:00:00Z"),  # more than a year before the series
             f("26.2.0", "2026-02-01T00:00:00Z"), f("26.2.1", "2026-02-20T00:00:00Z")]
    assert releases_per_year("26.2.0", files) == 3 == releases_per_year("26.2.1", files)  # a patch counts alike
    assert releases_per_year("26.2.1", files + [f("26.2.2", "2026-03-01T00:00:00Z")]) == 3
    assert releases_per_year("1.0", files) == 0 and releases_per_year("26.2.0", [{"filename": "libx-26.2.0.tar.gz"}]) == 0
    # a pin to another minor of the series counts alike (cupy 14.1.1 counted 5 and 14.2.0 4 by minor)
    later = files + [f("26.4.0", "2026-04-01T00:00:00Z"), f("26.4.1", "2026-04-09T00:00:00Z")]
    assert releases_per_year("26.4.1", later) == releases_per_year("26.2.1", later) == 3


@pytest.mark.parametrize("env", ["rapids-pip", "dask-cpu"])
def test_every_group_stays_within_the_delta_goal_on_a_disc_at_the_default_budget(env):
    """A grouped distribution's patch re-ships its whole group: the goal allows it 2 MB beyond 1.25 x
    its own. A pure-Python group weighs about 2.5x its wheels on a disc (the env compiles bytecode:
    measured 2.1-2.5x in docs/measurements/layers-rapids-2026-12-06), so 1 MB of pure wheels is near
    2.5 MB there. At the default budget the plan keeps every group under GROUP_DISC_BYTES estimated,
    without raising the limit to fit (the RAPIDS plan raised it to 1 MB of wheels and missed the goal
    for 8 small packages of the conda image)."""
    from rapidship.imagebuild.delta_cost import GOAL_SLACK_BYTES
    from rapidship.render.layer_plan import GROUP_DISC_BYTES

    plan = _plan(env=env)
    assert plan.group_bytes == GROUP_DISC_BYTES < GOAL_SLACK_BYTES
    for layer in plan.layers:
        if len(layer.distributions) > 1:
            assert sum(d.disc_bytes for d in layer.distributions) <= GROUP_DISC_BYTES, layer.name
    pure = next(d for d in _dists(env) if d.pure and d.wheel_bytes > 100_000)
    assert pure.disc_bytes > 2 * pure.wheel_bytes  # bytecode: a pure wheel weighs more than twice itself
