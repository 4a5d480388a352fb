"""Figures the docs quote from the H200 runs are the records' own (docs/measurements/): each entry
reads a record and names the text the doc must carry, so a re-run that changes a number, or an
edit that changes the text, fails here until both agree."""

from __future__ import annotations

import json
import re

import pytest

from rapidship.config.matrix import load_matrix
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
    ("docs/measurements/gpu-smoke.md", lambda: "still held after " + record("gpu-20g-close90-no-gc.json")["notes"][0]
                                   .split("still held after ")[1].split(" s ")[0] + " s"),
    ("docs/measurements/gpu-smoke.md", lambda: f"{record('gpu-20g-before.json')['stages'][0]['spill_file_bytes'] / 1e9:.1f} GB in "
                                  f"{record('gpu-20g-before.json')['stages'][0]['spill_files']} spill files"),
    ("docs/measurements/gpu-smoke.md", lambda: "is above what\n  GPU 0 NVIDIA H200 has (140.40 GiB)"
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


# Every figure a guide page quotes has a record: a byte count (1,000,000 or more, in groups of three)
# is a value of some record under docs/measurements/ (or variants.yaml's budget), a size in GB rounds
# one. Generated regions are made from the records (tests/unit/test_docs_generated.py); the rest is
# prose, where a superseded figure (the README's 4,242,138,753 of 2026-12-01) used to linger.
MEASUREMENTS = ROOT / "docs/measurements"
BYTES = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3}){2,}(?![\d,])")
GIGABYTES = re.compile(r"(?<![\d.,])(\d+)\.(\d{1,2}) GB\b")
GUIDES = {"README.md": None, "docs/sizes.md": None, "docs/prune.md": "## ", "docs/measurements/gpu-smoke.md": "## "}


def recorded_numbers() -> set[int]:
    found: set[int] = {load_matrix(ROOT / "variants.yaml").defaults.budget_bytes}

    def walk(value) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
            found.add(int(value))
        elif isinstance(value, str):
            found.update(int(m.replace(",", "")) for m in BYTES.findall(value))

    for path in MEASUREMENTS.rglob("*.json"):
        walk(json.loads(path.read_text()))
    return found


def prose(text: str, until: str | None) -> str:
    """The page without its generated regions; with `until`, only its opening (before that heading)."""
    text = re.sub(r"<!-- generated: (\S+) .*?<!-- end generated: \1 -->", "", text, flags=re.S)
    if until:
        text = text.split("\n" + until, 1)[0]
    return text


def unrecorded(text: str, numbers: set[int]) -> list[str]:
    out = [f for f in BYTES.findall(text) if int(f.replace(",", "")) not in numbers]
    for whole, part in GIGABYTES.findall(text):
        shown = f"{whole}.{part}"
        if not any(f"{n / 1e9:.{len(part)}f}" == shown for n in numbers):
            out.append(f"{shown} GB")
    return out


@pytest.mark.parametrize("page", GUIDES, ids=str)
def test_every_figure_a_guide_quotes_has_a_record(page):
    missing = unrecorded(prose((ROOT / page).read_text(), GUIDES[page]), recorded_numbers())
    assert missing == [], (f"{page} quotes figures no record under docs/measurements/ holds: {missing} "
                           "(write the record, or move a superseded figure to docs/measurements/CHANGELOG.md)")


def test_the_figure_check_catches_a_stale_and_a_made_up_figure():
    numbers = recorded_numbers()
    assert unrecorded("the image is 3,496,445,362 bytes, 3.50 GB (3.5 GB), 0.25 GB for dask", numbers) == []
    assert unrecorded("the image is 4,242,138,753 bytes", numbers) == ["4,242,138,753"]
    assert unrecorded("now 3.51 GB, and 7,000,001 bytes", numbers) == ["7,000,001", "3.51 GB"]
    assert prose("a\n<!-- generated: t (x) -->\n1,111,111,111\n<!-- end generated: t -->\n## b\n9.99 GB", "## ") == "a\n"
