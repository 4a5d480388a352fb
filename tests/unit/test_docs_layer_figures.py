"""Figures docs/sizes.md and docs/measurements/export.md quote about the env's layers are the records' own
(docs/measurements/layers-cpu-2026-12-05: the images measured by `invoke size-report --delta-cost`
and bench/patch_layers.py): a re-measurement that changes a number, or an edit of the text, fails
here until both agree."""

from __future__ import annotations

import json
import math

import pytest

from support.commands import ROOT

RUNS = ROOT / "docs/measurements/layers-cpu-2026-12-05"


def record(name: str) -> dict:
    return json.loads((RUNS / name).read_text())


def row(name: str, distribution: str) -> dict:
    return next(r for r in record(name)["delta_cost"]["rows"] if r["distribution"] == distribution)


BEFORE, PLANNED, PATCH = "parts-by-kind.json", "planned.json", "patch-toolz.json"


def growth() -> str:
    before, after = record(BEFORE)["size_bytes"], record(PLANNED)["size_bytes"]
    return f"**{after:,} bytes** (+{after - before:,}, **+{(after - before) / before:.4%}**)"


def worst(name: str) -> str:
    w = record(name)["delta_cost"]["worst"]
    return f"`{w['distribution']}` {w['ratio']:.1f}x: {w['carried_bytes']:,} B carried for {w['own_bytes']:,} B"


def disc(layout: str) -> str:
    runs = record(PATCH)[layout]["runs"]
    full, delta = runs["N+1 full"]["archive_bytes"], runs["N+1 delta"]["archive_bytes"]
    return f"| {full:,} | **{delta:,}** | **{delta / full:.2%}** | {delta / record(PATCH)['own_zstd_bytes']:.1f}x |"


FIGURES = [
    ("docs/sizes.md", lambda: f"the parts by kind (2 env layers) {record(BEFORE)['size_bytes']:,} bytes, "
                              f"{record(BEFORE)['layers']} layers, {record(BEFORE)['zstd_bytes']:,} zstd"),
    ("docs/sizes.md", growth),
    ("docs/sizes.md", lambda: f"{record(PLANNED)['layers']} layers, {record(PLANNED)['zstd_bytes']:,} zstd"),
    ("docs/sizes.md", lambda: f"`dask-cpu` {len(record(PLANNED)['plan']['layers'])} env layers"),
    ("docs/measurements/export.md", lambda: f"**{record(BEFORE)['delta_cost']['misses']} of "
                               f"{record(BEFORE)['delta_cost']['distributions']}**"),
    ("docs/measurements/export.md", lambda: f"**{record(PLANNED)['delta_cost']['misses']} of "
                               f"{record(PLANNED)['delta_cost']['distributions']}**"),
    ("docs/measurements/export.md", lambda: worst(BEFORE)),
    ("docs/measurements/export.md", lambda: worst(PLANNED)),
    ("docs/measurements/export.md", lambda: f"`numpy` {row(PLANNED, 'numpy')['carried_bytes']:,} B for "
                               f"{row(PLANNED, 'numpy')['own_bytes']:,}"),
    ("docs/measurements/export.md", lambda: f"its own files, zstd: {record(PATCH)['own_zstd_bytes']:,} B"),
    ("docs/measurements/export.md", lambda: disc("before")),
    ("docs/measurements/export.md", lambda: disc("planned")),
    ("docs/measurements/export.md", lambda: f"the table predicted {record(PATCH)['planned']['package']['carried_bytes']:,} B for it"),
]


@pytest.mark.parametrize("doc, figure", FIGURES, ids=[f"{d}-{i}" for i, (d, _) in enumerate(FIGURES)])
def test_the_doc_quotes_the_record(doc, figure):
    want = figure()
    assert want in (ROOT / doc).read_text(), f"{doc} should say {want!r} (from {RUNS.relative_to(ROOT)})"


