"""GpuMemoryFullOutsideDask against scrapes recorded on an H100 (tests/fixtures/gpu-alerts-scrapes.json,
docs/measurements/gpu-alerts-2026-12-07/): a worker per RMM mode the project deploys (none, pool,
async) with another process filling the card, and healthy workers near their device limit. The
promtool cases are support/alert_cases.py's `gpus_recorded`; here: the record is what it says, and
the rule as it was (dividing by the whole card, an async pool counted as outside) fails them."""

from __future__ import annotations

import shutil

import pytest

from support import alert_cases
from support.recorded_gpu import recorded_cases
from unit.monitoring.test_monitoring import MON, promtool

OWN = '({__name__=~"rapidship_rmm_reserved_bytes|rapidship_worker_tier_bytes", tier=~"device|"}))'


def test_the_record_has_every_rmm_mode_crowded_and_near_its_limit():
    cases = {c["case"]: c for c in recorded_cases()}
    assert {c["mode"] for c in cases.values()} == {"none", "pool", "async"}
    for mode in ("none", "pool", "async"):   # each mode: crowded by another process, and healthy near its limit
        assert any(c["mode"] == mode and "other_process" in c for c in cases.values()), mode
        assert any(c["mode"] == mode and c.get("worker_data_gib", 0) >= 60 for c in cases.values()), mode
    # the cases that must fire are those where a fresh process could not get 1 GiB on the card
    crowded = {name for name, c in cases.items() if c["fresh_process_alloc_1gib"] != "ok"}
    assert crowded == set(alert_cases.CROWDED)
    # the real collector exported the async pool's reserve (about 90 % of the card) and a pool's size
    assert 'rapidship_rmm_reserved_bytes{' in cases["async90-idle"]["metrics"]
    assert "CudaAsyncMemoryResource" in cases["async90-idle"]["metrics"]
    assert 'rapidship_rmm_reserved_bytes{' in cases["pool20-other78"]["metrics"]


@pytest.mark.parametrize("before, after", [
    # the rule as it was: (used - own) over the whole card cannot pass 1 - own/total (a 20 % pool beside
    # another process holding 78 % read 79.9 %)
    ("\n             - on (cluster, job, instance, worker) group_left ()\n               max by (cluster, job, "
     f"instance, worker)\n                 {OWN}\n            or", ")\n            or"),
    # the async pool's reserve counted as outside dask: an idle worker with the documented 90 % pool pages
    ("rapidship_rmm_reserved_bytes|rapidship_worker_tier_bytes", "rapidship_rmm_pool_size_bytes|rapidship_worker_tier_bytes"),
])
def test_the_rule_as_it_was_fails_the_recorded_cases(tmp_path, before, after):
    text = (MON / "alerts.yml").read_text()
    assert before in text
    (tmp_path / "alerts.yml").write_text(text.replace(before, after))
    shutil.copy(MON / "alerts.test.yml", tmp_path / "alerts.test.yml")
    proc = promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)
    assert proc.returncode != 0 and "recorded on an H100" in proc.stdout + proc.stderr
