"""size-report's view of the prune record's census: what no listed GPU loads, per file and section
with why, copies counted, the largest first; a record from before the census shows none."""

from __future__ import annotations

from rapidship.imagebuild.size_report import prune_summary

CENSUS = {"files_with_device_code": 3, "copies_counted_once": 2, "container_bytes": 1_000, "for_no_listed_gpu_bytes": 70,
          "for_no_listed_gpu_by_arch": {"sm_70": 20, "sm_100": 50},
          "left": [{"path": "nvidia/cusparse/lib/libcusparse.so.12", "copies": [], "bytes": 50,
                    "sections": {".rodata": {"bytes": 40, "by_arch": {"sm_100": 40}, "why": "in place"},
                                 ".nv_fatbin": {"bytes": 10, "by_arch": {"sm_100": 10}, "why": "leading"}}},
                   {"path": "libucx/lib/ucx/libucx_perftest_cuda.so.0", "copies": ["a", "b"], "bytes": 20,
                    "sections": {".nv_fatbin": {"bytes": 20, "by_arch": {"sm_70": 20}, "why": "left whole: x"}}}]}


def test_the_census_is_shown_section_by_section_with_why_and_copies():
    left = prune_summary({"keep": [80, 90], "totals": {}, "files": [], "census": CENSUS})["left"]
    assert left["for_no_listed_gpu_bytes"] == 70 and left["copies_counted_once"] == 2
    assert [(s["path"].rsplit("/", 1)[-1], s["section"], s["bytes"], s["copies"], s["why"]) for s in left["sections"]] == [
        ("libcusparse.so.12", ".rodata", 40, 0, "in place"), ("libcusparse.so.12", ".nv_fatbin", 10, 0, "leading"),
        ("libucx_perftest_cuda.so.0", ".nv_fatbin", 20, 2, "left whole: x")]
    assert len(prune_summary({"totals": {}, "files": [], "census": CENSUS}, top=2)["left"]["sections"]) == 2


def test_a_record_without_a_census_shows_nothing_left():
    assert "left" not in prune_summary({"keep": [90], "totals": {}, "files": []})
