"""Compare the runs of the forms job (forms.sh): every pruned copy's results against the original's,
bit for bit (sha256 per result), plus errors against the float64 reference; prints JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(folder: Path, label: str) -> dict:
    path = folder / f"run-{label}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return {"error": f"no result: {err}"}


def compare(folder: Path, base: str, other: str) -> dict:
    a, b = load(folder, base), load(folder, other)
    out = {"seconds": b.get("seconds"), "error": b.get("error", "")}
    cases_a, cases_b = a.get("cases", {}), b.get("cases", {})
    same = [k for k in cases_a if k in cases_b and cases_a[k].get("sha") == cases_b[k].get("sha")
            and cases_a[k].get("exact", True) == cases_b[k].get("exact", True)]
    out |= {"cases": len(cases_a), "identical": len(same),
            "differ": sorted(set(cases_a) - set(same))[:5]}
    inits = [c["init_s"] for c in cases_b.values() if "init_s" in c]
    if inits:
        out["init_s"] = inits[0]
    errs = [c["rel_err"] for c in cases_b.values() if "rel_err" in c]
    if errs:
        out["max_rel_err"] = max(errs)
    bad = {k: c for k, c in cases_b.items() if c.get("status") or c.get("exact") is False}
    if bad:
        out["failed"] = dict(list(bad.items())[:3])
    return out


def main() -> int:
    folder = Path(sys.argv[1])
    pairs = {"fft": ["fft-original-again", "fft-90", "fft-80-on-sm90", "fft-tree-90", "fft-tree-90-eager"],
             "gemm": ["gemm-original-again", "gemm-original-eager", "gemm-8090", "gemm-8090-eager", "gemm-90",
                      "gemm-90-eager", "gemm-80-on-sm90", "gemm-tree-90", "gemm-tree-90-eager"],
             "sparse": ["sparse-tree-90", "sparse-tree-90-eager"],
             "nccl": ["nccl-90", "nccl-90-eager", "nccl-90-fatbin-only", "nccl-90-fatbin-only-eager",
                      "nccl-90-relfatbin-only", "nccl-90-neither", "nccl-original-neither", "nccl-80-on-sm90",
                      "nccl-tree-90", "nccl-tree-90-eager"]}
    present = {what for what in pairs if (folder / f"run-{what}-original.json").exists()}
    summary = {what: {label: compare(folder, f"{what}-original", label) for label in labels
                      if (folder / f"run-{label}.json").exists()}
               for what, labels in pairs.items() if what in present}
    for what in present:
        summary[what]["original"] = {k: v for k, v in load(folder, f"{what}-original").items() if k != "cases"}
    for prune in sorted(folder.glob("prune-*.json")):
        record = json.loads(prune.read_text())
        if len(record["files"]) > 1:   # a whole tree: its totals and what stayed whole
            summary.setdefault("prune", {})[prune.stem] = record["totals"] | {"left whole": {
                f["path"]: f["reason"] for f in record["files"] if f["status"] != "pruned"}}
            continue
        f = record["files"][0]
        summary.setdefault("prune", {})[prune.stem] = {k: f.get(k) for k in (
            "status", "bytes_before", "bytes_after", "layout", "reason", "containers_without_fleet_code",
            "containers_zeroed")}
    for proof in sorted(folder.glob("proof-tree-*.json")):
        p = json.loads(proof.read_text())
        gemm = p.get("steps", {}).get("cupy", {}).get("rand_gemm", {})
        summary.setdefault("proof", {})[proof.stem] = {"ok": p.get("steps", {}).get("cupy", {}).get("ok"),
                                                      "rand_gemm": {d: {k: v for k, v in gemm.get(d, {}).items()
                                                                        if k.endswith("sha256")}
                                                                    for d in ("float64", "float32")}}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
