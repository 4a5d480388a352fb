"""rapids-smoke spill: prove that data larger than the limits leaves memory instead of killing us.

Modes
  cpu   a distributed LocalCluster worker under the container's memory cap holds a dataset larger
        than the cap: it must spill host -> disk, read it back and give the right sum.
  gpu   a dask-cuda LocalCUDACluster worker with device and host limits holds a CuPy dataset of at
        least 2 x (device limit + host limit): device -> host -> disk, right sum.
  cudf  cuDF's own spilling under an RMM limit (with its spill statistics), then dask-cudf
        partitions through LocalCUDACluster; workers must pre-import dask_cudf (RAPIDS_PRE_IMPORT
        or --pre-import), or cuDF frames have no sizeof and never leave the device.

The report (JSON on stdout; logs on stderr) gives bytes per tier, spill files and bytes, peak
memory, durations, the result check and a verdict. Data that exceeded the limits but never left
the device / memory tier is a FAILURE, however "successful" the job looked.

The result check is exact at any size: each chunk (array chunk, dataframe partition, cuDF frame)
is summed where it lives and the chunk sums are added as Python ints (see `exact_chunk_len`).
Every cluster is bounded at both ends: no worker within --worker-timeout seconds fails the stage
at once; closing is bounded by --close-timeout and what goes wrong there is a note in the report,
which is always written. Leftover worker processes are stopped and exit never waits on them.

Standard library at import time; dask, numpy, cupy and cudf are imported by the mode that needs them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from .cgroup_view import read_cgroup
from .command import Intent
from .doctor import diagnose
from .session import (ABANDONED, DEFAULT_CLOSE_TIMEOUT, DEFAULT_DRAIN_TIMEOUT, DEFAULT_WORKER_TIMEOUT, begin, finish,
                      log, reap_children)
from .smoke_modes import MODES
from .smoke_verdict import Stage, verdict
from .spill_view import as_list, spill_path_from_env
from .units import parse_bytes
from .views import collect
from .worker_probes import peak_rss


FAIL_EXIT = 1
WORKER_TIMEOUT_ENV = "RAPIDS_SMOKE_WORKER_TIMEOUT"


def plan_limits(report: dict, args) -> dict:
    """Pure: the limits a run uses: flags first, then the doctor's derived settings."""
    d = report["derived"]
    cg = report["facts"]["cgroup"]
    return {"container": cg["limit"] or d["memory_budget"],
            "worker": args.memory_limit or d["worker_memory_limit"],
            "host": args.memory_limit or d["worker_memory_limit"],
            "device": args.device_memory_limit or d["device_memory_limit"]}


def smoke_intent(args) -> Intent:
    """What this run asks of the container: disk spill, and --memory-limit for each of its workers
    (cpu: --workers of them; gpu and cudf: one LocalCUDACluster worker)."""
    return Intent(["rapids-smoke", "spill", "--mode", args.mode], "rapids-smoke", "required",
                         "rapids-smoke spill writes to disk", args.memory_limit,
                         max(1, args.workers) if args.mode == "cpu" else 1, "--memory-limit",
                         spill_dir=args.spill_dir, device_limit=args.device_memory_limit,
                         device_source="rapids-smoke --device-memory-limit")


# FATALs that make a run prove nothing or never end; the others (no spill dir, spilling off) it runs
# into and reports as the failure they are (the negative runs of docs/spill.md)
REFUSED_TOPICS = ("memory-limit", "device-limit", "spill-disk", "spill-threshold")


def plan_problems(report: dict, args, limits: dict) -> list[str]:
    """Pure: why this run cannot start (empty = it can)."""
    # what would make the run prove nothing or never end: a limit above the cap or the GPU, a spill
    # "disk" in RAM or full, thresholds above the limit; each refused before anything starts
    problems = [f"refused before starting: {x['message']}" for x in report["findings"]
                if x["level"] == "FATAL" and x["topic"] in REFUSED_TOPICS]
    if args.mode != "cpu" and jit_unspill():
        problems.append("refused: JIT-unspill is on (DASK_JIT_UNSPILL): its ProxifyHostFile keeps no device / host / "
                        "disk tiers this smoke can read, so a pass would prove nothing; run the smoke with "
                        "DASK_JIT_UNSPILL unset (the workload may keep it)")
    if not args.spill_dir:
        problems.append("no spill directory: set RAPIDS_SPILL_DIR or pass --spill-dir")
    if args.mode == "cpu" and not limits["worker"]:
        problems.append("no memory limit known: pass --memory-limit")
    if args.mode != "cpu" and not limits["device"]:
        problems.append("no GPU seen by NVML and no --device-memory-limit: cannot size the device tier")
    return problems


def jit_unspill(environ: dict | None = None) -> bool:
    """dask-cuda's JIT-unspill switch (DASK_JIT_UNSPILL, or jit-unspill in its config)."""
    env = os.environ if environ is None else environ
    return str(env.get("DASK_JIT_UNSPILL", "")).strip().lower() in ("1", "true", "yes", "on")