def test_the_records_are_the_goal_missed_and_met():
    assert record(BEFORE)["delta_cost"]["misses"] > 0 and record(PLANNED)["delta_cost"]["misses"] == 0
    assert record(PLANNED)["size_bytes"] <= 1.001 * record(BEFORE)["size_bytes"]  # the split grows it <= 0.1 %
    patch = record(PATCH)
    assert patch["planned"]["package"]["within_goal"] and patch["planned"]["package"]["distribution"] == "toolz"


# The RAPIDS image in both layouts (docs/measurements/layers-rapids-2026-12-06)
RAPIDS = ROOT / "docs/measurements/layers-rapids-2026-12-06"
R_BEFORE, R_PLANNED = "parts-by-kind-amd64.json", "planned-amd64.json"


def rapids(name: str) -> dict:
    return json.loads((RAPIDS / name).read_text())


def rapids_row(name: str, distribution: str) -> dict:
    return next(r for r in rapids(name)["delta_cost"]["rows"] if r["distribution"] == distribution)


def rapids_worst(name: str) -> str:
    w = rapids(name)["delta_cost"]["worst"]
    return f"`{w['distribution']}` {w['ratio']:.1f}x: {w['carried_bytes']:,} B carried for {w['own_bytes']:,} B"


def patch_cell(name: str, distribution: str) -> str:
    r = rapids_row(name, distribution)
    return f"{r['carried_bytes']:,} / {r['own_bytes']:,} = {r['carried_bytes'] / r['own_bytes']:.{2 if name == R_PLANNED else 1}f}x"


def rapids_growth() -> str:
    before, after = rapids(R_BEFORE)["size_bytes"], rapids(R_PLANNED)["size_bytes"]
    return f"**{after:,} bytes** (+{after - before:,}, **+{(after - before) / before:.4%}**)"


HOTFIX = "cudf hotfix"
RAPIDS_FIGURES = [
    ("docs/measurements/export.md", lambda: f"| parts by kind | {rapids(R_BEFORE)['layers']} | **{rapids(R_BEFORE)['delta_cost']['misses']} "
                               f"of {rapids(R_BEFORE)['delta_cost']['distributions']}** | {rapids_worst(R_BEFORE)}"),
    ("docs/measurements/export.md", lambda: f"| {rapids(R_PLANNED)['layers']} ({len(rapids(R_PLANNED)['plan']['layers'])}) | "
                               f"**{rapids(R_PLANNED)['delta_cost']['misses']} of "
                               f"{rapids(R_PLANNED)['delta_cost']['distributions']}** | {rapids_worst(R_PLANNED)}"),
    *[("docs/measurements/export.md", (lambda d=d: f"| `{d}` | {patch_cell(R_BEFORE, d)} | **{patch_cell(R_PLANNED, d)}** |"))
      for d in ("numpy", "pyarrow", "cudf-cu12", "libcudf-cu12", "dask")],
    ("docs/measurements/export.md", lambda: f"own bytes {rapids(R_PLANNED)['patches'][HOTFIX]['own_bytes']:,}) carries the union"),
    ("docs/measurements/export.md", lambda: f"**{rapids(R_PLANNED)['patches'][HOTFIX]['carried_bytes']:,} B** planned"),
    ("docs/measurements/export.md", lambda: f"{rapids(R_BEFORE)['patches'][HOTFIX]['carried_bytes']:,} B in parts by kind"),
    ("docs/sizes.md", lambda: f"the parts by kind {rapids(R_BEFORE)['size_bytes']:,} bytes, {rapids(R_BEFORE)['layers']} "
                              f"layers, {rapids(R_BEFORE)['zstd_bytes']:,} zstd"),
    ("docs/sizes.md", rapids_growth),
    ("docs/sizes.md", lambda: f"{rapids(R_PLANNED)['layers']} layers, {rapids(R_PLANNED)['zstd_bytes']:,}"),
]


