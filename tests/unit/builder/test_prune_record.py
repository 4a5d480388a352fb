"""The prune record that ships in the image says what was pruned, never how long it took: the image's
bytes must not depend on the build machine's speed (two cold builds differed by these times)."""

from __future__ import annotations

import json

import pytest

from rapidship.builder.prune import files
from rapidship.builder.prune.__main__ import timeless


def test_the_shipped_record_has_no_times_and_keeps_everything_else():
    entry = {"path": "/opt/rapids/lib/libx.so", "status": "pruned", "bytes_before": 10, "bytes_after": 4,
             "seconds": 0.123, "arch_before": {"80": 6}, "arch_after": {"80": 0}}
    record = files.record((90,), [entry], 12.5, [{"wheel": "x", "seconds": 1.0}])
    assert record["totals"]["seconds"] == 12.5 and record["files"][0]["seconds"] == 0.123
    shipped = timeless(record)
    assert '"seconds"' not in json.dumps(shipped)
    assert shipped["totals"]["saved_bytes"] == 6 and shipped["files"][0]["bytes_after"] == 4
    assert shipped["wheels"] == [{"wheel": "x"}] and shipped["keep"] == [90]
    slower = files.record((90,), [dict(entry, seconds=9.9)], 99.0, [{"wheel": "x", "seconds": 7.0}])
    assert timeless(slower) == shipped


def _entry(path: str, before: int, after: int, arch_before: dict, arch_after: dict) -> dict:
    return {"path": path, "status": "pruned" if after < before else "unchanged", "device_code": True,
            "bytes_before": before, "bytes_after": after, "arch_before": arch_before, "arch_after": arch_after}


def test_the_env_s_record_from_its_layers_records_is_the_whole_env_s_record():
    """The pip builder prunes each layer in its own stage; the merged record is what one prune of the
    whole env writes (totals, files in path order), the census's counts summed."""
    from rapidship.builder.prune.merge import merge

    a = [_entry("lib/a.so", 100, 40, {"sm_80": 30, "sm_70": 60}, {"sm_80": 30}), _entry("lib/z.so", 7, 7, {}, {})]
    b = [_entry("lib/m.so", 50, 20, {"sm_80": 10, "sm_100": 30}, {"sm_80": 10})]
    census = lambda n, left: {"files_with_device_code": n, "copies_counted_once": 1, "container_bytes": 9 * n,  # noqa: E731
                              "for_no_listed_gpu_bytes": n, "for_no_listed_gpu_by_arch": {"sm_100": n, "ptx_70": 1},
                              "left": left}
    parts = [timeless(dict(files.record((80, 90), a, 1.0), census=census(2, [{"path": "lib/a.so", "bytes": 5}]))),
             timeless(dict(files.record((80, 90), b, 2.0), census=census(1, [{"path": "lib/m.so", "bytes": 9}])))]
    whole = timeless(files.record((80, 90), a + b, 3.0))
    merged = merge(parts)
    assert {k: v for k, v in merged.items() if k != "census"} == whole
    assert merged["census"]["files_with_device_code"] == 3 and merged["census"]["copies_counted_once"] == 2
    assert list(merged["census"]["for_no_listed_gpu_by_arch"]) == ["ptx_70", "sm_100"]   # the census's own order
    assert [f["path"] for f in merged["census"]["left"]] == ["lib/m.so", "lib/a.so"]      # most bytes first
    other = timeless(files.record((90,), b, 2.0))
    with pytest.raises(ValueError, match="keep different GPUs"):
        merge([parts[0], other])
