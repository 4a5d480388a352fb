"""Figures docs/sizes.md and docs/export.md quote about the env's layers are the records' own
(docs/measurements/layers-cpu-2026-12-05: the images measured by `invoke size-report --delta-cost`
and bench/patch_layers.py): a re-measurement that changes a number, or an edit of the text, fails
here until both agree."""

from __future__ import annotations

import json

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
    ("docs/export.md", lambda: f"**{record(BEFORE)['delta_cost']['misses']} of "
                               f"{record(BEFORE)['delta_cost']['distributions']}**"),
    ("docs/export.md", lambda: f"**{record(PLANNED)['delta_cost']['misses']} of "
                               f"{record(PLANNED)['delta_cost']['distributions']}**"),
    ("docs/export.md", lambda: worst(BEFORE)),
    ("docs/export.md", lambda: worst(PLANNED)),
    ("docs/export.md", lambda: f"`numpy` {row(PLANNED, 'numpy')['carried_bytes']:,} B for "
                               f"{row(PLANNED, 'numpy')['own_bytes']:,}"),
    ("docs/export.md", lambda: f"its own files, zstd: {record(PATCH)['own_zstd_bytes']:,} B"),
    ("docs/export.md", lambda: disc("before")),
    ("docs/export.md", lambda: disc("planned")),
    ("docs/export.md", lambda: f"the table predicted {record(PATCH)['planned']['package']['carried_bytes']:,} B for it"),
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