@pytest.mark.parametrize("doc, figure", RAPIDS_FIGURES, ids=[f"{d}-{i}" for i, (d, _) in enumerate(RAPIDS_FIGURES)])
def test_the_doc_quotes_the_rapids_record(doc, figure):
    want = figure()
    assert want in " ".join((ROOT / doc).read_text().split()), f"{doc} should say {want!r} (from {RAPIDS.relative_to(ROOT)})"


def test_the_rapids_records_are_the_goal_missed_and_met_within_the_size_rules():
    before, planned = rapids(R_BEFORE), rapids(R_PLANNED)
    assert before["delta_cost"]["misses"] > 0 and planned["delta_cost"]["misses"] == 0
    assert planned["size_bytes"] <= 1.001 * before["size_bytes"] and planned["size_bytes"] <= 3_500_000_000
    assert planned["layers"] <= 125
    own = {r["distribution"]: r["own_bytes"] for r in planned["delta_cost"]["rows"]}
    assert planned["patches"][HOTFIX]["own_bytes"] == sum(own[d] for d in planned["patches"][HOTFIX]["distributions"])


def test_sizes_quotes_the_load_and_start_record():
    m = rapids("load-start-amd64.json")
    a, b = m["refs"]
    med, ratio = m["median"], m["ratio_b_over_a"]
    text = " ".join((ROOT / "docs/sizes.md").read_text().split())
    for want in (f"`docker load` {med[a]['load_s']:.2f} s → {med[b]['load_s']:.2f} s ({ratio['load_s']:.3f}x)",
                 f"(`/bin/true`) {med[a]['start_true_s']:.2f} s → {med[b]['start_true_s']:.2f} s",
                 f"imports cuDF {med[a]['start_import_s']:.2f} s → {med[b]['start_import_s']:.2f} s "
                 f"({ratio['start_import_s']:.3f}x)"):
        assert want in text, want
    assert m["image_ids"][a] == rapids(R_BEFORE)["image_id"] and m["image_ids"][b] == rapids(R_PLANNED)["image_id"]


def test_export_quotes_the_arm64_record():
    arm = rapids("planned-arm64.json")
    text = " ".join((ROOT / "docs/measurements/export.md").read_text().split())
    want = (f"The same on arm64: {arm['delta_cost']['misses']} of {arm['delta_cost']['distributions']} above the goal, "
            f"worst {rapids_worst('planned-arm64.json')}")
    assert want in text, want
    assert arm["size_bytes"] <= 3_500_000_000 and arm["layers"] <= 125


def test_export_quotes_the_hotfix_record():
    a = rapids("hotfix-a-amd64.json")
    runs, imp = a["runs"], a["imports"]
    text = " ".join((ROOT / "docs/measurements/export.md").read_text().split())
    for want in (f"the full N+1 disc {runs['N+1 full']['archive_bytes']:,} B, the delta "
                 f"**{runs['N+1 delta']['archive_bytes']:,} B ({a['delta_share'] * 100:.2f} %)**, written in "
                 f"{runs['N+1 delta']['seconds']} s (the full one {runs['N+1 full']['seconds']} s)",
                 f"the delta-cost table predicted {rapids(R_PLANNED)['patches'][HOTFIX]['carried_bytes']:,} B",
                 f"the full N+1 disc {imp['full_import_s']:.1f} s", f"the delta **{imp['delta_import_s']:.1f} s on an engine "
                 f"holding N (goal {imp['goal_s']:.1f} s: {'met' if imp['met'] else 'missed'})**",
                 imp["delta_said"].split("; ")[0].removeprefix("delta disc: ")):
        assert want in text, want
    assert a["image_ids"][a["new"][0]] == rapids(R_PLANNED)["image_id"]  # N+1 is the image the table measured


# Real patches, measured (docs/measurements/patch-day-2026-12-06; the table is generated from them)
PATCH_DAY = ROOT / "docs/measurements/patch-day-2026-12-06"


def patch_day(name: str) -> dict:
    return json.loads((PATCH_DAY / name).read_text())


