"""The metrics on a real GPU worker (run by the metrics job, metrics.sh, on the H200, inside a capped
cgroup): a dask scheduler and one `dask cuda worker --preload rapids_runtime.metrics` with an RMM
pool and allocation tracking, a real Prometheus (Debian's binary) scraping both every second with
the shipped rules, and a CuPy job that holds three times the worker's device limit. Prints and
writes (argv[1]) what the worker's /metrics said while the data was held, what Prometheus stored,
every dashboard query's result count, the alerts, and what a scrape costs on the loaded worker."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
GB = 10**9
DEVICE_LIMIT, HOST_LIMIT, POOL = 2 * GB, 3 * GB, 4 * GB
WORKER_HTTP, SCHED_HTTP, PROM = "127.0.0.1:8788", "127.0.0.1:8787", "127.0.0.1:9090"


def get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def wait(url: str, what: str, seconds: int = 120) -> None:
    for _ in range(seconds * 2):
        try:
            get(url, 1)
            return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"{what} did not answer at {url}")


def query(expr: str) -> list[dict]:
    body = json.loads(get(f"http://{PROM}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
    assert body["status"] == "success", body
    return body["data"]["result"]


def rapidship_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(("rapidship_gpu", "rapidship_rmm", "rapidship_worker",
                                                             "rapidship_cgroup_memory_max", "rapidship_cgroup_memory_working"))]


def main(out_path: str) -> None:
    work = Path("/tmp/gpu-metrics")
    work.mkdir(exist_ok=True)
    (work / "alerts.yml").write_text((REPO / "monitoring/alerts.yml").read_text())
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
              "rule_files": [str(work / "alerts.yml")],
              "scrape_configs": [{"job_name": "dask", "static_configs": [{"targets": [SCHED_HTTP, WORKER_HTTP]}]}]}
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    logs = {n: open(work / f"{n}.log", "w") for n in ("prometheus", "scheduler", "worker")}
    procs = [subprocess.Popen(["/tmp/prometheus", f"--config.file={work / 'prometheus.yml'}",
                               f"--storage.tsdb.path={work / 'tsdb'}", f"--web.listen-address={PROM}"],
                              stdout=logs["prometheus"], stderr=subprocess.STDOUT),
             subprocess.Popen(["dask", "scheduler", "--host", "127.0.0.1", "--port", "8786",
                               "--dashboard-address", SCHED_HTTP], stdout=logs["scheduler"], stderr=subprocess.STDOUT)]
    procs.append(subprocess.Popen(
        ["dask", "cuda", "worker", "tcp://127.0.0.1:8786", "--host", "127.0.0.1", "--dashboard-address", WORKER_HTTP,
         "--device-memory-limit", str(DEVICE_LIMIT), "--memory-limit", str(HOST_LIMIT), "--rmm-pool-size", str(POOL),
         "--rmm-track-allocations", "--set-rmm-allocator-for-libs", "cupy", "--local-directory", os.environ["RAPIDS_SPILL_DIR"],
         "--preload", "rapids_runtime.metrics"], stdout=logs["worker"], stderr=subprocess.STDOUT))
    found: dict = {}
    try:
        wait(f"http://{PROM}/-/ready", "prometheus")
        wait(f"http://{WORKER_HTTP}/metrics", "the worker's /metrics")
        from dask.distributed import Client
        import dask.array as da

        client = Client("tcp://127.0.0.1:8786", timeout=60)
        client.wait_for_workers(1, timeout=120)
        idle = get(f"http://{WORKER_HTTP}/metrics").decode()
        t0 = time.time()
        x = da.arange(3 * DEVICE_LIMIT // 8, chunks=DEVICE_LIMIT // 8 // 16, dtype="int64")
        x = x.map_blocks(lambda b: __import__("cupy").asarray(b), dtype="int64").persist()
        from distributed import wait as dwait
        dwait(x, timeout=300)
        held_at = time.time()
        costs, cpu = [], []
        for _ in range(15):       # scrapes on the loaded worker (data held on device, host and disk)
            c0 = time.perf_counter()
            body = get(f"http://{WORKER_HTTP}/metrics").decode()
            costs.append(time.perf_counter() - c0)
            time.sleep(1)
        total = int(x.sum().compute())
        n = 3 * DEVICE_LIMIT // 8
        found["job"] = {"elements": n, "sum_exact": total == n * (n - 1) // 2, "persist_s": round(held_at - t0, 1)}
        found["scrape_ms_loaded"] = {"median": round(statistics.median(costs) * 1e3, 2), "max": round(max(costs) * 1e3, 2),
                                     "n": len(costs)}
        found["metrics_idle"] = rapidship_lines(idle)
        found["metrics_held"] = rapidship_lines(body)
        time.sleep(3)
        window = f"[{int(time.time() - t0) + 30}s]"
        dashboard = json.loads((REPO / "monitoring/dashboard.json").read_text())
        found["dashboard"] = {}
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                expr = target["expr"].replace("$worker", ".*")
                got = query(f"max_over_time(({expr})[{window[1:-1]}:1s])" if "[" not in expr else expr)
                found["dashboard"][expr] = [(r["metric"].get("worker", r["metric"].get("instance")), r["value"][1])
                                            for r in got]
        found["stored"] = {e: [(r["metric"].get("worker", ""), r["value"][1]) for r in query(e)] for e in (
            f"max_over_time(rapidship_gpu_memory_used_bytes{window})",
            f"max_over_time(rapidship_rmm_pool_size_bytes{window})",
            f"max_over_time(rapidship_rmm_allocated_bytes{window})",
            f"max_over_time(rapidship_spill_dir_used_bytes{window})",
            f"max_over_time(rapidship_cgroup_memory_working_set_bytes{window})")}
        found["alerts"] = [(r["metric"]["alertname"], r["metric"].get("alertstate")) for r in query(f"max_over_time(ALERTS{window})")]
        client.close()
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs.values():
            f.close()
    print(json.dumps(found, indent=1))
    Path(out_path).write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
