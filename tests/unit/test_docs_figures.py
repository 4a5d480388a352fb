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
    ("docs/measurements/monitoring.md", lambda: f"**{record(M)['scrape_ms_loaded']['median']:.1f} ms** median, "
                                   f"{record(M)['scrape_ms_loaded']['max']:.1f} ms the"),
    ("docs/measurements/monitoring.md", lambda: gb(held(M, DEVICE_TIER)) + " (14 keys)"),
    ("docs/measurements/monitoring.md", lambda: f"{gb(stored(M, 'max_over_time(rapidship_rmm_pool_size_bytes'), 1)} / "
                                   f"{gb(held(M, 'rapidship_rmm_allocated_bytes'))} (peak "
                                   f"{gb(stored(M, 'max_over_time(rapidship_rmm_allocated_bytes'), 3)})"),
    ("docs/measurements/monitoring.md", lambda: f"`rapidship_gpu_memory_used_bytes` (NVML, the whole GPU) | "
                                   f"{gb(stored(M, 'max_over_time(rapidship_gpu_memory_used_bytes'))}"),
    ("docs/measurements/monitoring.md", lambda: f"was {gb(stored('gpu-metrics-no-rmm-allocator.json', 'max_over_time(rapidship_gpu_memory_used_bytes'), 1)}"),
    ("docs/measurements/monitoring.md", lambda: f"its highest, {gb(stored('gpu-metrics-no-rmm-allocator.json', 'max_over_time(rapidship_rmm_allocated_bytes'))}"),
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
# is a value of some record under docs/measurements/ (or variants.yaml's budget, or what a lock's
# wheels weigh by locks/<env>/wheel-sizes.json), a size in GB rounds
# one. Generated regions are made from the records (tests/unit/test_docs_generated.py); the rest is
# prose, where a superseded figure (the README's 4,242,138,753 of 2026-12-01) used to linger.
MEASUREMENTS = ROOT / "docs/measurements"
BYTES = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3}){2,}(?![\d,])")
GIGABYTES = re.compile(r"(?<![\d.,])(\d+)\.(\d{1,2}) GB\b")
GUIDES = {"README.md": None, "docs/sizes.md": None, "docs/prune.md": None, "docs/measurements/gpu-smoke.md": "## ",
          "docs/quickstart.md": None, "docs/architecture.md": None, "docs/harbor.md": None, "docs/report.md": None,
          "docs/spill.md": None, "docs/monitoring.md": None, "docs/measurements/monitoring.md": None,
          "docs/deploy.md": None, "docs/ci.md": None, "docs/supply-chain.md": None, "docs/conda.md": None}


def recorded_numbers() -> set[int]:
    found: set[int] = {load_matrix(ROOT / "variants.yaml").defaults.budget_bytes}
    # what a lock's wheels weigh at most (its largest wheel of each distribution): a pip cache's size
    found.update(sum(d["wheel_bytes"] for d in json.loads(path.read_text())["distributions"].values())
                 for path in (ROOT / "locks").glob("*/wheel-sizes.json"))

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
            # Prometheus answers in strings: a query's value ("5753995264"), an exposition line's last word
            try:
                number = float(value.rsplit(" ", 1)[-1])
            except ValueError:
                return
            if number.is_integer():
                found.add(int(number))

    for path in MEASUREMENTS.rglob("*.json"):
        walk(json.loads(path.read_text()))
    return found | shared_gpu_sizes()


def shared_gpu_sizes() -> set[int]:
    """Not measurements: the device memory limit deploy computes for each `--gpu-share` its guide's
    table names, by the code that computes it (a rule changed fails here until the table agrees)."""
    from rapidship.deploy.gpu_share import parse_share

    table = (ROOT / "docs/deploy.md").read_text()
    return {parse_share(share).sizes()[0] for share in re.findall(r"^\| `([a-z-]+:[^`]+)`", table, re.M)}


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


# Sizes, layer counts and times the guides quote, each with its date, from the image records
# (docs/measurements/images/) and the newest release chain (docs/measurements/release-chain-*/): a
# record remade, or a figure or a date edited on the page alone, fails here until both agree.
CHAIN = sorted(MEASUREMENTS.glob("release-chain-*"))[-1]
CHAIN_DATE = CHAIN.name.removeprefix("release-chain-")
PATCH_DAY_CPU = MEASUREMENTS / "patch-day-2026-12-06/d-zlib1g-cpu-amd64.json"
CPU, R8090, R8090_ARM, R90, RALL = ("cpu-debian12-amd64", "cuda12-debian12-amd64-80-90", "cuda12-debian12-arm64-80-90",
                                   "cuda12-debian12-amd64-90", "cuda12-debian12-amd64-all")


def image(name: str) -> dict:
    return json.loads((MEASUREMENTS / "images" / f"{name}.json").read_text())


def chain(name: str, release: str) -> str:
    """A release's whole chain in seconds, as the page writes it."""
    return f"{json.loads((CHAIN / name).read_text())['releases'][release]['chain_s']:.1f} s"


def sized(name: str) -> str:
    return f"{gb(image(name)['size_bytes'])}"


def first_build(name: str) -> str:
    build = image(name)["build"]
    assert "cold build cache" in build, build
    return f"first build took {build.split(' s ')[0]} s from a cold build cache ({image(name)['date']})"


