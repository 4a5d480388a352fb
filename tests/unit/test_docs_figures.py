"""Figures the docs quote from the H200 runs are the records' own (docs/measurements/): each entry
reads a record and names the text the doc must carry, so a re-run that changes a number, or an
edit that changes the text, fails here until both agree."""

from __future__ import annotations

import json

import pytest

from support.commands import ROOT

RUNS = ROOT / "docs/measurements/gpu-round2-2026-12-01"


def record(name: str) -> dict:
    return json.loads((RUNS / name).read_text())


def held(name: str, metric: str) -> float:
    """A series' value while the data was held (the job's own scrape of the worker)."""
    (line,) = [ln for ln in record(name)["metrics_held"] if ln.startswith(metric) and ln[len(metric)] in '{ ,']
    return float(line.rsplit(" ", 1)[1])


def stored(name: str, expr_start: str) -> float:
    (value,) = [float(v[0][1]) for e, v in record(name)["stored"].items() if e.startswith(expr_start)]
    return value


def gb(n: float, places: int = 2) -> str:
    return f"{n / 1e9:.{places}f} GB"


M = "gpu-metrics-rmm-allocator.json"
DEVICE_TIER = 'rapidship_worker_tier_bytes{tier="device"'

FIGURES = [
    ("docs/monitoring.md", lambda: f"**{record(M)['scrape_ms_loaded']['median']:.1f} ms** median, "
                                   f"{record(M)['scrape_ms_loaded']['max']:.1f} ms the"),
    ("docs/monitoring.md", lambda: gb(held(M, DEVICE_TIER)) + " (14 keys)"),
    ("docs/monitoring.md", lambda: f"{gb(stored(M, 'max_over_time(rapidship_rmm_pool_size_bytes'), 1)} / "
                                   f"{gb(held(M, 'rapidship_rmm_allocated_bytes'))} (peak "
                                   f"{gb(stored(M, 'max_over_time(rapidship_rmm_allocated_bytes'), 3)})"),
    ("docs/monitoring.md", lambda: f"`rapidship_gpu_memory_used_bytes` (NVML, the whole GPU) | "
                                   f"{gb(stored(M, 'max_over_time(rapidship_gpu_memory_used_bytes'))}"),
    ("docs/monitoring.md", lambda: f"was {gb(stored('gpu-metrics-no-rmm-allocator.json', 'max_over_time(rapidship_gpu_memory_used_bytes'), 1)}"),
    ("docs/monitoring.md", lambda: f"its highest, {gb(stored('gpu-metrics-no-rmm-allocator.json', 'max_over_time(rapidship_rmm_allocated_bytes'))}"),
    ("docs/gpu-smoke.md", lambda: "still held after " + record("gpu-20g-close90-no-gc.json")["notes"][0]
                                   .split("still held after ")[1].split(" s ")[0] + " s"),
    ("docs/gpu-smoke.md", lambda: f"{record('gpu-20g-before.json')['stages'][0]['spill_file_bytes'] / 1e9:.1f} GB in "
                                  f"{record('gpu-20g-before.json')['stages'][0]['spill_files']} spill files"),
    ("docs/gpu-smoke.md", lambda: "is above what\n  GPU 0 NVIDIA H200 has (140.40 GiB)"
     if "above what GPU 0 NVIDIA H200 has (140.40 GiB)" in record("refused-400gb.json")["problems"][0] else "MISMATCH"),
]


@pytest.mark.parametrize("doc, figure", FIGURES, ids=[f"{d}-{i}" for i, (d, _) in enumerate(FIGURES)])
def test_the_doc_quotes_the_record(doc, figure):
    text = (ROOT / doc).read_text()
    want = figure()
    assert want in text, f"{doc} should say {want!r} (from {RUNS.relative_to(ROOT)})"


def test_the_clean_drains_passed_with_no_note_and_the_cut_one_has_its_note():
    for name in ("gpu-20g-drain.json", "gpu-20g-drain-nopause.json"):
        r = record(name)
        assert r["verdict"] == "PASS" and r["notes"] == [] and r["stages"][0]["result_ok"]
    assert record("gpu-20g-gc-close15.json")["notes"] == ["shutdown: left running in the background: draining the workers"]
