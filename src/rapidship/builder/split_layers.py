"""Builder side: the env moved into the layers of its plan, one image layer each.

A patch of one package should ship that package's bytes, not a part of the env: the render plans
the env's layers per distribution from the lock (render/layer_plan.py: large distributions alone,
small ones grouped by kind) and writes the plan into the build context; this program moves every
file to the layer of the distribution that installed it (its dist-info RECORD; bytecode goes with
its source), and what no RECORD names (the venv's bin/python, pyvenv.cfg) to the plan's last
layer, `venv`. The runtime stage copies each layer onto the env's prefix and the normaliser gives
every file one fixed time, so a layer whose files did not change is the same layer, byte for byte,
in the next release (and a delta disc leaves it out).
Files are moved from PREFIX into OUT/<layer>/ (same paths relative to PREFIX, folders with their
modes). Standard library only; writes the plan with what each layer and distribution holds (files,
bytes) as the image's /opt/rapidship/layers.json.

    python3.11 split_layers.py --prefix /out/opt/rapids --out /out/layers \
        --plan /mnt/builder/layer-plan.json --record /out/rapidship-layers.json

A file of a distribution the plan does not name is an error naming it, never a file left out of the
image. A layer no file fell into (a distribution only another arch installs) is still an (empty)
folder, so every COPY has a source.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import re
import shutil
import sys
from pathlib import Path


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def metadata_name(text: str, fallback: str) -> str:
    """The Name: of a dist-info's METADATA (its headers end at the first empty line)."""
    for line in text.splitlines():
        if line.startswith("Name:"):
            return line.split(":", 1)[1].strip()
        if not line:
            break
    return fallback


def record_paths(site: Path, record_text: str) -> list[Path]:
    """The paths a RECORD names, normalised (a script's row reads ../../../bin/dask)."""
    return [Path(os.path.normpath(site / row[0])) for row in csv.reader(io.StringIO(record_text)) if row and row[0]]


def owners(prefix: Path) -> dict[Path, str]:
    """Every file some RECORD names -> its distribution's name (the dist-info's Name)."""
    found: dict[Path, str] = {}
    for record in sorted(prefix.glob("lib/python*/site-packages/*.dist-info/RECORD")):
        meta = record.parent / "METADATA"
        name = metadata_name(meta.read_text(errors="replace") if meta.is_file() else "",
                             record.parent.name.rsplit("-", 1)[0])
        text = record.read_text(encoding="utf-8", errors="surrogateescape")
        found.update(dict.fromkeys(record_paths(record.parent.parent, text), name))
    return found


def owner_of(path: Path, owned: dict[Path, str]) -> str | None:
    """The distribution that installed `path`: its RECORD's, or (bytecode) its source's."""
    owner = owned.get(path)
    if owner is None and path.suffix == ".pyc" and path.parent.name == "__pycache__":
        try:
            owner = owned.get(Path(importlib.util.source_from_cache(str(path))))
        except ValueError:
            owner = None
    return owner


def place(prefix: Path, owned: dict[Path, str], layer_of: dict[str, str], rest: str) -> tuple[dict[Path, str], dict[Path, str]]:
    """Every file and symlink under PREFIX -> its layer; and the files whose distribution the plan
    does not name -> that distribution."""
    placed: dict[Path, str] = {}
    unplanned: dict[Path, str] = {}
    for root, dirs, files in os.walk(prefix):
        dirs.sort()
        for name in sorted(files) + sorted(d for d in dirs if os.path.islink(os.path.join(root, d))):
            path = Path(root, name)
            owner = owner_of(path, owned)
            if owner is None:
                placed[path] = rest
            elif canonical(owner) in layer_of:
                placed[path] = layer_of[canonical(owner)]
            else:
                unplanned[path] = owner
    return placed, unplanned


