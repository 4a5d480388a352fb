"""The env's layer order is the import's cost: a site's engine writes again every layer above the
lowest one a patch changes (their chain IDs change). Measured on the real cuDF hotfix (26.10.0 ->
26.10.2, docs/measurements/layers-rapids-2026-12-06/hotfix-a-amd64.json), the plan in kind order
cuda, rapids, compiled, python left 1.49 GB above libcudf and missed the import goal. These tests
weigh each layer by its wheel bytes from the committed wheel-sizes record (what `invoke lock` writes),
with the releases the index showed in the year before each series began."""

from __future__ import annotations

import dataclasses
import json

from support.commands import ROOT

from rapidship.imagebuild.delta_cost import cost_table
from rapidship.render.layer_plan import KINDS, from_sizes, plan_layers

HOTFIX = {"cudf-cu12", "libcudf-cu12", "pylibcudf-cu12", "dask-cudf-cu12"}


def _plan(budget: int = 80, **resized: float):
    sizes = json.loads((ROOT / "locks" / "rapids-pip" / "wheel-sizes.json").read_text())["distributions"]
    dists = [dataclasses.replace(d, wheel_bytes=int(d.wheel_bytes * resized.get(d.name.replace("-", "_"), 1.0)))
             for d in from_sizes(sizes)]
    return plan_layers(dists, budget)


def _refed(plan, changed: set[str]) -> int:
    """Wheel bytes of the unchanged layers above the lowest layer holding a changed distribution."""
    weights = [sum(d.wheel_bytes for d in layer.distributions) for layer in plan.layers]
    holds = [any(d.name in changed for d in layer.distributions) for layer in plan.layers]
    lowest = holds.index(True)
    return sum(w for w, h in zip(weights[lowest + 1:], holds[lowest + 1:]) if not h)


def test_the_kinds_lie_from_the_fewest_patches_per_byte_to_the_most():
    assert list(KINDS) == ["cuda", "compiled", "rapids", "python"]
    kinds = [layer.kind for layer in _plan().layers]
    assert kinds == sorted(kinds, key=lambda k: [*KINDS, "venv"].index(k))


def test_the_cudf_hotfix_refeeds_little_more_than_pure_python():
    plan = _plan()
    names = plan.names
    lowest = min(names.index(f"rapids/{name}") for name in HOTFIX - {"dask-cudf-cu12"})
    assert names[lowest] == "rapids/libcudf-cu12"
    assert all(layer.kind in {"rapids", "python", "venv"} for layer in plan.layers[lowest:])
    # the index's history puts the cuDF family (8 releases the year before 26.10) above cuML's and UCX's
    assert max(names.index(n) for n in ("rapids/libcuvs-cu12", "rapids/libcuml-cu12", "rapids/libucx-cu12")) < lowest
    python = sum(d.wheel_bytes for layer in plan.layers if layer.kind == "python" for d in layer.distributions)
    assert _refed(plan, HOTFIX) < python + 10_000_000
    # the order this replaces, kinds cuda, rapids, compiled, python, by name: every compiled wheel above
    before = dataclasses.replace(plan, layers=tuple(sorted(
        plan.layers, key=lambda layer: (["cuda", "rapids", "compiled", "python", "venv"].index(layer.kind),
                                        "/small_" in layer.name, layer.name))))
    assert _refed(before, HOTFIX) > 10 * _refed(plan, HOTFIX)


def test_a_patch_that_changes_a_wheel_size_a_little_keeps_the_plan():
    """N and N+1 must plan alike: the hotfix's wheels 3 % larger or smaller move no layer (an order by
    size class did: pylibcudf's 8.2 MB wheel 3 % larger crosses 8 MiB)."""
    before = _plan().names
    for factor in (0.97, 1.03):
        assert _plan(**{name.replace("-", "_"): factor for name in HOTFIX}).names == before


def test_the_table_counts_the_unchanged_layers_above_the_lowest_changed_one_as_refed():
    rows = {r.distribution: r for r in cost_table({"low": 10, "mid": 10, "top": 10}, {"low": {0}, "mid": {1}, "top": {2}},
                                                  {0: 5, 1: 5, 2: 5, 3: 1}, {3}, {0: 1000, 1: 200, 2: 30, 3: 4})}
    assert rows["low"].refed_bytes == 230 and rows["mid"].refed_bytes == 30 and rows["top"].refed_bytes == 0
    assert rows["low"].to_json()["refed_bytes"] == 230
    assert cost_table({"a": 1}, {"a": {0}}, {0: 1}, set())[0].refed_bytes == 0  # no tar sizes: nothing claimed


def test_releases_per_year_count_the_year_before_the_series_began_and_not_its_patches():
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
