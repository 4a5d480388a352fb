"""`invoke prune` on the host: flags checked into typed values, progress shown, record written.

Not copied into build contexts (it needs rapidship and rich); the builder runs `python -m prune`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib.util import find_spec
from pathlib import Path

from rapidship.errors import ConfigError
from rapidship.records import save

from . import fatbin, files


def keep_from_flag(text: str | None) -> tuple[int, ...]:
    if not text:
        raise ConfigError("--keep", "no GPU architectures given", "e.g. --keep 80,90 (A100, H100/H200)")
    try:
        return fatbin.parse_keep(text)
    except ValueError as err:
        raise ConfigError("--keep", str(err), "list compute capabilities, e.g. --keep 80,90") from None


def find_cuobjdump(flag: str | None, required: bool = True) -> str | None:
    """The flag's cuobjdump, else one on PATH, else the nvidia-cuda-cuobjdump wheel's; each must
    answer --version like NVIDIA's (a wrong tool would refuse every file, or pass them)."""
    if flag:
        if not (os.path.isfile(flag) and os.access(flag, os.X_OK)):
            raise ConfigError("--cuobjdump", f"{flag} is not an executable file", "pass NVIDIA's cuobjdump")
        return _answers(flag)
    found = shutil.which("cuobjdump")
    if not found and find_spec("nvidia") is not None:
        for root in find_spec("nvidia").submodule_search_locations or []:
            for candidate in sorted(Path(root).glob("cu*/bin/cuobjdump")):
                if os.access(candidate, os.X_OK):
                    found = str(candidate)
    if not found and required:
        raise ConfigError("--cuobjdump", "NVIDIA's cuobjdump was not found (PATH, nvidia-cuda-cuobjdump wheel)",
                          "pip install nvidia-cuda-cuobjdump, pass --cuobjdump PATH, or --no-cuobjdump to rely "
                          "on the built-in proof alone")
    return _answers(found) if found else None


def _answers(tool: str) -> str:
    try:
        run = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError as err:
        raise ConfigError("--cuobjdump", f"{tool} does not run ({err.strerror or err})",
                          "pass NVIDIA's cuobjdump") from None
    if run.returncode != 0 or "cuobjdump" not in run.stdout + run.stderr:
        raise ConfigError("--cuobjdump", f"{tool} does not answer --version like NVIDIA's cuobjdump",
                          "pass NVIDIA's cuobjdump")
    return tool


def check_paths(paths: list[str], out: str | None) -> tuple[list[Path], Path | None]:
    if not paths:
        raise ConfigError("PATH", "nothing to prune", "name files, folders or wheels: invoke prune --keep 80,90 PATH")
    roots = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise ConfigError(p, "does not exist", "name an existing file, folder or .whl")
        roots.append(path)
    target = Path(out) if out else None
    if target is not None and target.exists() and not target.is_dir():
        raise ConfigError("--out", f"{out} is a file", "name a directory (it is created when missing)")
    return roots, target


def run(paths: list[str], keep: str | None, out: str | None, record_path: str, cuobjdump: str | None,
        verify: bool, jobs: int, on_file=None) -> dict:
    """Prune, write the record, return it."""
    keep_archs = keep_from_flag(keep)
    roots, target = check_paths(paths, out)
    tool = find_cuobjdump(cuobjdump) if verify else None
    record = files.prune_paths(roots, keep_archs, target, tool, max(1, jobs), on_file)
    save(Path(record_path), record)  # atomic, like every record
    return record
