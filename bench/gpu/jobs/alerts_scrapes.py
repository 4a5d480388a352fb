"""The GPU memory alerts' scrapes (run by the alerts job, alerts.sh): for each case, one `dask cuda
worker --preload rapids_runtime.metrics` in an RMM mode the project deploys (none; pool:
PoolMemoryResource; async: CudaAsyncMemoryResource), then either another process (CuPy) filling the
card or the worker's own data held near its device limit; the worker's rapidship_* /metrics lines,
NVML's figures and whether the worker and a fresh process could still allocate 1 GiB. Writes argv[1];
ONLY=name,... runs those cases alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

GiB = 2**30
WORKER_HTTP = "127.0.0.1:8788"
FILL = ("import cupy, sys, time; a = cupy.empty(int(sys.argv[1]), dtype='u1'); a.fill(1); "
        "cupy.cuda.runtime.deviceSynchronize(); print('held', a.nbytes, flush=True); time.sleep(900)")
PROBE = ("import cupy\ntry:\n    cupy.empty(2**30, dtype='u1').fill(1); cupy.cuda.runtime.deviceSynchronize(); print('ok')\n"
         "except Exception as e:\n    print(type(e).__name__)")


def nvml() -> dict:
    import pynvml
    pynvml.nvmlInit()
    try:
        m = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
        return {"total": int(m.total), "used": int(m.total - m.free), "free": int(m.free)}
    finally:
        pynvml.nvmlShutdown()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def wait_http(url: str, seconds: int = 120) -> None:
    for _ in range(seconds * 2):
        try:
            get(url)
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"no answer at {url}")


def rapidship_text(text: str) -> str:
    """The exposition lines of rapidship's own families (HELP/TYPE included): what the rules read."""
    keep = [ln for ln in text.splitlines() if ln.startswith("rapidship_") or ln.startswith(("# HELP rapidship_",
                                                                                           "# TYPE rapidship_"))]
    return "\n".join(keep) + "\n"


def fresh_alloc() -> str:
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60).stdout.strip()


def worker_alloc(client) -> str:
    def probe():
        import cupy
        try:
            cupy.empty(2**30, dtype="u1").fill(1)
            cupy.cuda.runtime.deviceSynchronize()
            return "ok"
        except Exception as err:  # noqa: BLE001
            return type(err).__name__
    return next(iter(client.run(probe).values()))


def rmm_view(client) -> str:
    def view():
        from rapids_runtime import tier_view
        return repr(tier_view.read_rmm())
    return next(iter(client.run(view).values()))


def case(name: str, mode: str, pool: float, limit: float, fill: float | None, data: float, total: int) -> dict:
    """mode none|pool|async; pool and limit fractions of the card; fill: another process's share of the
    card (None: none); data: the worker's own data as a share of its device limit."""
    from dask.distributed import Client, wait

    args = ["dask", "cuda", "worker", "tcp://127.0.0.1:8786", "--host", "127.0.0.1", "--name", f"w-{name}",
            "--dashboard-address", WORKER_HTTP, "--nthreads", "1", "--memory-limit", str(64 * GiB),
            "--device-memory-limit", str(int(limit * total)), "--local-directory", os.environ["RAPIDS_SPILL_DIR"],
            "--preload", "rapids_runtime.metrics"]
    if mode != "none":
        args += ["--rmm-pool-size", str(int(pool * total) // 256 * 256), "--set-rmm-allocator-for-libs", "cupy"]
    if mode == "async":
        args += ["--rmm-async"]
    log = open(f"/tmp/gpu-alerts/{name}.log", "w")
    worker = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    filler = None
    found: dict = {"case": name, "mode": mode, "worker_command": " ".join(args[:4] + ["..."] + args[8:])}
    t0 = time.time()
    try:
        client = Client("tcp://127.0.0.1:8786", timeout=60)
        client.wait_for_workers(1, timeout=120)
        wait_http(f"http://{WORKER_HTTP}/metrics")
        found["nvml_worker_started"] = nvml()
        held = []
        if data:
            n = int(data * limit * total) // GiB
            held = client.map(lambda i: __import__("cupy").ones(GiB // 8, dtype="f8"), range(n), pure=False)
            wait(held)   # held on the worker: never gathered into this process
            found["worker_data_gib"] = n
        if fill is not None:
            size = int(fill * total) if fill > 0 else nvml()["free"] - GiB   # fill 0: all but 1 GiB of what is free
            filler = subprocess.Popen([sys.executable, "-c", FILL, str(size)], stdout=subprocess.PIPE, text=True)
            found["other_process"] = filler.stdout.readline().strip()
        time.sleep(2)
        scrapes = [get(f"http://{WORKER_HTTP}/metrics") for _ in range(2)]
        found["nvml"] = nvml()
        found["metrics"] = rapidship_text(scrapes[-1])
        found["rmm_view"] = rmm_view(client)
        found["worker_alloc_1gib"] = worker_alloc(client)
        found["fresh_process_alloc_1gib"] = fresh_alloc()
        del held
        client.close()
    except Exception as err:  # noqa: BLE001 - one case failing leaves the others to run
        found["error"] = f"{type(err).__name__}: {err}"
    finally:
        for p in (filler, worker):
            if p is not None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        log.close()
    found["seconds"] = round(time.time() - t0, 1)
    found["worker_log_tail"] = Path(f"/tmp/gpu-alerts/{name}.log").read_text().splitlines()[-6:]
    print(json.dumps({k: v for k, v in found.items() if k != "metrics"}), flush=True)
    print(found.get("metrics", ""), flush=True)
    return found


CASES = (   # name, mode, pool, device limit, another process's share (0: all it can get), own data / limit
    ("pool20-other78", "pool", 0.20, 0.80, 0.78, 0),
    ("async20-other78", "async", 0.20, 0.80, 0.78, 0),
    ("none-otherfull", "none", 0, 0.80, 0, 0.05),
    ("async90-idle", "async", 0.90, 0.80, None, 0),
    ("async90-nearlimit", "async", 0.90, 0.80, None, 0.95),
    ("pool90-nearlimit", "pool", 0.90, 0.80, None, 0.95),
    ("none-nearlimit", "none", 0, 0.80, None, 0.95),
    ("pool90-otherrest", "pool", 0.90, 0.80, 0, 0),
)


def main(out: str) -> None:
    Path("/tmp/gpu-alerts").mkdir(exist_ok=True)
    sched = subprocess.Popen(["dask", "scheduler", "--host", "127.0.0.1", "--port", "8786", "--dashboard-address",
                              "127.0.0.1:8787"], stdout=open("/tmp/gpu-alerts/scheduler.log", "w"), stderr=subprocess.STDOUT)
    total = nvml()["total"]
    found = []
    try:
        wait_http("http://127.0.0.1:8787/metrics")
        only = [n for n in os.environ.get("ONLY", "").split(",") if n]   # ONLY=name,...: those cases alone
        for spec in (c for c in CASES if not only or c[0] in only):
            found.append(case(*spec, total=total))
            Path(out).write_text(json.dumps(found, indent=1))
    finally:
        sched.terminate()
        sched.wait(timeout=30)


if __name__ == "__main__":
    main(sys.argv[1])
