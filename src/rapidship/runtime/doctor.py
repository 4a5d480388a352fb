"""rapids-doctor: what this container may use, and whether spilling can work.

First cut: cgroup memory limit and the spill directory. `--preflight` (run by the entrypoint)
prints nothing when all is well and stops the container with one clear line when spilling
cannot work.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

FATAL_EXIT = 3


def cgroup_memory_limit(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The container's memory cap in bytes (cgroup v2 memory.max, else v1), None when unlimited."""
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            raw = path.read_text().strip()
        except OSError:
            continue
        if raw == "max":
            return None
        value = int(raw)
        return None if value >= 2**62 else value  # v1 reports "unlimited" as a huge number
    return None


def spill_dir_problem(path: Path) -> str | None:
    if not path.is_dir():
        return f"spill dir {path} does not exist: mount a host directory there (RAPIDS_SPILL_DIR)"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"spill dir {path} is not writable by uid {os.getuid()}: chown it to the run uid, mode 0700"
    return None


def diagnose() -> dict:
    spill = Path(os.environ.get("RAPIDS_SPILL_DIR", "/spill"))
    problem = spill_dir_problem(spill)
    return {
        "uid": os.getuid(),
        "cgroup_memory_limit": cgroup_memory_limit(),
        "spill_dir": str(spill),
        "fatal": [problem] if problem else [],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rapids-doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    parser.add_argument("--preflight", action="store_true", help="quiet unless something is fatal")
    args = parser.parse_args(argv)
    report = diagnose()
    if args.json:
        print(json.dumps(report, indent=2))
    elif not args.preflight:
        for key, value in report.items():
            print(f"{key:22} {value}")
    for line in report["fatal"]:
        print(f"rapids-doctor: FATAL: {line}", file=sys.stderr)
    return FATAL_EXIT if report["fatal"] else 0


if __name__ == "__main__":
    sys.exit(main())