def move(prefix: Path, out: Path, placed: dict[Path, str], layers: list[str], rest: str) -> None:
    """Every other layer's files to their layers; then what is left of PREFIX (the rest layer's files
    and the folders that hold them or were empty to begin with) is the rest layer, moved whole. A
    folder the moves emptied (a wheel's dist-info, nvidia/) lives in the layers that fill it only:
    left in the rest layer its name (a version) would change that layer on every bump."""
    roots = {layer: out / layer for layer in layers}
    empty = {Path(root) for root, dirs, files in os.walk(prefix) if not dirs and not files}
    for path, layer in placed.items():
        if layer != rest:
            ensure_folder(roots[layer], prefix, path.parent.relative_to(prefix))
            os.rename(path, roots[layer] / path.relative_to(prefix))
    for root, dirs, files in os.walk(prefix, topdown=False):
        if Path(root) != prefix and Path(root) not in empty and not os.listdir(root):
            os.rmdir(root)
    roots[rest].parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(prefix), str(roots[rest]))
    for layer in layers:  # a layer with no file is still a folder, so a COPY of it has a source
        ensure_folder(roots[layer], roots[rest], Path())


def ensure_folder(part_root: Path, prefix: Path, relative: Path) -> None:
    """part_root/relative as folders, each with the mode of the folder it mirrors under `prefix`."""
    current, mirrored = part_root, prefix
    for piece in ("", *relative.parts):
        current, mirrored = (current / piece, mirrored / piece) if piece else (current, mirrored)
        if not current.is_dir():
            current.mkdir(parents=True)
            shutil.copymode(mirrored, current)


def read_plan(path: Path) -> tuple[dict, list[str], dict[str, str], str]:
    """The plan's document, its layers in order, {distribution: layer} and the rest layer; SystemExit(2)
    with one line naming the file when it is not a layer plan."""
    try:
        doc = json.loads(path.read_text())
        layers = [layer["name"] for layer in doc["layers"]]
        layer_of = {canonical(d["name"]): layer["name"] for layer in doc["layers"] for d in layer["distributions"]}
        rest = doc["rest"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"split_layers: --plan {path}: not a layer plan ({err}): render the variant again (invoke render)",
              file=sys.stderr)
        raise SystemExit(2) from None
    if rest not in layers or len(set(layers)) < len(layers) or not all(re.fullmatch(r"[a-z0-9_-]+(/[a-z0-9_-]+)?", n)
                                                                       for n in layers):
        print(f"split_layers: --plan {path}: its layers must be distinct folder names and include {rest!r}: "
              "render the variant again (invoke render)", file=sys.stderr)
        raise SystemExit(2)
    return doc, layers, layer_of, rest


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--record", required=True, type=Path)
    parser.add_argument("--plan", required=True, type=Path)
    args = parser.parse_args(argv)
    doc, layers, layer_of, rest = read_plan(args.plan)
    owned = owners(args.prefix)
    placed, unplanned = place(args.prefix, owned, layer_of, rest)
    if unplanned:
        names = sorted(set(unplanned.values()))
        first = min(unplanned)
        print(f"split_layers: {len(unplanned)} file(s) of {len(names)} distribution(s) the layer plan ({args.plan}) "
              f"does not name: {', '.join(names[:5])}, e.g. {first} ({unplanned[first]}): the plan was made from "
              "another lock; render the variant again (invoke render)", file=sys.stderr)
        return 2
    held = {layer: {"files": 0, "bytes": 0} for layer in layers}
    dists: dict[str, dict] = {}
    for path, layer in placed.items():
        size = path.lstat().st_size
        held[layer]["files"] += 1
        held[layer]["bytes"] += size
        owner = owner_of(path, owned)
        if owner is not None:
            d = dists.setdefault(canonical(owner), {"layer": layer, "files": 0, "bytes": 0})
            d["files"] += 1
            d["bytes"] += size
    move(args.prefix, args.out, placed, layers, rest)
    for layer in doc["layers"]:
        layer.update(held[layer["name"]])
        for d in layer["distributions"]:
            d.update({k: v for k, v in dists.get(canonical(d["name"]), {"files": 0, "bytes": 0}).items() if k != "layer"})
    args.record.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"split_layers: {len(layers)} layers, " + ", ".join(f"{n} {held[n]['files']} files {held[n]['bytes']:,} B"
                                                           for n in sorted(held, key=lambda n: -held[n]["bytes"])[:5])
          + (" ..." if len(layers) > 5 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
