"""What the GPU guard costs every interpreter start, side by side in one container.

The env's .pth (and its sitecustomize, for PYTHONPATH users) installs the guard at every start
(src/rapidship/runtime/gpu_guard.py): one import of rapids_runtime.gpu_guard, one small file
read. Measured inside the image (no container start in the timing), alternating, `python -c pass`:
without the guard (its .pth and sitecustomize moved aside between runs: the container runs as
root for that), with it as shipped (rapids_runtime compiled), and with rapids_runtime read from a
copy without its bytecode (first on PYTHONPATH: what an image shipping it uncompiled costs).

    python bench/guard_startup.py IMAGE [runs]
"""

from __future__ import annotations

import json
import subprocess
import sys

INSIDE = r"""
import glob, json, os, shutil, statistics, subprocess, sys, time
runs = int(sys.argv[1])
site = glob.glob(os.path.join(os.environ["RAPIDS_PREFIX"], "lib", "python*", "site-packages"))[0]
hooks = [os.path.join(site, n) for n in ("rapidship-gpu-guard.pth", "sitecustomize.py")]
shutil.copytree("/opt/rapidship/rapids_runtime", "/tmp/no-pyc/rapids_runtime",
                ignore=shutil.ignore_patterns("__pycache__"))
cases = {"no guard": {}, "guard": {}, "guard, runtime without bytecode": {"PYTHONPATH": "/tmp/no-pyc"}}
took = {k: [] for k in cases}
for _ in range(runs):
    for name, extra in cases.items():
        if name == "no guard":
            for h in hooks:
                os.rename(h, h + ".aside")
        try:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env={**os.environ, **extra}, check=True)
            took[name].append(time.perf_counter() - t)
        finally:
            if name == "no guard":
                for h in hooks:
                    os.rename(h + ".aside", h)
print(json.dumps({k: round(statistics.median(v) * 1000, 2) for k, v in took.items()}))
"""


def main() -> None:
    image, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200
    out = subprocess.run(["docker", "run", "--rm", "--user", "0", "-e", "RAPIDS_DOCTOR=off", "--tmpfs", "/tmp",
                          "--entrypoint", "python", image, "-c", INSIDE, str(runs)],
                         capture_output=True, text=True, check=True)
    ms = json.loads(out.stdout.strip().splitlines()[-1])
    base = ms["no guard"]
    ms["guard adds ms"] = round(ms["guard"] - base, 2)
    ms["guard without bytecode adds ms"] = round(ms["guard, runtime without bytecode"] - base, 2)
    ms["ratio guard / no guard"] = round(ms["guard"] / base, 3)
    print(json.dumps({"image": image, "runs": runs, "median_ms": ms}, indent=2))


if __name__ == "__main__":
    main()
