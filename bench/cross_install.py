"""The pip builder's install step for arm64, cross (as rendered: the builder runs on this machine)
vs emulated (the same Dockerfile with `--platform=$BUILDPLATFORM` taken off the builder's FROM and
the arm64 base as builder, so every builder step runs under qemu), side by side in one run. Usage, after `invoke base --os debian12 [--arch arm64]`:

    python3 bench/cross_install.py [--variant cpu-debian12] [--runs 2]

Each timed build is `--no-cache --target builder` (the wheels come from BuildKit's pip cache mount,
warmed by one untimed cross build first, so both sides install the same files from the same place).
Prints the seconds of each run and the emulated / cross ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rapidship.config.matrix import Arch, load_matrix  # noqa: E402
from rapidship.engine import ENGINE  # noqa: E402
from rapidship.imagebuild.base import resolve_local_base  # noqa: E402
from rapidship.imagebuild.buildkit import local_base_args  # noqa: E402
from rapidship.render.dockerfile import render  # noqa: E402

CA = "/etc/ssl/certs/ca-certificates.crt"


def build(context: str, builder: str, runtime: str) -> float:
    cmd = [ENGINE.buildkit_cli(), "build", "-q", "--no-cache", "--platform", "linux/arm64", "--target", "builder",
           "--build-arg", f"BUILDER_BASE={builder}", "--build-arg", f"RUNTIME_BASE={runtime}"]
    if os.path.isfile(CA):
        cmd += ["--secret", f"id=cacert,src={CA}"]
    start = time.monotonic()
    subprocess.run([*cmd, context], check=True, capture_output=True, env=dict(os.environ, DOCKER_BUILDKIT="1"))
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", default="cpu-debian12")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    variant = load_matrix(Path("variants.yaml")).get(args.variant)
    context = render(variant).out_dir
    cross = local_base_args(variant, Arch.arm64)
    native_builder = cross.get("BUILDER_BASE", variant.bases.builder)
    runtime = cross.get("RUNTIME_BASE", variant.bases.runtime)
    emulated_builder = resolve_local_base(variant.bases.builder, Arch.arm64)
    if emulated_builder is None:
        sys.exit("no arm64 base: run invoke base --os debian12 --arch arm64")
    emulated = Path(tempfile.mkdtemp(prefix="rapidship-bench-")) / "context"
    shutil.copytree(context, emulated)
    dockerfile = emulated / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("FROM --platform=$BUILDPLATFORM ", "FROM ", 1))
    build(context, native_builder, runtime)  # warms the pip cache mount
    times: dict[str, list[float]] = {"cross": [], "emulated": []}
    try:
        for _ in range(args.runs):
            times["cross"].append(build(context, native_builder, runtime))
            times["emulated"].append(build(str(emulated), emulated_builder, runtime))
    finally:
        shutil.rmtree(emulated.parent)
    for name, values in times.items():
        print(f"{args.variant} arm64 builder stage, {name:8}: " + ", ".join(f"{v:.1f} s" for v in values))
    ratio = statistics.median(times["emulated"]) / statistics.median(times["cross"])
    print(f"emulated / cross: {ratio:.1f}x (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