def test_the_hotfix_meets_the_import_goal_in_the_order_made_for_it_and_its_disc_is_its_bytes():
    a = patch_day("a-cudf-hotfix-amd64.json")
    runs, imp = a["runs"], a["imports"]
    full, delta = runs["N+1 full"]["archive_bytes"], runs["N+1 delta"]["archive_bytes"]
    assert imp["met"] and imp["delta_import_s"] <= imp["full_import_s"] * 1.5 * delta / full + 5
    rows = {r["distribution"]: r for r in a["size_report"]["delta_cost"]["rows"]}
    assert a["own_zstd_bytes"] == sum(rows[d]["own_bytes"] for d in ("cudf-cu12", "libcudf-cu12", "pylibcudf-cu12",
                                                                      "dask-cudf-cu12"))
    assert a["size_report"]["delta_cost"]["misses"] == 0 and delta <= 1.01 * a["own_zstd_bytes"] + 2_000_000
    before = rapids("hotfix-a-amd64.json")["imports"]  # the same hotfix, kinds in the order before
    assert not before["met"] and imp["delta_import_s"] < before["delta_import_s"]


def test_the_debian_update_ships_its_package_and_dpkgs_state_and_the_doc_says_what_it_shipped_before():
    d = patch_day("d-zlib1g-cpu-amd64.json")
    delta = d["runs"]["N+1 delta"]["archive_bytes"]
    assert d["base_packages_changed"] == {"zlib1g": ["1:1.2.13.dfsg-1", "1:1.2.13.dfsg-1+deb12u1"]}
    assert delta <= 1.25 * d["own_zstd_bytes"] + 2_000_000  # the delta-cost goal, for a base package
    assert delta < d["before"]["apt_step_whole_delta_bytes"] < d["before"]["one_layer_base_zstd_bytes"]
    text = " ".join((ROOT / "docs/measurements/export.md").read_text().split())
    assert f"the base was one layer ({d['before']['one_layer_base_zstd_bytes']:,} B of zstd)" in text
    assert f"with the base split and the apt step still whole, {d['before']['apt_step_whole_delta_bytes']:,} B" in text


def test_sizes_quotes_the_layer_count_of_the_image_split_by_package():
    d = patch_day("d-zlib1g-cpu-amd64.json")
    text = " ".join((ROOT / "docs/sizes.md").read_text().split())
    assert f"the CPU image had {d['image_layers']['n1']} layers" in text
    assert len(d["base_layers"]["n1"]) + 11 < d["image_layers"]["n1"] <= 125  # the base's, the env's 11 and more


# The layer order on the committed locks (docs/measurements/layer-order-2026-12-07: bench/layer_order.py)
ORDER = ROOT / "docs/measurements/layer-order-2026-12-07"


