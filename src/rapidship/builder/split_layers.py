"""Builder side: the env split into parts by how often they change, one image layer each.

A patch release of one Python package should change one small layer, not the whole env: the
runtime stage copies each part separately, most stable first, and the normaliser gives every file
one fixed time, so a part whose files did not change is the same layer, byte for byte, in the next
release (and a delta disc leaves it out). Parts, by the distribution that installed each file
(its dist-info RECORD; bytecode goes with its source):
  cuda/<d>  each of NVIDIA's CUDA wheels (nvidia-*) its own part: they are 1.8 GB together, and a
            patch of one (cuBLAS, nvJitLink) should ship that wheel, not all of them
  rapids    the RAPIDS libraries (*-cu12, *-cu13 and RAPIDS' pure-Python packages): every release
  compiled  every other distribution with compiled code (numpy, pyarrow, CuPy, numba, ...): large
  python    the pure-Python distributions, the venv itself (bin/, pyvenv.cfg) and anything no
            RECORD names: small, and what a patch release most often changes
Files are moved from PREFIX into OUT/<part>/ (same paths relative to PREFIX, folders with their modes);
the runtime stage copies each OUT/<part>/ onto the env's prefix.
Standard library only; writes a JSON record of each part's distributions, files and bytes.

    python3.11 split_layers.py --prefix /out/opt/rapids --out /out/layers \
        --parts cuda/nvidia-cublas-cu12,rapids,compiled,python --record /out/rapidship-layers.json

--parts names the parts the image copies, in layer order (a CPU image: compiled and python; a CUDA
image: one cuda/<d> per nvidia-* distribution of its lock, which the render names); a file of
another part is an error naming it, never a file left out of the image. A part no file fell into
is still an (empty) folder, so every COPY has a source.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

PARTS = ("cuda", "rapids", "compiled", "python")  # kinds of part, in layer order: the most stable first
CUDA_BUILD = re.compile(r"-cu\d+$")
RAPIDS_PURE = {"dask-cuda", "rapids-dask-dependency", "rapids-logger", "distributed-ucxx", "dask-cudf"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def part_of(distribution: str, compiled: bool) -> str:
    name = canonical(distribution)
    if name.startswith("nvidia-"):
        return f"cuda/{name}"
    if CUDA_BUILD.search(name) or name in RAPIDS_PURE:
        return "rapids"
    return "compiled" if compiled else "python"


def kind_of(part: str) -> str:
    return part.split("/", 1)[0]


def is_compiled(path: Path) -> bool:
    """A shared object (an extension module, a vendored library)."""
    return path.suffix == ".so" or ".so." in path.name


def owners(prefix: Path) -> dict[Path, str]:
    """Every file some RECORD names -> its distribution's name (the dist-info's Name)."""
    found: dict[Path, str] = {}
    for record in sorted(prefix.glob("lib/python*/site-packages/*.dist-info/RECORD")):
        site = record.parent.parent
        name = record.parent.name.rsplit("-", 1)[0]
        meta = record.parent / "METADATA"
        if meta.is_file():
            for line in meta.read_text(errors="replace").splitlines():
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                    break
                if not line:
                    break
        with open(record, newline="", encoding="utf-8", errors="surrogateescape") as f:
            for row in csv.reader(f):
                if row and row[0]:
                    found[Path(os.path.normpath(site / row[0]))] = name
    return found


def compiled_distributions(owned: dict[Path, str]) -> set[str]:
    return {name for path, name in owned.items() if is_compiled(path)}


def plan(prefix: Path, owned: dict[Path, str]) -> dict[Path, str]:
    """Every file and symlink under PREFIX -> its part."""
    compiled = compiled_distributions(owned)
    out: dict[Path, str] = {}
    for root, dirs, files in os.walk(prefix):
        dirs.sort()
        for name in sorted(files) + sorted(d for d in dirs if os.path.islink(os.path.join(root, d))):
            path = Path(root, name)
            owner = owned.get(path)
            if owner is None and path.suffix == ".pyc" and path.parent.name == "__pycache__":
                try:
                    owner = owned.get(Path(importlib.util.source_from_cache(str(path))))
                except ValueError:
                    owner = None
            out[path] = part_of(owner, owner in compiled) if owner else "python"
    return out


def move(prefix: Path, out: Path, placed: dict[Path, str], parts: list[str]) -> None:
    """Every other part's files to their parts; then what is left of PREFIX (the python part's files
    and the folders that hold them or were empty to begin with) is the python part, moved whole. A
    folder the moves emptied (a CUDA wheel's dist-info, nvidia/) lives in the parts that fill it
    only: left in the python part its name (a version) would change that layer on every bump."""
    roots = {part: out / part for part in parts}
    empty = {Path(root) for root, dirs, files in os.walk(prefix) if not dirs and not files}
    for path, part in placed.items():
        if part != "python":
            ensure_folder(roots[part], prefix, path.parent.relative_to(prefix))
            os.rename(path, roots[part] / path.relative_to(prefix))
    for root, dirs, files in os.walk(prefix, topdown=False):
        if Path(root) != prefix and Path(root) not in empty and not os.listdir(root):
            os.rmdir(root)
    roots["python"].parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(prefix), str(roots["python"]))
    for part in parts:  # a part with no file is still a folder, so a COPY of it has a source
        ensure_folder(roots[part], roots["python"], Path())


def ensure_folder(part_root: Path, prefix: Path, relative: Path) -> None:
    """part_root/relative as folders, each with the mode of the folder it mirrors under `prefix`."""
    current, mirrored = part_root, prefix
    for piece in ("", *relative.parts):
        current, mirrored = (current / piece, mirrored / piece) if piece else (current, mirrored)
        if not current.is_dir():
            current.mkdir(parents=True)
            shutil.copymode(mirrored, current)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--record", required=True, type=Path)
    parser.add_argument("--parts", required=True)
    args = parser.parse_args(argv)
    copied = args.parts.split(",")
    wrong = [p for p in copied if p == "cuda" or kind_of(p) not in PARTS]
    if "python" not in copied or wrong or len(set(copied)) < len(copied):
        print(f"split_layers: --parts {args.parts}: name python once and any of rapids, compiled, "
              "cuda/<distribution>", file=sys.stderr)
        return 2
    owned = owners(args.prefix)
    placed = plan(args.prefix, owned)
    stray = sorted(path for path, part in placed.items() if part not in copied)
    if stray:
        print(f"split_layers: {len(stray)} file(s) belong to a part this image does not copy (--parts {args.parts}), "
              f"e.g. {stray[0]} ({placed[stray[0]]}): add the part to the variant's layers", file=sys.stderr)
        return 2
    compiled = compiled_distributions(owned)
    summary = {part: {"files": 0, "bytes": 0,
                      "distributions": sorted({d for d in owned.values() if part_of(d, d in compiled) == part})}
               for part in copied}
    for path, part in placed.items():
        summary[part]["files"] += 1
        summary[part]["bytes"] += path.lstat().st_size
    move(args.prefix, args.out, placed, copied)
    args.record.write_text(json.dumps({"parts": copied, **summary}, indent=1) + "\n")
    print("split_layers: " + ", ".join(f"{p} {summary[p]['files']} files {summary[p]['bytes']:,} B" for p in copied))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
