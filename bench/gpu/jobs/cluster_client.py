"""The client of the GPU cluster smoke: N `dask cuda worker` processes (each under its own cgroup
memory cap, started by the cluster job, cluster.sh) on one scheduler, talking UCX over TCP.

Job: an int64 array of --gb gigabytes made on the workers in row blocks and persisted (more than
every worker's device + host limits together: each must spill device -> host -> disk), then its
transpose rechunked into column blocks (every output block gathers a slab of every input block:
an all-to-all between the workers) and summed per column. Exact: column j of an arange(R*C)
reshaped (R, C) sums to C*R*(R-1)/2 + j*R. Per worker: tiers (device / host / disk keys and bytes),
spill files on disk, bytes it received from the others, its address (the transport)."""

from __future__ import annotations

import argparse
import json
import sys
import time


def make_rows(rows: int, cols: int, block_info=None):
    import cupy

    start = block_info[None]["array-location"][0][0]
    n = block_info[None]["chunk-shape"][0]
    return (cupy.arange(start * cols, (start + n) * cols, dtype=cupy.int64)).reshape(n, cols)


def worker_view(dask_worker) -> dict:
    from rapids_runtime.spill_view import dir_usage
    from rapids_runtime.worker_probes import device_tiers

    tiers = device_tiers(dask_worker)
    files, disk_bytes = dir_usage(dask_worker.local_directory, only_storage=False)
    received = 0
    for entry in list(getattr(dask_worker, "transfer_incoming_log", []) or []):
        received += int(entry.get("total", 0) or 0)
    return {"address": dask_worker.address, "name": str(dask_worker.name), "tiers": tiers,
            "spill_files": files, "spill_file_bytes": disk_bytes, "received_bytes": received,
            "comm": type(dask_worker.rpc.pool if hasattr(dask_worker.rpc, "pool") else dask_worker.rpc).__name__}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scheduler", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gb", type=float, default=12.0)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--chunk-mb", type=int, default=128)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=420)
    args = ap.parse_args()

    import cupy
    import dask.array as da
    import numpy as np
    from distributed import Client, wait

    t0 = time.monotonic()
    report: dict = {"scheduler": args.scheduler, "workers_wanted": args.workers, "verdict": "FAIL", "problems": []}
    client = Client(args.scheduler, timeout=60)
    try:
        client.wait_for_workers(args.workers, timeout=120)
        cols = args.cols
        chunk_rows = max(1, args.chunk_mb * 1_000_000 // (cols * 8))
        rows = int(args.gb * 1e9) // (cols * 8) // chunk_rows * chunk_rows
        blocks = rows // chunk_rows
        meta = cupy.empty((0, 0), dtype=cupy.int64)
        a = da.map_blocks(make_rows, rows, cols, chunks=((chunk_rows,) * blocks, (cols,)), dtype=np.int64, meta=meta)
        report.update(rows=rows, cols=cols, blocks=blocks, data_bytes=rows * cols * 8)
        a = a.persist()
        wait(a, timeout=args.timeout)
        report["after_persist"] = client.run(worker_view)
        t1 = time.monotonic()
        col_block = max(1, args.chunk_mb * 1_000_000 // (rows * 8))
        b = a.T.rechunk((col_block, rows), method="tasks")  # all-to-all: every output block reads every input
        got = cupy.asnumpy(b.sum(axis=1).compute(timeout=args.timeout))
        j = np.arange(cols, dtype=np.int64)
        want = np.int64(cols) * (rows * (rows - 1) // 2) + j * rows
        report["shuffle_seconds"] = round(time.monotonic() - t1, 1)
        report["exact"] = bool(np.array_equal(got, want))
        report["after_shuffle"] = client.run(worker_view)
        views = report["after_persist"]
        for addr, v in views.items():
            t = v["tiers"]
            if not (t["device"][1] > 0 and t["host"][1] > 0 and t["disk"][0] > 0 and v["spill_files"] > 0):
                report["problems"].append(f"{v['name']} ({addr}) did not fill every tier: {t}")
        if len(views) != args.workers:
            report["problems"].append(f"{len(views)} workers answered, {args.workers} wanted")
        if not all(a.startswith(("ucx://", "ucxx://")) for a in views):
            report["problems"].append(f"not every worker talks UCX: {sorted(views)}")
        moved = sum(v["received_bytes"] for v in report["after_shuffle"].values())
        report["received_bytes_total"] = moved
        if moved <= 0:
            report["problems"].append("no bytes moved between workers: no shuffle happened")
        if not report["exact"]:
            report["problems"].append("the column sums are wrong")
        report["verdict"] = "PASS" if not report["problems"] else "FAIL"
    except Exception as err:  # noqa: BLE001 - the report must say what happened
        report["problems"].append(f"{type(err).__name__}: {err}")
    finally:
        report["seconds"] = round(time.monotonic() - t0, 1)
        with open(args.out, "w") as out:
            json.dump(report, out, indent=2, default=str)
        try:
            client.close(timeout=30)
        except Exception:  # noqa: BLE001
            pass
    print(json.dumps({k: report[k] for k in ("verdict", "problems", "seconds")}))
    return 0 if report["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
