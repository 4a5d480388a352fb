"""Build benchmark: cold build vs no-op rebuild vs rebuild after a runtime-stage change.

Runs the real code path (render + BuildKit build) three times in one run and prints the
ratios. "Cold" is `--no-cache`: every step runs again; BuildKit cache mounts (pip's download
cache) are kept, as on any build machine that built before. Usage (project root, engine up,
base made with `invoke base`):  python3 bench/build_bench.py [--variant cpu-debian12]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from rapidship.imagebuild.buildkit import BuildSecrets, build, local_base_args, plan_build  # noqa: E402
from rapidship.imagebuild.normalise import source_date_epoch  # noqa: E402
from rapidship.config.matrix import Arch, load_matrix  # noqa: E402
from rapidship.render.dockerfile import render  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="cpu-debian12")
    parser.add_argument("--arch", default="amd64")
    args = parser.parse_args()
    v = load_matrix().get(args.variant)
    secrets = BuildSecrets.from_flags(None, None, None)
    arch = Arch(args.arch)
    rendered = render(v)
    out = Path(rendered.out_dir)
    runs = {}

    def timed(name: str, no_cache: bool = False):
        plan = plan_build(v, arch, rendered, secrets, no_cache=no_cache, base_args=local_base_args(v, arch),
                          epoch=source_date_epoch(Path.cwd()))
        built = build(plan, secrets, v, out / f"bench-{name}.log")
        normal = built.extra["normalised"]["seconds"]  # after the engine's build: save, re-pack, load
        runs[name] = {"seconds": built.seconds, "normalise_seconds": normal, "cached_steps": built.cached_steps,
                      "steps": built.total_steps, "size_bytes": built.size_bytes, "image_id": built.image_id}
        print(f"{name:16} {built.seconds:7.1f} s + normalise {normal:5.1f} s  {built.cached_steps}/{built.total_steps} "
              f"steps cached  {built.image_id[:19]}", flush=True)

    timed("cold", no_cache=True)
    timed("noop")
    doctor = out / "runtime" / "rapids_runtime" / "doctor.py"
    doctor.write_text(doctor.read_text() + "\n# benchmark: a runtime-stage change\n")
    timed("runtime-change")
    render(v)  # restore the rendered context

    cold = runs["cold"]["seconds"]
    ratios = {"cold/noop": round(cold / runs["noop"]["seconds"], 1),
              "cold/runtime-change": round(cold / runs["runtime-change"]["seconds"], 1),
              "normalise/cold": round(runs["cold"]["normalise_seconds"] / cold, 2)}
    # one commit, one image: the cold and the cached build must be the same id
    print(f"cold and no-op builds one image id: {runs['cold']['image_id'] == runs['noop']['image_id']}")
    for key, value in ratios.items():
        print(f"{key:22} {value}x")
    (out / "bench-build.json").write_text(json.dumps({"variant": v.id, "arch": arch.value, "runs": runs,
                                                      "ratios": ratios}, indent=2) + "\n")


if __name__ == "__main__":
    main()