DATED = [
    ("README.md", lambda: f"**{sized(R8090)}** for A100 + H100/H200 ({image(R8090)['date']})"),
    ("README.md", lambda: f"{sized(R90)} for H100/H200 alone ({image(R90)['date']})"),
    ("README.md", lambda: f"{sized(RALL)} with all device code ({image(RALL)['date']})"),
    ("README.md", lambda: f"In time, on 2 cores ({CHAIN_DATE}, warm build cache;"),
    ("README.md", lambda: f"a release of the CPU image {chain('cpu-debian12-amd64.json', 'full')}, of the RAPIDS image "
                          f"{chain('cuda12-debian12-amd64.json', 'full')} (both arches on one disc "
                          f"{chain('cuda12-debian12-all.json', 'full')}, before the smoke stage); a patch release of one package "
                          f"{chain('cpu-debian12-amd64.json', 'patch').removesuffix(' s')} s and "
                          f"{chain('cuda12-debian12-amd64.json', 'patch')}"),
    ("README.md", lambda: first_build(R8090)),
    ("docs/quickstart.md", lambda: f"took {chain('cpu-debian12-amd64.json', 'full')} for this image with a warm build "
                                   f"cache in the release chain of {CHAIN_DATE}"),
    ("docs/sizes.md", lambda: f"it is {sized(R8090)} on amd64 ({image(R8090)['date']}) and {sized(R8090_ARM)} on arm64 "
                              f"({image(R8090_ARM)['date']})"),
    ("docs/sizes.md", lambda: f"with all device code it was {sized(RALL)} ({image(RALL)['date']})"),
    ("docs/sizes.md", lambda: f"`cpu-debian12` (dask, for CI and laptops) is {sized(CPU)} ({image(CPU)['date']})"),
    ("docs/sizes.md", lambda: f"the RAPIDS image, counted the same way, {image(R8090)['layers']} (its record"),
    ("docs/measurements/harbor.md", lambda: f"has {json.loads(PATCH_DAY_CPU.read_text())['image_layers']['n1']} layers "
                                            f"(`{PATCH_DAY_CPU.relative_to(ROOT)}`), "
                                            f"{json.loads(PATCH_DAY_CPU.read_text())['image_layers']['n1'] + 1} blobs"),
]


@pytest.mark.parametrize("doc, figure", DATED, ids=[f"{d}-{i}" for i, (d, _) in enumerate(DATED)])
def test_the_guide_quotes_the_record_with_its_date(doc, figure):
    want = figure()
    assert want in " ".join((ROOT / doc).read_text().split()), f"{doc} should say {want!r} (from docs/measurements/)"


def test_the_release_chain_quoted_as_with_the_smoke_has_its_smoke_stage():
    stages = json.loads((CHAIN / "cpu-debian12-amd64.json").read_text())["releases"]["full"]["stages"]
    assert "smoke" in {s["stage"] for s in stages}  # docs/quickstart.md: "build to report, the spill smoke included"


def test_the_cpu_image_record_is_its_sources_figures():
    """Its size and layer count are the release chain's built image's."""
    cpu, full = image(CPU), json.loads((CHAIN / "cpu-debian12-amd64.json").read_text())["releases"]["full"]
    assert cpu["size_bytes"] == full["sizes"]["image"] and cpu["layers"] == full["layers"]["amd64"]
    assert cpu["date"] == CHAIN_DATE


def test_a_figure_that_is_no_measurement_is_called_one_and_never_compared_in_the_readme():
    sizes, readme = " ".join((ROOT / "docs/sizes.md").read_text().split()), (ROOT / "README.md").read_text()
    for path in sorted((MEASUREMENTS / "images").glob("*.json")):
        if json.loads(path.read_text()).get("approximate"):
            assert f"`{path.relative_to(ROOT)}`" in sizes and "is not a measurement" in sizes, path.name
            assert f"{gb(json.loads(path.read_text())['size_bytes'], 1)}" not in readme, path.name


def test_the_architecture_guide_states_no_line_counts():
    """Line counts go stale with the next commit: the dated ones are docs/measurements/architecture.md's."""
    assert not re.search(r"\b\d+ lines\b", (ROOT / "docs/architecture.md").read_text())


CONDA_RELEASE = MEASUREMENTS / "conda-wheels-2026-12-07/release-60-layers-amd64.json"
CONDA_CHAIN = CHAIN / "cuda12-debian12-conda-wheels-amd64.json"


def test_the_conda_guide_quotes_its_release_records():
    """docs/conda.md's RAPIDS-scale figures are the conda release chain's record (the channel made of
    wheels), and the earlier release's for what that one alone measured (the reproduction, the misses)."""
    chain = json.loads(CONDA_CHAIN.read_text())
    full, patch = chain["releases"]["full"], chain["releases"]["patch"]
    text = " ".join((ROOT / "docs/conda.md").read_text().split())
    assert f"the release took {full['chain_s']:.1f} s" in text and chain["flavour"].startswith("conda")
    assert f"The image is {full['sizes']['image']:,} bytes with {full['layers']['amd64']} layers" in text
    assert {s["stage"] for s in full["stages"] if s["verdict"] != "pass"} == {"smoke"}
    cost = chain["delta_cost"]["amd64"]
    assert f"{cost['misses']} of {cost['distributions']} packages above the goal" in text and cost["misses"] == 0
    numpy = next(row for row in cost["rows"] if row["distribution"] == "numpy")
    assert f"its release took {patch['chain_s']:.1f} s" in text and patch["chain_s"] < 300
    assert f"its delta disc is {patch['sizes']['archive']:,} bytes for numpy's own {numpy['own_bytes']:,}" in text
    old = json.loads(CONDA_RELEASE.read_text())
    assert old["reproduce"]["reproduced"] and old["reproduce"]["rebuilt_id"] == old["image_id"]
    assert f"{old['delta_cost']['misses']} of {old['delta_cost']['distributions']} packages missed it" in text
    measured = " ".join((MEASUREMENTS / "conda.md").read_text().split())
    assert f"in {old['reproduce']['seconds']} s" in measured and f"{full['sizes']['image']:,} bytes" in measured
