"""The census: after pruning, every container an env's ELF files hold is counted wherever it lies
(`.nv_fatbin`, a kernel store in read-only data, a library's own `.data`), what no listed GPU loads
is named per file and section with why it stays, and byte-identical copies count once. Real
libraries linked by gcc + ld; the pruner's own run writes the census into its record."""

from __future__ import annotations

import os
import shutil

import pytest
from support.fatbin_samples import KIND_CUBIN, KIND_PTX, build_data_library, build_library, container, entry, gcc

from rapidship.builder.prune import census, files

pytestmark = pytest.mark.skipif(gcc() is None and not os.environ.get("CI"), reason="needs gcc (CI installs it)")
KEEP = (80, 90)


def blackwell(i: int, size: int = 48_000) -> bytes:
    return container(entry(KIND_CUBIN, 100, size, seed=i))


def both(i: int) -> bytes:   # an sm_80 GPU JIT-compiles the PTX 70, an sm_90 one loads the sm_90 cubin: sm_70 is dead
    return container(entry(KIND_CUBIN, 70, 4_000, seed=i), entry(KIND_PTX, 70, 6_000, seed=i + 1),
                     entry(KIND_CUBIN, 90, 5_000, seed=i + 2))


def test_code_no_listed_gpu_loads_is_counted_in_every_section_once_per_content(tmp_path):
    store = [blackwell(i) for i in range(30)] + [blackwell(99, 20_000)]   # a run, then one after a fleet container
    lib = build_library(tmp_path / "a", [both(10)], layout="split",
                        store=(*store[:30], both(20), store[30]))
    data = build_data_library(tmp_path / "b", [both(30), blackwell(40, 30_000)])
    env = tmp_path / "env"
    env.mkdir()
    for name, src in (("libstore.so", lib), ("libdata.so", data), ("libdata-copy.so", data)):
        shutil.copy(src, env / name)
    record = files.prune_paths([env], KEEP)
    c = record["census"]
    assert c["files_with_device_code"] == 2 and c["copies_counted_once"] == 1
    left = {f["path"]: f for f in c["left"]}
    assert set(left) == {"libstore.so", "libdata-copy.so"} and left["libdata-copy.so"]["copies"] == ["libdata.so"]
    store_left = left["libstore.so"]["sections"]
    # the run of 30 was zero-filled; the container after the fleet one is too short a run: it stays
    assert store_left[".cask_resource"]["by_arch"] == {"sm_100": 20_000 + 64, "sm_70": 4_064} and store_left[".cask_resource"]["why"] == census.WHY_IN_PLACE
    # the one .nv_fatbin container was too small to shrink: its sm_70 cubin stays, and says why
    assert store_left[".nv_fatbin"] == {"bytes": 4_064, "by_arch": {"sm_70": 4_064}, "why": "device code too small to shrink"}
    data_left = left["libdata-copy.so"]["sections"][".data"]
    assert data_left["by_arch"] == {"sm_70": 4_000 + 64, "sm_100": 30_000 + 64}   # 64: an entry's header
    assert c["for_no_listed_gpu_bytes"] == sum(f["bytes"] for f in c["left"])


def test_a_refused_file_says_so(tmp_path):
    lib = build_data_library(tmp_path / "src", [blackwell(i) for i in range(30)])
    record = files.prune_paths([lib], (61, 90))   # no code for sm_61 or sm_90: refused, left whole
    (left,) = record["census"]["left"]
    assert left["sections"][".data"]["why"].startswith("file left whole: no device code in this file runs on sm_61")
