"""Build a conda variant at RAPIDS scale from the channel made of wheels (bench/conda_channel.py),
through the same functions `invoke build` calls, and keep what it measured:

    python3 bench/conda_channel.py lock CHANNEL --project PROJECT   # once: PROJECT/locks/wheels/...
    python3 bench/conda_image.py --channel CHANNEL --project PROJECT --json OUT [--no-cache]

PROJECT holds envs/wheels.yaml and the lock (conda_channel.py lock writes both); this script writes
its variants.yaml again (a conda variant on debian12, CUDA 12.9, `gpu_archs: [80, 90]`). The channel is served on
127.0.0.1 for the build's layer stages (`--network host`, as the tests' channel). The bases are the
ones `invoke base --os debian12` and `invoke base --os debian12 --conda-builder` made in this
checkout. Prints and writes: the image's size, its zstd size, the build's seconds, its layer count
and the env's layer plan with each layer's bytes (the image's /opt/rapidship/layers.json).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "tests")]

def main(argv: list[str] | None = None) -> int:
    from bench.conda_channel import VARIANTS
    from support.channel_server import serve

    from rapidship.config.matrix import Arch, load_matrix
    from rapidship.imagebuild.buildkit import BuildSecrets, build, local_base_args, plan_build
    from rapidship.records import Workspace
    from rapidship.render.dockerfile import render

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channel", type=Path, required=True)
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args(argv)
    project = args.project.resolve()
    (project / "variants.yaml").write_text(VARIANTS.format(env="wheels", cuda="12.9"))
    if not (project / "locks/tools.txt").is_file():
        shutil.copy(ROOT / "locks/tools.txt", project / "locks/tools.txt")
    matrix = load_matrix(project / "variants.yaml")
    [variant] = matrix.variants.values()
    rendered = render(variant, out_root=project / "build", templates=ROOT / "templates", locks=project / "locks")
    with serve(args.channel.resolve().parent) as (port, _):
        secrets = BuildSecrets.from_flags(None, None, [f"http://127.0.0.1:{port}/{args.channel.name}"])
        plan = plan_build(variant, Arch.amd64, rendered, secrets, network="host", epoch=1796000000, no_cache=args.no_cache)
        plan = replace(plan, base_args=local_base_args(variant, Arch.amd64, Workspace(ROOT / "build")))
        started = time.monotonic()
        built = build(plan, secrets, variant, project / "build.log")
        seconds = time.monotonic() - started
    layers = json.loads(subprocess.run(["docker", "run", "--rm", "-e", "RAPIDS_DOCTOR=off", "--entrypoint", "cat", built.ref,
                                        "/opt/rapidship/layers.json"], capture_output=True, text=True, check=True).stdout)
    count = len(json.loads(subprocess.run(["docker", "image", "inspect", built.ref], capture_output=True, text=True,
                                          check=True).stdout)[0]["RootFS"]["Layers"])
    doc = {"ref": built.ref, "image_id": built.image_id, "size_bytes": built.size_bytes, "zstd_bytes": built.zstd_bytes,
           "build_seconds": round(seconds, 1), "image_layers": count, "no_cache": args.no_cache,
           "env_layers": [{"name": layer["name"], "bytes": layer["bytes"], "files": layer["files"],
                           "packages": [d["name"] for d in layer["distributions"]]} for layer in layers["layers"]]}
    args.json.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{built.ref}: {built.size_bytes:,} B ({built.zstd_bytes:,} B zstd), {count} layers, {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
