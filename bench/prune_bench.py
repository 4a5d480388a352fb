"""Device-code pruning benchmark: the same RAPIDS image built with all device code and pruned to
gpu_archs, side by side in one run, plus the pruner's own speed on that image's env.

Builds (real render + BuildKit, the engine's cache shared) the variant twice: as variants.yaml
says (pruned) and as a twin with `gpu_archs: all` under another image name. Then copies the
unpruned env out of the twin and times `python -m rapidship.builder.prune` on it (into a scratch folder,
so every run starts from the same files), with and without the cuobjdump check. Prints a table
and one JSON document with the ratios, including against the 10.5 GB rapidsai cuDF + cuML image.
Usage (project root, engine up, `invoke base` done):
    python3 bench/prune_bench.py [--variant cuda12-debian12] [--runs 2] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rapidship.imagebuild.buildkit import BuildSecrets, build, local_base_args, plan_build  # noqa: E402
from rapidship.imagebuild.normalise import source_date_epoch  # noqa: E402
from rapidship.config.matrix import Arch, load_matrix  # noqa: E402
from rapidship.builder.prune import files  # noqa: E402
from rapidship.builder.prune.host import find_cuobjdump  # noqa: E402
from rapidship.render.dockerfile import render  # noqa: E402

ANCHOR_BYTES = 10_500_000_000  # rapidsai's cuDF + cuML image, uncompressed


def built_image(variant, arch: Arch, out_root: Path) -> dict:
    rendered = render(variant, out_root=out_root)
    secrets = BuildSecrets.from_flags(None, None, None)
    plan = plan_build(variant, arch, rendered, secrets, base_args=local_base_args(variant, arch),
                      epoch=source_date_epoch(Path.cwd()))
    img = build(plan, secrets, variant, Path(rendered.out_dir) / f"build-{arch.value}.log")
    print(f"built {img.ref}: {img.size_bytes:,} bytes, zstd {img.zstd_bytes:,}, {img.seconds} s", flush=True)
    return {"ref": img.ref, "bytes": img.size_bytes, "zstd_bytes": img.zstd_bytes, "build_s": img.seconds}


def copy_env(ref: str, dest: Path) -> None:
    name = f"rapidship-prune-bench-{os.getpid()}"
    subprocess.run(["docker", "create", "--name", name, ref, "true"], check=True, capture_output=True)
    try:
        subprocess.run(["docker", "cp", f"{name}:/opt/rapids", str(dest)], check=True)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def time_prune(env: Path, keep: tuple[int, ...], cuobjdump: str | None, jobs: int, runs: int) -> dict:
    seconds, record = [], {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory(dir=env.parent) as out:
            t0 = time.monotonic()
            record = files.prune_paths([env], keep, out=Path(out), cuobjdump=cuobjdump, jobs=jobs)
            seconds.append(time.monotonic() - t0)
    t = record["totals"]
    best = min(seconds)
    return {"seconds": [round(s, 2) for s in seconds], "best_s": round(best, 2), "elf_bytes": t["bytes_before"],
            "gb_per_s": round(t["bytes_before"] / 1e9 / best, 2), "saved_bytes": t["saved_bytes"],
            "pruned_files": t["pruned"], "refused_files": t["refused"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="cuda12-debian12")
    ap.add_argument("--arch", default="amd64")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    pruned_v = load_matrix(ROOT / "variants.yaml").get(args.variant)
    if not pruned_v.gpu_archs:
        sys.exit(f"{args.variant} has no gpu_archs in variants.yaml: nothing to compare")
    twin = pruned_v.model_copy(update={"gpu_archs": None, "image": pruned_v.image + "-unpruned"})
    arch = Arch(args.arch)
    out_root = ROOT / "build" / "bench-prune"
    unpruned = built_image(twin, arch, out_root)
    pruned = built_image(pruned_v, arch, out_root)

    scratch = Path(tempfile.mkdtemp(prefix="prune-bench-", dir=ROOT / "build"))
    try:
        copy_env(unpruned["ref"], scratch / "rapids")
        cuobjdump = find_cuobjdump(None)
        timing = {"with_cuobjdump": time_prune(scratch / "rapids", pruned_v.gpu_archs, cuobjdump, args.jobs, args.runs),
                  "built_in_proof_only": time_prune(scratch / "rapids", pruned_v.gpu_archs, None, args.jobs, args.runs)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    result = {
        "variant": args.variant, "keep": list(pruned_v.gpu_archs), "jobs": args.jobs, "cpus": os.cpu_count(),
        "unpruned": unpruned, "pruned": pruned,
        "ratios": {"pruned/unpruned": round(pruned["bytes"] / unpruned["bytes"], 3),
                   "pruned_zstd/unpruned_zstd": round(pruned["zstd_bytes"] / unpruned["zstd_bytes"], 3),
                   "pruned/rapidsai_10.5GB": round(pruned["bytes"] / ANCHOR_BYTES, 3),
                   "unpruned/rapidsai_10.5GB": round(unpruned["bytes"] / ANCHOR_BYTES, 3)},
        "budget_bytes": pruned_v.budget_bytes, "pruned_headroom_bytes": pruned_v.budget_bytes - pruned["bytes"],
        "prune_timing": timing,
    }
    print(f"\n{'image':28} {'bytes':>15} {'zstd':>15}")
    for name in ("unpruned", "pruned"):
        print(f"{result[name]['ref'][:28]:28} {result[name]['bytes']:>15,} {result[name]['zstd_bytes']:>15,}")
    for name, r in result["ratios"].items():
        print(f"{name:28} {r:>15}")
    for name, t in timing.items():
        print(f"prune {name:22} {t['best_s']:>8} s  {t['gb_per_s']} GB/s of ELF files ({t['elf_bytes']:,} bytes)")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