def cgroup_peak() -> int | None:
    return read_cgroup().peak


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rapids-smoke", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("spill", help="spill a dataset larger than the limits and check it comes back")
    s.add_argument("--mode", choices=sorted(MODES), default="cpu")
    s.add_argument("--data-bytes", type=parse_bytes, default=None,
                   help="dataset size (default: 2 x the container limit; gpu: 2 x (device + host limit))")
    s.add_argument("--chunk-bytes", type=parse_bytes, default=None, help="array chunk size (cpu 32 MiB, gpu 128 MiB)")
    s.add_argument("--memory-limit", type=parse_bytes, default=None,
                   help="host memory per worker (default: the doctor's derived memory_limit); refused above "
                        "the container's memory budget")
    s.add_argument("--device-memory-limit", type=parse_bytes, default=None,
                   help="device memory per worker (default: the doctor's derived device_memory_limit)")
    s.add_argument("--spill-dir", default=spill_path_from_env(), help="default $RAPIDS_SPILL_DIR")
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--partitions", type=int, default=24, help="dask-cudf partitions of 128 MiB")
    s.add_argument("--pre-import", type=lambda v: as_list(v),
                   default=as_list(os.environ.get("RAPIDS_PRE_IMPORT", "")),
                   help="modules workers import first (default $RAPIDS_PRE_IMPORT), e.g. dask_cudf")
    s.add_argument("--timeout", type=float, default=300, help="seconds each step may take (default 300)")
    s.add_argument("--worker-timeout", type=float,
                   default=os.environ.get(WORKER_TIMEOUT_ENV) or str(DEFAULT_WORKER_TIMEOUT),
                   help=f"seconds a cluster may take to have its workers, else the stage fails at once "
                        f"(default ${WORKER_TIMEOUT_ENV}, else {DEFAULT_WORKER_TIMEOUT:g})")
    s.add_argument("--close-timeout", type=float, default=DEFAULT_CLOSE_TIMEOUT,
                   help=f"seconds closing the client and the cluster may take, each (default {DEFAULT_CLOSE_TIMEOUT:g})")
    s.add_argument("--drain-timeout", type=float, default=DEFAULT_DRAIN_TIMEOUT,
                   help=f"seconds the workers may take to free their data before the close (default {DEFAULT_DRAIN_TIMEOUT:g})")
    s.add_argument("--out", help="also write the JSON report to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    begin(args.close_timeout)
    t0 = time.monotonic()
    result: dict = {"mode": args.mode, "spill_dir": args.spill_dir, "limits": None, "doctor": None}
    problems: list[str] = []
    notes: list[str] = []
    stages: list[Stage] = []
    base = args.spill_dir
    children = set(multiprocessing.active_children())
    try:
        report = diagnose(collect(args.spill_dir), args.workers, smoke_intent(args))
        limits = plan_limits(report, args)
        result["limits"] = limits
        result["doctor"] = {"findings": report["findings"], "derived": report["derived"]}
        problems = plan_problems(report, args, limits)
        if not problems:
            # a fresh folder of our own: counts see only this run's spill files, and it is removed after
            try:
                args.spill_dir = tempfile.mkdtemp(prefix="rapids-smoke-", dir=base)
            except OSError as err:
                problems.append(f"cannot write to the spill dir {base}: {err.strerror}")
        if not problems:
            stages = MODES[args.mode](args, limits, notes)
            _, problems = verdict(stages)
    except Exception as err:  # noqa: BLE001 - whatever happened, the report says it
        traceback.print_exc(file=sys.stderr)
        problems.append(f"the smoke itself failed: {type(err).__name__}: {err}")
    finally:
        if args.spill_dir != base:
            shutil.rmtree(args.spill_dir, ignore_errors=True)
            args.spill_dir = base
        try:
            reap_children(children, args.close_timeout, notes)
        except Exception as err:  # noqa: BLE001
            notes.append(f"shutdown: stopping leftover processes failed: {type(err).__name__}: {err}")
        notes += [f"shutdown: left running in the background: {what}" for what in ABANDONED]
        code = _report(result, stages, problems, notes, t0, args.out)
    return code


def _report(result: dict, stages: list[Stage], problems: list[str], notes: list[str], t0: float,
            out: str | None) -> int:
    """Print (and write) the report; never raises."""
    result["stages"] = [asdict(s) for s in stages]
    try:
        peak_cgroup = cgroup_peak()
    except Exception:  # noqa: BLE001
        peak_cgroup = None
    result["peak"] = {"cgroup_bytes": peak_cgroup,
                      "self_rss_bytes": peak_rss(),
                      "workers_rss_bytes": max((s.extra.get("worker_rss_peak") or 0 for s in stages), default=None)}
    result["seconds"] = round(time.monotonic() - t0, 2)
    result["problems"] = problems
    result["notes"] = notes
    result["verdict"] = "PASS" if stages and not problems else "FAIL"
    text = json.dumps(result, indent=2, default=str)
    print(text, flush=True)
    if out:
        try:
            Path(out).write_text(text + "\n")
        except OSError as err:
            log(f"cannot write the report to {out}: {err}")
    for line in notes:
        log(f"note: {line}")
    for line in problems:
        log(f"FAIL: {line}")
    return 0 if result["verdict"] == "PASS" else FAIL_EXIT


def run(argv: list[str] | None = None) -> None:
    finish(main(argv))


if __name__ == "__main__":
    run()
