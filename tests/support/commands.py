"""What tests share that is not a fixture: the checkout's root and running invoke as a user would."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CPU_VARIANT = "cpu-debian12"


def invoke(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run an invoke task from the project root as a user would."""
    proc = subprocess.run(["invoke", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"invoke {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc
