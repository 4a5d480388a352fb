"""Is shipping *.pyc worth its bytes? Import time of a built image with and without its pyc files.

The image runs with PYTHONDONTWRITEBYTECODE=1 and an env a random uid cannot write, so a process
that finds no pyc compiles every module it imports, every time it starts (each dask worker too).
`PYTHONPYCACHEPREFIX` points Python at an empty cache tree, which makes it ignore the shipped
__pycache__ dirs: the same image, measured side by side, alternating runs.

    python bench/pyc_startup.py rapidship/rapids:26.10-cuda12.9-debian12-py3.11-amd64 [runs] [modules]
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CODE = "import time; t = time.perf_counter(); import {mods}; print(time.perf_counter() - t)"


def once(ref: str, modules: str, pyc: bool) -> float:
    env = [] if pyc else ["-e", "PYTHONPYCACHEPREFIX=/tmp/no-pyc"]
    out = subprocess.run(["docker", "run", "--rm", "-e", "RAPIDS_DOCTOR=off", *env, ref, "python", "-c",
                          CODE.format(mods=modules)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def pyc_bytes(ref: str) -> int:
    out = subprocess.run(["docker", "run", "--rm", "-e", "RAPIDS_DOCTOR=off", ref, "sh", "-c",
                          "find / -xdev -name '*.pyc' -printf '%s\\n' | awk '{s+=$1} END {print s+0}'"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def main() -> None:
    ref = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    modules = sys.argv[3] if len(sys.argv) > 3 else "cudf, dask_cudf, dask_cuda"
    with_pyc, without = [], []
    for _ in range(runs):
        with_pyc.append(once(ref, modules, True))
        without.append(once(ref, modules, False))
    a, b = statistics.median(with_pyc), statistics.median(without)
    print(f"image: {ref}\nimport {modules}: median of {runs} runs")
    print(f"  with the shipped pyc:    {a:.2f} s  {[round(x, 2) for x in with_pyc]}")
    print(f"  without (compile each):  {b:.2f} s  {[round(x, 2) for x in without]}")
    print(f"  ratio without/with: {b / a:.2f}x; pyc bytes in the image: {pyc_bytes(ref):,}")


if __name__ == "__main__":
    main()