def test_the_layer_order_record_is_the_benchs_on_the_committed_wheel_sizes():
    """plans.json is what bench/layer_order.py makes of the committed records: a record remade
    (invoke lock-sizes) fails here until the bench is run again."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("layer_order_bench", ROOT / "bench" / "layer_order.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    recorded = json.loads((ORDER / "plans.json").read_text())["envs"]
    assert recorded == [bench.figures(row["env"]) for row in recorded] and {r["env"] for r in recorded} == {
        p.parent.name for p in (ROOT / "locks").glob("*/wheel-sizes.json")}


def test_sizes_quotes_the_layer_order_record():
    envs = {row["env"]: row for row in json.loads((ORDER / "plans.json").read_text())["envs"]}
    r = envs["rapids-pip"]
    within = math.ceil(max(row["plan_vs_best"] for row in envs.values()) * 1000) / 1000
    want = (f"within {within:.3f}x of the best order of its own layers (RAPIDS {r['plan_bytes'] / 1e9:.1f} GB a year of "
            f"installed bytes, best {r['best_order_bytes'] / 1e9:.1f}; the kind order it replaces: "
            f"{r['kind_order_vs_best']:.2f}x")
    assert want in " ".join((ROOT / "docs/sizes.md").read_text().split()), want


def test_sizes_quotes_the_whole_image_order_record():
    """The CPU image's yearly re-feed in the whole image's order (imagebuild/layer_order.py), as
    `invoke size-report --delta-cost` recorded it for the built image."""
    year = json.loads((ORDER / "cpu-image-whole-order.json").read_text())["per_year"]
    text = " ".join((ROOT / "docs/sizes.md").read_text().split())
    for want in (f"re-feed is {year['plan_bytes'] / 1e9:.3f} GB in this order against {year['best_order_bytes'] / 1e9:.3f} GB "
                 f"in the best order of its layers ({year['ratio']:.3f}x;",
                 f"(`{year['debian_fix']}`, 15 a year) re-feeds {year['debian_fix_refed_bytes'] / 1e6:.1f} MB",
                 f"still re-feeds about all of it ({year['base_update_refed_bytes'] / 1e6:.1f} MB)"):
        assert want in text, want
    layers = json.loads((ORDER / "cpu-image-whole-order.json").read_text())["layers"]
    assert next(x["rate"] for x in layers if x["label"] == year["debian_fix"]) == 15
    assert next(x["rate"] for x in layers if x["label"] == "libc6") == 7  # "glibc: 7"


def test_sizes_quotes_the_load_and_start_of_the_layout_against_the_coarse_one():
    rec = json.loads((ORDER / "load-start-rapids-amd64.json").read_text())
    coarse, planned = rec["refs"]
    assert (rec["layers"][coarse], rec["layers"][planned]) == (44, 99)
    med, ratio = rec["median"], rec["ratio_b_over_a"]
    text = " ".join((ROOT / "docs/sizes.md").read_text().split())
    for want in (f"`docker load` {med[coarse]['load_s']:.2f} s → {med[planned]['load_s']:.2f} s ({ratio['load_s']:.3f}x)",
                 f"a start of `/bin/true` {med[coarse]['start_true_s']:.2f} s → {med[planned]['start_true_s']:.2f} s "
                 f"({ratio['start_true_s']:.2f}x)",
                 f"imports cuDF {med[coarse]['start_import_s']:.2f} s → {med[planned]['start_import_s']:.2f} s "
                 f"({ratio['start_import_s']:.2f}x"):
        assert want in text, want


def test_the_import_floor_prose_quotes_its_record():
    rec = json.loads((ROOT / "docs/measurements/import-floor-2026-12-07/c-numpy-amd64.json").read_text())
    imp, year = rec["imports"], rec["delta_cost_per_year"]
    text = " ".join((ROOT / "docs/measurements/export.md").read_text().split())
    assert imp["engine_load_delta_tar_bytes"] == imp["refed_bytes"]["delta"]  # the same layers the import fed
    for want in (f"({imp['refed_bytes']['delta']:,} B of tar, from the page cache), `docker load` took "
                 f"{imp['engine_load_delta_s']:.1f} s, {imp['engine_load_delta_s'] / imp['floor_goal_s']['delta']:.1f}x "
                 f"the floor goal of {imp['floor_goal_s']['delta']:.1f} s",
                 f"the delta import took {imp['delta_import_s']:.1f} s, "
                 f"{imp['delta_import_s'] / imp['engine_load_delta_s']:.2f}x docker's loader alone",
                 f"against the disk's {imp['disk_write_bytes_per_s'] / 1e6:,.0f} MB/s"):
        assert want in text, want
    sizes = " ".join((ROOT / "docs/sizes.md").read_text().split())
    assert (f"The RAPIDS image (99 layers): {year['plan_bytes'] / 1e9:.3f} GB a year against "
            f"{year['best_order_bytes'] / 1e9:.3f} GB in the best order ({year['ratio']}x), and the same Debian fix "
            f"re-feeds {year['debian_fix_refed_bytes'] / 1e6:.1f} MB") in sizes
