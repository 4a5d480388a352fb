"""A real dask worker in the real cpu-debian12 image, under a real memory cap, with
`--preload rapids_runtime.metrics`: its /metrics (distributed's own endpoint, no new port) carries
the container's cgroup, spill dir and limits beside dask's metrics."""

from __future__ import annotations

import re
import subprocess

import pytest

pytestmark = pytest.mark.docker

SCRIPT = """
dask scheduler --host 127.0.0.1 --port 8786 --dashboard-address 127.0.0.1:8787 >/tmp/s.log 2>&1 &
dask worker tcp://127.0.0.1:8786 --host 127.0.0.1 --dashboard-address 127.0.0.1:8788 --nworkers 1 \
    --memory-limit 512MiB --local-directory /spill --preload rapids_runtime.metrics >/tmp/w.log 2>&1 &
for i in $(seq 60); do
  python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8788/metrics', timeout=2)" 2>/dev/null && break
  sleep 1
done
python -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8788/metrics', timeout=5).read().decode())"
"""


def test_the_worker_serves_the_container_views_on_its_own_metrics(cpu_image):
    proc = subprocess.run(["docker", "run", "--rm", "--memory", "1g", "--memory-swap", "1g", "--tmpfs",
                           "/spill:uid=1001,gid=0,mode=0700,size=256m", "-e", "RAPIDS_DOCTOR=off", "--entrypoint", "sh",
                           cpu_image.ref, "-c", SCRIPT], capture_output=True, text=True, timeout=240)
    text = proc.stdout
    assert "dask_worker_" in text, proc.stdout[-2000:] + proc.stderr[-2000:]  # distributed's own, same endpoint

    def value(name: str, **labels: str) -> float:
        pattern = name + r"\{([^}]*)\} (\S+)"
        for found in re.finditer(pattern, text):
            if all(f'{k}="{v}"' in found.group(1) for k, v in labels.items()):
                return float(found.group(2))
        raise AssertionError(f"{name} {labels} not in the scrape")

    assert value("rapidship_cgroup_memory_max_bytes") == 2**30  # the cap docker set
    assert 0 < value("rapidship_cgroup_memory_current_bytes") < 2**30
    assert value("rapidship_worker_memory_limit_bytes") == 512 * 2**20
    assert value("rapidship_spill_dir_size_bytes") == 256 * 2**20
    assert value("rapidship_cgroup_memory_events_total", event="oom_kill") == 0
    assert value("rapidship_cgroup_memory_stat_bytes", kind="anon") > 0
    assert "rapidship_gpu_memory_total_bytes" not in text  # no GPU: absent, not zero
