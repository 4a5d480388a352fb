"""Do RAPIDS libraries with pruned device code still compute the same answers? One run on a GPU.

Each check feeds the same seeded data to the GPU library and its CPU reference (cudf vs pandas,
cuml vs scikit-learn) and compares; the cupy check hashes cuRAND and cuBLAS output so runs on
pruned and on original libraries can be diffed; `info` (run last) lists the CUDA libraries the
process mapped, so the JSON shows which copies were loaded. Prints one JSON document; exit code
0 only when every selected step passed.

    python3.12 bench/gpu/jobs/prune_proof.py [--only cudf,cuml,cupy,info] [--out proof.json]
        [--scale 1.0] [--seed 0] [--label pruned-sm90]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
import traceback
import zlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


# ---- pure helpers (no GPU): comparisons -------------------------------------------------------

def frames_equal(a: pd.DataFrame, b: pd.DataFrame, rtol: float = 1e-9) -> dict:
    """Integers must match exactly; floats within `rtol` relative (sums/means differ in order)."""
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return {"equal": False, "why": f"shape/columns {list(a.columns)}x{len(a)} vs {list(b.columns)}x{len(b)}"}
    worst = 0.0
    for col in a.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype.kind in "iub" and y.dtype.kind in "iub":
            if not np.array_equal(x, y):
                return {"equal": False, "why": f"column {col}: {int((x != y).sum())} ints differ"}
        else:
            x, y = x.astype(np.float64), y.astype(np.float64)
            if not np.array_equal(np.isnan(x), np.isnan(y)):
                return {"equal": False, "why": f"column {col}: NaN positions differ"}
            ok = ~np.isnan(x)
            rel = np.abs(x[ok] - y[ok]) / np.maximum(np.abs(y[ok]), np.finfo(np.float64).tiny)
            worst = max(worst, float(rel.max(initial=0.0)))
            if worst > rtol:
                return {"equal": False, "why": f"column {col}: relative error {worst:.3g} > {rtol}"}
    return {"equal": True, "max_rel_err": worst}


def adjusted_rand_index(a, b) -> float:
    """ARI from the contingency table (Hubert & Arabie); invariant to how clusters are numbered."""
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    table = np.bincount(ai * (bi.max() + 1) + bi).astype(np.float64)
    comb2 = lambda n: (n * (n - 1) / 2.0).sum()  # noqa: E731  pairs inside each cell/row/column
    index = comb2(table)
    rows, cols = comb2(np.bincount(ai).astype(np.float64)), comb2(np.bincount(bi).astype(np.float64))
    expected = rows * cols / comb2(np.array([float(a.size)]))
    top = (rows + cols) / 2.0
    return 1.0 if top == expected else float((index - expected) / (top - expected))


def to_numpy(x) -> np.ndarray:
    """cuml may hand back cupy/cudf objects; implicit np.asarray on those raises."""
    return x.to_numpy() if hasattr(x, "to_numpy") else x.get() if hasattr(x, "get") else np.asarray(x)


def timed(fn, sync=None):
    t = time.perf_counter()
    out = fn()
    if sync:  # GPU work is queued on a stream: wait for it before reading the clock
        sync()
    return out, round(time.perf_counter() - t, 4)


def gpu_sync():
    import cupy
    cupy.cuda.runtime.deviceSynchronize()


# ---- 1. cuDF vs pandas ------------------------------------------------------------------------

def cudf_groupby(rng, scale):
    import cudf
    import pandas as pd  # at call time: the module imports without pandas (bench/gpu tests)
    n, keys = int(10_000_000 * scale), 1000
    pdf = pd.DataFrame({"k": rng.integers(0, keys, n), "i": rng.integers(-10**6, 10**6, n),
                        "f": rng.standard_normal(n)})
    spec = {"i": ["sum", "count"], "f": ["mean"]}

    def flat(df):  # dict-of-lists agg gives MultiIndex columns in both libraries
        df.columns = ["_".join(c) for c in df.columns]
        return df[sorted(df.columns)].sort_index().reset_index()

    gdf, h2d_s = timed(lambda: cudf.from_pandas(pdf), gpu_sync)
    gdf.head(10).groupby("k").agg(spec)  # first call loads kernels: keep that out of the timing
    g, g_s = timed(lambda: gdf.groupby("k").agg(spec), gpu_sync)
    p, p_s = timed(lambda: pdf.groupby("k").agg(spec))
    r = {"rows": n, "keys": keys, "cudf_s": g_s, "pandas_s": p_s, "h2d_s": h2d_s,
         **frames_equal(flat(g.to_pandas()), flat(p), rtol=1e-9)}
    return {**r, "ok": r["equal"]}


def cudf_merge(rng, scale):
    import cudf
    import pandas as pd
    m = int(3_000_000 * scale)  # left: 4m/3 rows with repeated keys; right: 2m/3 unique keys
    left = pd.DataFrame({"k": rng.integers(0, m, m * 4 // 3), "a": rng.permutation(m * 4 // 3)})
    right = pd.DataFrame({"k": rng.permutation(m)[: m * 2 // 3], "b": rng.standard_normal(m * 2 // 3)})
    gl, gr = cudf.from_pandas(left), cudf.from_pandas(right)
    gl.head(10).merge(gr.head(10), on="k", how="inner")  # warm-up
    g, g_s = timed(lambda: gl.merge(gr, on="k", how="inner"), gpu_sync)
    p, p_s = timed(lambda: left.merge(right, on="k", how="inner"))
    canon = lambda df: df[["k", "a", "b"]].sort_values(["k", "a"]).reset_index(drop=True)  # noqa: E731
    r = {"left_rows": len(left), "right_rows": len(right), "out_rows": len(p), "cudf_s": g_s,
         "pandas_s": p_s, **frames_equal(canon(g.to_pandas()), canon(p), rtol=0.0)}  # copied values: exact
    return {**r, "ok": r["equal"]}


# ---- 2. cuML vs scikit-learn (float32 throughout: cuML's native precision, same arrays) --------

def kmeans(rng, scale):
    import cuml
    from sklearn.cluster import KMeans
    n = int(200_000 * scale)  # make_blobs-like: 8 well-separated centres in 16 dimensions
    truth = rng.integers(0, 8, n)
    X = (rng.uniform(-10, 10, (8, 16))[truth] + rng.standard_normal((n, 16))).astype(np.float32)
    g, g_s = timed(lambda: cuml.KMeans(n_clusters=8, n_init=3, max_iter=300, random_state=0).fit(X), gpu_sync)
    s, s_s = timed(lambda: KMeans(n_clusters=8, n_init=3, max_iter=300, random_state=0).fit(X))
    gl, sl = to_numpy(g.labels_), to_numpy(s.labels_)
    r = {"rows": len(X), "cuml_s": g_s, "sklearn_s": s_s, "cuml_inertia": float(g.inertia_),
         "sklearn_inertia": float(s.inertia_), "ari_cuml_sklearn": adjusted_rand_index(gl, sl),
         "ari_cuml_truth": adjusted_rand_index(gl, truth)}
    r["inertia_rel_diff"] = abs(r["cuml_inertia"] - r["sklearn_inertia"]) / r["sklearn_inertia"]
    r["ok"] = r["inertia_rel_diff"] <= 0.01 and r["ari_cuml_sklearn"] >= 0.99
    return r


def classify(gpu_model, cpu_model, X, y, tol):
    """Fit both on the first 80% of the (already random) rows, compare test accuracy."""
    cut = len(X) * 4 // 5
    g, g_s = timed(lambda: gpu_model.fit(X[:cut], y[:cut]), gpu_sync)
    s, s_s = timed(lambda: cpu_model.fit(X[:cut], y[:cut]))
    ga = float((to_numpy(g.predict(X[cut:])) == y[cut:]).mean())
    sa = float((s.predict(X[cut:]) == y[cut:]).mean())
    return {"rows": len(X), "cuml_s": g_s, "sklearn_s": s_s, "cuml_acc": ga, "sklearn_acc": sa,
            "ok": abs(ga - sa) <= tol}


def logreg(rng, scale):
    import cuml
    from sklearn.linear_model import LogisticRegression
    n = int(100_000 * scale)
    X = rng.standard_normal((n, 20)).astype(np.float32)
    y = (X @ rng.standard_normal(20) + 0.5 * rng.standard_normal(n) > 0).astype(np.int32)
    return classify(cuml.LogisticRegression(C=1.0, max_iter=1000), LogisticRegression(C=1.0, max_iter=1000),
                    X, y, tol=0.01)


def forest(rng, scale):
    import cuml
    from sklearn.ensemble import RandomForestClassifier
    n = int(100_000 * scale)
    X = rng.standard_normal((n, 20)).astype(np.float32)
    # a non-linear rule, so the trees have something to learn that a linear model cannot
    y = (X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + X[:, 3] ** 2 - 1 + 0.3 * rng.standard_normal(n) > 0)
    kw = dict(n_estimators=100, max_depth=16, max_features="sqrt", random_state=0)
    return classify(cuml.ensemble.RandomForestClassifier(**kw), RandomForestClassifier(n_jobs=-1, **kw),
                    X, y.astype(np.int32), tol=0.02)


# ---- 3. cuRAND + cuBLAS through CuPy ----------------------------------------------------------

def rand_gemm(rng, scale):
    import cupy as cp
    n = max(64, int(2048 * scale))
    out = {"n": n}
    for dtype, rtol in (("float64", 1e-9), ("float32", 1e-3)):
        # RandomState (not default_rng) is the API that goes through the cuRAND library
        a = cp.random.RandomState(seed=1234).standard_normal((n, n), dtype=dtype)
        b = cp.random.RandomState(seed=5678).standard_normal((n, n), dtype=dtype)
        c, t = timed(lambda: a @ b, gpu_sync)  # cuBLAS gemm
        again = cp.random.RandomState(seed=1234).standard_normal((n, n), dtype=dtype) @ b
        ha, hc = cp.asnumpy(a), cp.asnumpy(c)
        ref = ha.astype(np.float64) @ cp.asnumpy(b).astype(np.float64)
        err = float(np.abs(hc - ref).max() / np.abs(ref).max())
        out[dtype] = {"rand_sha256": hashlib.sha256(ha.tobytes()).hexdigest(),
                      "matmul_sha256": hashlib.sha256(hc.tobytes()).hexdigest(),
                      "matmul_s": t, "max_err_vs_numpy": err, "repeatable": bool((again == c).all()),
                      "rand_mean": float(ha.mean()), "rand_std": float(ha.std())}
        tol = 5.0 / n  # five standard errors of a mean over n*n normal draws
        out[dtype]["ok"] = (err <= rtol and out[dtype]["repeatable"]
                            and abs(out[dtype]["rand_mean"]) < tol and abs(out[dtype]["rand_std"] - 1) < tol)
    out["ok"] = out["float64"]["ok"] and out["float32"]["ok"]
    return out


# ---- 4. device and versions -------------------------------------------------------------------

LIB_RE = re.compile(r"lib(cudf|cuvs|cuml|raft|nvforest|nvcomp|rmm|kvikio|cublas|cublasLt|curand|"
                    r"cusolver|cusparse|cufft|nccl|nvrtc|nvJitLink)[^/]*\.so[.0-9]*$")


def device(rng, scale):
    import cupy as cp
    import pandas as pd
    p = cp.cuda.runtime.getDeviceProperties(0)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    out = {"device": name, "compute_capability": f"{p['major']}.{p['minor']}",
           "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(), "cuda_driver": cp.cuda.runtime.driverGetVersion(),
           "python": sys.version.split()[0], "numpy": np.__version__, "pandas": pd.__version__}
    for mod in ("cudf", "cuml", "cupy", "sklearn"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as e:  # a missing library is reported, not fatal
            out[mod] = f"unavailable: {type(e).__name__}"
    # which copies of the CUDA libraries this process mapped (pruned or original), with sizes
    libs = {}
    with open("/proc/self/maps") as fh:
        for line in fh:
            path = line.split()[-1]
            if LIB_RE.search(path) and path not in libs:
                libs[path] = os.path.getsize(path) if os.path.exists(path) else None
    return {**out, "loaded_libs": libs, "ok": True}


# ---- driver -----------------------------------------------------------------------------------

def guarded(fn) -> dict:
    t = time.perf_counter()
    try:
        res = fn()
    except Exception as e:
        res = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
    res["wall_s"] = round(time.perf_counter() - t, 3)
    return res


# Each step is a list of checks; each check runs guarded, on its own seeded data, so one failure
# hides nothing and --only never changes what data another check sees.
STEPS = {"cudf": [cudf_groupby, cudf_merge], "cuml": [kmeans, logreg, forest],
         "cupy": [rand_gemm], "info": [device]}  # info last: it lists the libraries the rest loaded


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(STEPS), help="comma list of: " + ",".join(STEPS))
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every row count (quick runs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", default="", help="free text kept in the JSON, e.g. 'pruned sm90'")
    args = ap.parse_args(argv)
    steps = [s.strip() for s in args.only.split(",") if s.strip()]
    if not steps or set(steps) - set(STEPS):
        ap.error(f"--only takes a comma list of {','.join(STEPS)}")
    result = {"label": args.label, "argv": sys.argv[1:] if argv is None else argv, "steps": {}}
    for step in [s for s in STEPS if s in steps]:
        checks = {}
        for f in STEPS[step]:
            rng = np.random.default_rng([args.seed, zlib.crc32(f.__name__.encode())])
            checks[f.__name__] = guarded(lambda: f(rng, args.scale))
        result["steps"][step] = {"ok": all(bool(c.get("ok")) for c in checks.values()), **checks}
    result["ok"] = all(r["ok"] for r in result["steps"].values())
    text = json.dumps(result, indent=2, default=lambda o: o.item() if hasattr(o, "item") else str(o))
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
