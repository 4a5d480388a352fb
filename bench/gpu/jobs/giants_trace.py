"""Which of the env's large optional files does a RAPIDS workload load? One scenario per child
process (an import, or a cuDF UDF / numba CUDA kernel actually run on the GPU), each reporting:
- the shared objects mapped into it at the end (/proc/self/maps, real paths),
- the top-level packages imported (sys.modules, with where each came from),
- every program it started (audit events subprocess.Popen, os.exec, os.posix_spawn),
and its answer, so a second pass with candidate files hidden can show the same answers.

    python3 giants_trace.py --out trace.json [--hide] [--scenarios a,b]

The import scenarios need no GPU: run them in a built image too (docs/prune.md says how).

--hide renames every candidate no scenario of the first pass touched (a trailing .hidden), runs the
scenarios again and puts the names back; the report says which were hidden and whether each
answer matched. Candidates (found under sys.path): numba_cuda_mlir/, llvmlite/, libnvrtc.alt.so*,
bin/ptxas, bin/nvlzcat.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SCENARIOS = {
    "import-cupy": "import cupy; answer = cupy.__version__",
    "import-numba.cuda": "import numba.cuda; answer = numba.cuda.__name__",
    "import-dask_cuda": "import dask_cuda; answer = dask_cuda.__version__",
    "import-cudf": "import cudf; answer = cudf.__version__",
    "import-dask_cudf": "import dask_cudf; answer = dask_cudf.__version__",
    "import-cuml": "import cuml; answer = cuml.__version__",
    "import-ucxx": "import ucxx; answer = ucxx.__version__",
    # a numba CUDA kernel, compiled (NVVM) and launched
    "numba-kernel": """
import numpy as np
from numba import cuda
@cuda.jit
def axpy(out, a, x, y):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]
x = np.arange(1 << 20, dtype=np.float64); y = np.ones_like(x); out = cuda.device_array_like(x)
axpy.forall(x.size)(out, 2.0, cuda.to_device(x), cuda.to_device(y))
answer = float(out.copy_to_host().sum())
""",
    # a cuDF string UDF (strings_udf: Series.apply over a string column)
    "cudf-string-udf": """
import cudf
s = cudf.Series(["rapids", "cudf", "", "spill to disk"] * 1000)
def f(st):
    return len(st) + st.count("s") if st.startswith("r") or st.endswith("k") else len(st)
answer = int(s.apply(f).sum())
""",
    # a cuDF row UDF (DataFrame.apply, masked: nulls)
    "cudf-row-udf": """
import cudf
df = cudf.DataFrame({"a": [1, 2, None, 4] * 1000, "b": [10, None, 30, 40] * 1000})
answer = int(df.apply(lambda row: row["a"] * 2 + row["b"] if row["a"] > 1 else row["b"], axis=1).sum())
""",
    # a cuDF rolling UDF (the numba_cuda_mlir backend in cuDF 26.10)
    "cudf-rolling-udf": """
import cudf
s = cudf.Series(range(10000), dtype="float64")
def g(window):
    total = 0.0
    for v in window:
        total += v * v
    return total
answer = float(s.rolling(5).apply(g).sum())
""",
    # a groupby JIT apply
    "cudf-groupby-jit": """
import cudf
df = cudf.DataFrame({"k": [1, 2, 3, 4] * 2500, "v": range(10000)})
answer = float(df.groupby("k").apply(lambda g: g["v"].max() - g["v"].min(), engine="jit").sum())
""",
}

CHILD = r"""
import json, os, sys, time
started = []
def hook(event, args):
    if event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn"):
        started.append(os.fsdecode(args[0]) if args and isinstance(args[0], (str, bytes)) else repr(args[:1]))
sys.addaudithook(hook)
t0 = time.time()
namespace = {}
exec(compile(SOURCE, "<scenario>", "exec"), namespace)
maps = set()
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) == 6 and ".so" in parts[5]:
            maps.add(os.path.realpath(parts[5].strip()))
modules = {}
for name, m in list(sys.modules.items()):
    top = name.split(".")[0]
    where = getattr(m, "__file__", None)
    if top not in modules and where:
        modules[top] = os.path.realpath(where)
print("TRACE " + json.dumps({"answer": repr(namespace.get("answer")), "seconds": round(time.time() - t0, 2),
                             "shared_objects": sorted(maps), "packages": modules, "started": started}))
"""


def candidates() -> list[str]:
    """The large optional files, wherever sys.path puts them (site-packages of this python)."""
    found: set[str] = set()
    for entry in sys.path:
        root = Path(entry)
        if not root.is_dir() or root.name not in ("site-packages", "dist-packages", "site"):
            continue
        for pattern in ("numba_cuda_mlir", "llvmlite"):
            if (root / pattern).is_dir():
                found.add(str((root / pattern).resolve()))
        for pattern in ("**/libnvrtc.alt.so*", "**/bin/ptxas", "**/bin/nvlzcat"):
            found.update(str(p.resolve()) for p in root.glob(pattern) if p.is_file())
    return sorted(found)


def run(name: str) -> dict:
    source = SCENARIOS[name]
    proc = subprocess.run([sys.executable, "-c", f"SOURCE = {source!r}\n" + CHILD], capture_output=True,
                          text=True, timeout=600, check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("TRACE ")), None)
    if proc.returncode or line is None:
        return {"ok": False, "rc": proc.returncode, "error": (proc.stderr or proc.stdout)[-3000:]}
    return {"ok": True, **json.loads(line[6:])}


def touched(result: dict, candidate: str) -> bool:
    if not result.get("ok"):
        return False
    paths = [*result["shared_objects"], *result["packages"].values(), *result["started"]]
    return any(p == candidate or p.startswith(candidate + "/") or os.path.basename(p) == os.path.basename(candidate)
               for p in paths)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--hide", action="store_true")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    names = args.scenarios.split(",")
    found = candidates()
    report: dict = {"python": sys.version.split()[0], "candidates": found, "first": {}, "loaded_by": {}}
    for name in names:
        t0 = time.time()
        report["first"][name] = result = run(name)
        print(f"{name}: {'ok' if result['ok'] else 'FAILED'} in {time.time() - t0:.1f} s, answer "
              f"{result.get('answer')}, started {result.get('started')}", flush=True)
        if not result["ok"]:
            print(result["error"], flush=True)
    for candidate in found:
        report["loaded_by"][candidate] = [n for n in names if touched(report["first"][n], candidate)]
        print(f"{candidate}: loaded by {report['loaded_by'][candidate] or 'nothing'}", flush=True)
    if args.hide:
        hidden = [c for c in found if not report["loaded_by"][c]]
        report["hidden"], report["second"] = hidden, {}
        for c in hidden:
            os.rename(c, c + ".hidden")
        try:
            for name in names:
                report["second"][name] = result = run(name)
                same = result.get("ok") and result["answer"] == report["first"][name].get("answer")
                print(f"hidden {len(hidden)}: {name}: {'same answer' if same else 'DIFFERS or FAILED'} "
                      f"({result.get('answer') or result.get('error', '')[-400:]})", flush=True)
        finally:
            for c in hidden:
                os.rename(c + ".hidden", c)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0 if all(r["ok"] for r in report["first"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
