"""rapids-doctor: what this container may use, and whether spilling can work.

Reads the memory the container may really use (cgroup v2 memory.max / memory.high, cgroup v1
memory.limit_in_bytes, host RAM), /dev/shm, the memlock ulimit, the GPUs through NVML when it is
importable (memory, MIG, compute capability), the spill directory (owner, mode, filesystem, free
space), the dask spill configuration and the image's prune record (which GPU architectures' device
code the build kept); derives dask/dask-cuda/RMM settings that fit; prints both views of memory.
A GPU that the kept device code cannot run on is FATAL.

`--preflight` (run by the entrypoint) prints nothing when all is well and stops the container
with one FATAL line when spilling cannot work. `--json` prints the whole diagnosis.

Disk spill is required only where something spills to disk: dask workers (`dask worker`,
`dask-worker`, `dask cuda worker`, `dask-cuda-worker`) and `rapids-smoke`. The entrypoint hands
the doctor the command it is about to run (`rapids-doctor --preflight -- CMD ...`); for any other
command (`python job.py`: cuDF spills to host memory and needs no disk) an unusable spill dir is
a WARNING. RAPIDS_DISK_SPILL=required|optional overrides that choice, `--disk-spill` overrides both.

Shape: `read_*` functions do the I/O and return plain records; `derive`, `findings_for` and
`render_table` are pure functions over those records (unit-tested on fake cgroup trees).
Standard library only at import time: the doctor must run in a broken env too.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import asdict, replace

# The doctor is one program over the shared parts (views -> command -> rules); their users import
# them from where they live.
from . import gpu_guard
from .cgroup_view import available_cpus
from .command import DISK_SPILL_CHOICES, DISK_SPILL_ENV, Intent, intent_for
from .rules import _sm_list, derive, findings_for
from .units import _b, parse_bytes
from .views import Facts, collect

FATAL_EXIT = 3


def diagnose(f: Facts, n_workers: int = 1, intent: Intent | None = None) -> dict:
    """Pure: the whole report as JSON-ready data. `warnings` are what --preflight prints besides a
    FATAL: what stops a disk spill where the command needs none, and limits that do not hold."""
    intent = intent or Intent()
    d = derive(f, n_workers)
    findings = findings_for(f, d, intent)
    return {"facts": asdict(f), "derived": asdict(d), "intent": asdict(intent),
            "findings": [asdict(x) for x in findings],
            "fatal": [x.message for x in findings if x.level == "FATAL"],
            "warnings": [x.message for x in findings if x.said_at_preflight],
            "ok": not any(x.level == "FATAL" for x in findings)}


def render_table(report: dict) -> str:
    """Pure: one screen, no third-party libraries: both views of memory, the spill dir, the settings."""
    f, d = report["facts"], report["derived"]
    cg, gpu, sd, sc = f["cgroup"], f["gpu"], f["spill_dir"], f["spill_config"]
    rows: list[tuple[str, str, str]] = []
    add = lambda section, key, value: rows.append((section, key, str(value)))  # noqa: E731
    add("process", "uid / gid / groups", f"{f['uid']} / {f['gid']} / {','.join(map(str, f['groups'])) or '-'}")
    add("process", "cpus", f["cpus"])
    ver = f"v{cg['version']}" if cg["version"] else "none"
    add("memory (cgroup)", f"limit ({ver})", _b(cg["limit"]))
    if cg["version"] == 2:
        add("memory (cgroup)", "memory.high", _b(cg["high"]))
    if cg["version"] == 1:
        add("memory (cgroup)", "soft limit (reservation)", _b(cg["soft_limit"]) if cg["soft_limit"] else "-")
    add("memory (cgroup)", "swap limit", "unlimited" if cg["swap_unlimited"] else
        (_b(cg["swap_limit"]) if cg["swap_limit"] is not None else "-"))
    add("memory (cgroup)", "usage / peak", f"{_b(cg['usage']) if cg['usage'] is not None else '-'} / "
        f"{_b(cg['peak']) if cg['peak'] is not None else '-'}")
    add("memory (host)", "total / available", f"{_b(f['host_total'])} / {_b(f['host_available'])}")
    add("memory (host)", "/dev/shm", _b(f["shm_bytes"]))
    add("memory (host)", "memlock ulimit", _b(f["memlock_soft"]))
    if gpu["available"]:
        add("memory (GPU)", "driver / CUDA", f"{gpu['driver_version']} / {gpu['cuda_version']}")
        for g in gpu["gpus"]:
            cc = f", cc {g['cc_major']}.{g['cc_minor']}" if g["cc_major"] is not None else ", cc unknown"
            add("memory (GPU)", f"GPU {g['index']} {g['name']}", f"{_b(g['free'])} free of {_b(g['total'])}"
                + cc + (" (MIG on)" if g["mig_mode"] else ""))
            if g["share"]:
                add("memory (GPU)", "  given", g["share"])
            for s in g["mig_slices"]:
                add("memory (GPU)", f"  MIG slice {s['index']}", f"{_b(s['free'])} free of {_b(s['total'])}")
    else:
        add("memory (GPU)", "GPUs", f"none ({gpu['reason']})")
    pr = f["prune"]
    if pr["error"]:
        kept = f"UNREADABLE ({pr['path']})"
    elif pr["keep"] is None and not pr["present"] and not f["cuda_image"]:
        kept = "none (a CPU image: no CUDA, no device code; its label io.rapidship.gpu.archs says none)"
    elif pr["keep"] is None:
        kept = f"all (not pruned{'' if pr['present'] else '; no record at ' + pr['path']})"
    else:
        kept = f"{_sm_list(pr['keep'])} ({pr['path']})"
    add("device code", "GPU archs kept", kept)
    add("spill", "directory", sd["path"] or "NOT CONFIGURED (RAPIDS_SPILL_DIR)")
    if sd["path"]:
        if sd["exists"]:
            add("spill", "writable / mode / owner", f"{'yes' if sd['writable'] else 'NO'} / {sd['mode']:04o} / "
                f"{sd['owner_uid']}:{sd['owner_gid']}")
            add("spill", "filesystem / free", f"{sd['fstype']} at {sd['mount_point']} / {_b(sd['free_bytes'])}")
        else:
            add("spill", "exists", "NO")
    if sc["dask_available"]:
        add("spill", "dask target/spill/pause/terminate",
            "/".join("default" if sc[k] is None else str(sc[k]) for k in ("target", "spill", "pause", "terminate")))
        add("spill", "dask temporary-directory", sc["temporary_directory"] or "-")
    else:
        add("spill", "dask", "not installed")
    if sc["cudf_available"]:
        add("spill", "workers pre-import", ",".join(sc["pre_import"] + sc["preload"]) or "-")
    intent = report.get("intent") or asdict(Intent())
    add("command", "command", shlex.join(intent["command"]) if intent["command"] else "- (none given)")
    add("command", "disk spill", f"{intent['disk_spill']} ({intent['why']})")
    if intent["memory_limit"] is not None:
        add("command", "worker memory_limit", f"{_b(intent['memory_limit'])} x {intent['workers']} worker(s) "
            f"({intent['limit_source']})")
    add("derived", "memory budget", f"{_b(d['memory_budget'])} ({d['budget_source']})")
    add("derived", "dask worker memory_limit", f"{_b(d['worker_memory_limit'])} x {d['n_workers']} worker(s), "
        f"headroom {_b(d['headroom'])}")
    add("derived", "device_memory_limit", f"{_b(d['device_memory_limit']) if d['device_memory_limit'] else '-'} "
        f"({d['device_source']})")
    add("derived", "rmm_pool_size", _b(d["rmm_pool_size"]) if d["rmm_pool_size"] else "-")
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines, last = [], None
    for section, key, value in rows:
        lines.append(f"{section if section != last else '':{w0}}  {key:{w1}}  {value}")
        last = section
    for x in report["findings"]:
        lines.append(f"{x['level']}: [{x['topic']}] {x['message']}")
    if not report["findings"]:
        lines.append("OK: nothing to report")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    # the env's .pth put the GPU guard into this interpreter too; the doctor makes the same check and
    # says it as its FATAL line, and its probes for installed packages must not set the guard off
    gpu_guard.uninstall()
    argv = list(sys.argv[1:] if argv is None else argv)
    command = None
    if "--" in argv:                    # rapids-doctor [options] -- CMD ...: judge for that command
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(prog="rapids-doctor", description=__doc__.splitlines()[0],
                                     usage="%(prog)s [options] [-- COMMAND ...]")
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    parser.add_argument("--preflight", action="store_true",
                        help="quiet unless something is fatal (or would stop a disk spill the command does "
                             "not need, or unlimited swap makes the memory cap no cap: one WARNING line each)")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("RAPIDS_WORKERS", "1")),
                        help="dask workers that share the container's memory (default 1)")
    parser.add_argument("--disk-spill", choices=DISK_SPILL_CHOICES, default=None,
                        help=f"is disk spill required (default: ${DISK_SPILL_ENV}, else decided from the command "
                             "after --: required for dask workers and rapids-smoke, optional for anything else; "
                             "required when no command is given)")
    parser.add_argument("--memory-limit", type=parse_bytes, default=None,
                        help="check this memory_limit per worker (x --workers) against the container's budget "
                             "(a dask worker command after -- is read for its own --memory-limit)")
    args = parser.parse_args(argv)
    probe = intent_for(command, override=args.disk_spill, cpus=available_cpus())
    facts = collect(probe.spill_dir)  # the directory the command really spills to
    intent = intent_for(command, gpu_count=len(facts.gpu.gpus), override=args.disk_spill, cpus=facts.cpus)
    if args.memory_limit is not None:
        intent = replace(intent, memory_limit=args.memory_limit, workers=max(1, args.workers),
                         limit_source="rapids-doctor --memory-limit")
    report = diagnose(facts, args.workers, intent)
    if args.json:
        print(json.dumps(report, indent=2))
    elif not args.preflight:
        print(render_table(report))
    if args.preflight:
        for line in report["warnings"]:
            print(f"rapids-doctor: WARNING: {line}", file=sys.stderr)
    if args.preflight or args.json:
        for line in report["fatal"][:1]:
            print(f"rapids-doctor: FATAL: {line}", file=sys.stderr)
    return 0 if report["ok"] else FATAL_EXIT


if __name__ == "__main__":
    sys.exit(main())
