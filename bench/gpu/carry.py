"""The GPU jobs, one proof each, and what each needs carried to the GPU machine (no network there).

    python3 bench/gpu/carry.py                    the jobs, one line each
    python3 bench/gpu/carry.py plan JOB [ARGS]    JSON: the calls that run JOB, each its carry (paths
                                                 under the repository root, git-ignored) and command
    python3 bench/gpu/carry.py wheels JOB         what bench/gpu/run.sh assembles: parts, dir or none

A job's steps are bench/gpu/jobs/JOB.sh (bash, sourced by bench/gpu/run.sh after the shared
assembly of bench/gpu/lib.sh); the Python programs beside them are what those steps run.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JOBS_DIR = Path(__file__).resolve().parent / "jobs"
RUNNER = "bench/gpu/run.sh"
# What one call may carry beside the work tree (64 MiB in all): one 60 MiB wheel part at a time.
CARRY_BUDGET = 60 * 2**20


@dataclass(frozen=True)
class Job:
    name: str
    proves: str
    # parts: one tar of wheels as .whl/p00, p01, ... and its sha256 as .whl/SUM; dir: .whl/w/*.whl;
    # none: the machine's own CuPy and CUDA 13 libraries only
    wheels: str
    carry: tuple[str, ...] = ()     # further files under .whl/

    @property
    def steps(self) -> Path:
        return JOBS_DIR / f"{self.name}.sh"


JOBS = {job.name: job for job in (
    Job("prune", "pruned device code: RAPIDS wheels pruned to sm_90, then the machine's CUDA 13 libraries too, "
                 "against cuDF/cuML/cuRAND/cuBLAS answers; sm_80 only refused (docs/measurements/gpu-smoke.md, docs/prune.md)",
        "parts"),
    Job("forms", "the pruner's newer forms: cuFFT, cuBLASLt and NCCL copies pruned and run, the whole CUDA tree "
                 "pruned in place (ARGS: fft gemm nccl tree; docs/prune.md)", "none"),
    Job("store", "cuBLASLt's kernel store (.cask_resource) pruned in place after its .nv_fatbin: GEMMs of every "
                 "dtype, epilogues and batches bit-identical; sm_80 only fails loudly (docs/prune.md)", "none"),
    Job("nccl", "libnccl pruned to sm_90 runs NCCL's collectives exactly; sm_80 only refused (docs/prune.md)", "none"),
    Job("round2", "the GPU guard at the first CUDA import, the doctor with the real NVML, the GPU smoke closing "
                  "cleanly (ONLY=123; docs/measurements/gpu-smoke.md)", "dir"),
    Job("smoke_big", "the spill smoke past the documented sizes: 64 GB CuPy, 300 dask-cudf partitions, refused "
                     "limits, no worker (STEPS=1,2,3,4; docs/measurements/gpu-smoke.md)", "parts"),
    Job("cluster", "the cluster smoke over UCX: N dask cuda workers each under a cgroup cap, the image's job and "
                   "the bench client (docs/cluster.md)", "parts"),
    Job("giants", "which large optional files (numba_cuda_mlir, libnvrtc.alt, ptxas, nvlzcat) cuDF/numba "
                  "imports and UDFs load, and the same answers with the unloaded ones hidden (docs/prune.md)", "parts"),
    Job("alerts", "the GPU memory alerts' scrapes: a worker per RMM mode (none, pool, async) with another process "
                  "filling the card, and near its device limit (docs/monitoring.md)", "dir"),
    Job("metrics", "a GPU worker's /metrics scraped by Prometheus under a 12 GiB cap (docs/monitoring.md)", "dir",
        (".whl/prometheus.gz", ".whl/prometheus.sha256")),
)}


def job_named(name: str) -> Job:
    if name not in JOBS:
        raise SystemExit(f"no GPU job {name!r}: one of {', '.join(JOBS)}")
    return JOBS[name]


def command(job: Job, args: list[str]) -> str:
    return shlex.join(["bash", RUNNER, job.name, *args])


def carried(job: Job, root: Path = ROOT) -> list[Path]:
    """The files the job needs under `root`, as this machine has them."""
    whl = root / ".whl"
    found: list[Path] = []
    if job.wheels == "parts":
        found += [whl / "SUM", *sorted(whl.glob("p[0-9]*"))]
    elif job.wheels == "dir":
        found += sorted((whl / "w").glob("*.whl"))
    found += [root / path for path in job.carry]
    missing = [str(p.relative_to(root)) for p in found if not p.is_file()]
    if missing or (job.wheels != "none" and len(found) == len(job.carry)):
        raise SystemExit(f"{job.name}: nothing to carry at {missing or [f'{whl.relative_to(root)}/...']}; "
                         f"see bench/gpu/jobs/{job.name}.sh for what it wants there")
    return found


def plan(job: Job, args: list[str], root: Path = ROOT, budget: int = CARRY_BUDGET) -> list[dict]:
    """The calls that run `job`: wheel parts over several calls when they do not fit one carry (each
    earlier call gathers its part on the machine: run.sh --gather), the job itself with the last."""
    files = carried(job, root)
    parts = [p for p in files if p.name.startswith("p") and p.parent.name == ".whl"]
    rest = [p for p in files if p not in parts]
    batches: list[list[Path]] = []
    for part in parts:
        size = part.stat().st_size
        if not batches or sum(p.stat().st_size for p in batches[-1]) + size > budget:
            batches.append([])
        batches[-1].append(part)
    batches = batches or [[]]
    rel = lambda paths: [str(p.relative_to(root)) for p in paths]  # noqa: E731
    calls = [{"carry": rel([root / ".whl" / "SUM", *batch]), "command": f"bash {RUNNER} --gather"}
             for batch in batches[:-1]]
    calls.append({"carry": rel(rest + batches[-1]), "command": command(job, args)})
    return calls


def main(argv: list[str]) -> int:
    if not argv:
        for job in JOBS.values():
            print(f"{job.name:10} {job.proves}")
        return 0
    verb, name, *args = argv + [""] * (2 - len(argv))
    job = job_named(name)
    if verb == "wheels":
        print(job.wheels)
    elif verb == "plan":
        print(json.dumps({"job": job.name, "calls": plan(job, args)}, indent=1))
    else:
        raise SystemExit(f"unknown verb {verb!r}: plan or wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
