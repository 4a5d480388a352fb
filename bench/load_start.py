"""Load and start time of two images side by side on this engine (e.g. one release in two layouts).

    python3 bench/load_start.py --image A --image B [--rounds 3] [--import MODULE ...] [--json OUT]

Each image is saved once (`docker save`); then, per round and in alternating order, the image is
removed by name (only when the engine's image there is still the id that was saved) and loaded
from its save (`docker load`: a site's load of a disc's archive, without the decompression), then
started twice: `/bin/true` as the entrypoint (the container made, its layers mounted, started,
removed: what the layer count costs) and the image's Python importing MODULE (default cudf; its
files then come from a cold page cache only on the first round). Prints a table of medians, the
ratio B / A per measure, and the JSON. Only the images named are removed, and each is loaded back.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _docker(*args: str) -> subprocess.CompletedProcess:
    got = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if got.returncode != 0:
        sys.exit(f"docker {' '.join(args[:3])} failed: {got.stderr.strip()[-500:]}")
    return got


def _timed(*args: str) -> float:
    start = time.monotonic()
    _docker(*args)
    return time.monotonic() - start


def _image_id(ref: str) -> str:
    return _docker("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()


def measure(refs: list[str], rounds: int, modules: list[str], work: Path) -> dict:
    saved = {}
    for n, ref in enumerate(refs):
        ident = _image_id(ref)
        saved[ref] = (ident, work / f"{n}.tar", int(_docker("image", "inspect", "--format", "{{len .RootFS.Layers}}",
                                                           ref).stdout))
        _docker("save", "-o", str(saved[ref][1]), ref)
    runs: dict[str, dict[str, list[float]]] = {ref: {"load_s": [], "start_true_s": [], "start_import_s": []}
                                               for ref in refs}
    code = "import " + ", ".join(modules)
    for r in range(rounds):
        for ref in (refs if r % 2 == 0 else list(reversed(refs))):
            ident, tar, _ = saved[ref]
            if _image_id(ref) != ident:
                sys.exit(f"{ref} is no longer {ident[:19]}: something else retagged it; stopped")
            _docker("rmi", ref)
            runs[ref]["load_s"].append(_timed("load", "-i", str(tar)))
            if _image_id(ref) != ident:
                sys.exit(f"loading {tar} gave {ref} another id than {ident[:19]}")
            runs[ref]["start_true_s"].append(_timed("run", "--rm", "--network", "none", "--entrypoint", "/bin/true", ref))
            runs[ref]["start_import_s"].append(_timed("run", "--rm", "--network", "none", "--entrypoint",
                                                      "python", ref, "-c", code))
    return {"refs": refs, "image_ids": {r: saved[r][0] for r in refs}, "layers": {r: saved[r][2] for r in refs},
            "tar_bytes": {r: saved[r][1].stat().st_size for r in refs}, "rounds": rounds, "import": modules,
            "runs": {r: {k: [round(x, 2) for x in v] for k, v in m.items()} for r, m in runs.items()},
            "median": {r: {k: round(statistics.median(v), 2) for k, v in m.items()} for r, m in runs.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", action="append", required=True, help="twice: A, then B")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--import", dest="modules", action="append", help="module the start imports (default cudf)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    if len(args.image) != 2:
        sys.exit("--image: name exactly two images (A, then B)")
    with tempfile.TemporaryDirectory(prefix="rapidship-load-bench-", dir=Path.cwd()) as tmp:
        figures = measure(args.image, args.rounds, args.modules or ["cudf"], Path(tmp))
    a, b = args.image
    figures["ratio_b_over_a"] = {k: round(figures["median"][b][k] / figures["median"][a][k], 3)
                                 for k in figures["median"][a]}
    print(f"{'measure':<16}{'A':>10}{'B':>10}{'B / A':>8}   (medians of {args.rounds}; A {figures['layers'][a]} "
          f"layers, B {figures['layers'][b]})")
    for k, ratio in figures["ratio_b_over_a"].items():
        print(f"{k:<16}{figures['median'][a][k]:>10.2f}{figures['median'][b][k]:>10.2f}{ratio:>8.3f}")
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
