"""The prune record that ships in the image says what was pruned, never how long it took: the image's
bytes must not depend on the build machine's speed (two cold builds differed by these times)."""

from __future__ import annotations

import json

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
