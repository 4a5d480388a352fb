"""Builder side: what each of the env's planned layers holds, measured per layer and merged.

A patch of one package should rebuild and ship that package's bytes, not the env: the render plans
the env's layers per distribution from the lock (render/layer_plan.py: large distributions alone,
small ones grouped by kind) and gives each layer its own builder stage, which installs only that
layer's wheels into a folder of its own (/out/layers/<layer>, laid out as the prefix). BuildKit keys a
stage by its inputs, so a one-package patch re-runs one stage; the runtime copies each stage's
folder onto the prefix, one image layer each, and the normaliser gives every file one fixed time,
so a layer whose files did not change is the same layer, byte for byte, in the next release.

    python3.11 layer_record.py measure --prefix /out/layers/cuda/nvidia-cublas-cu12 --layer cuda/nvidia-cublas-cu12 \
        --out /out/records/layer.json
    python3.11 layer_record.py merge --plan layer-plan.json --out /out/records/layers.json /parts/1 /parts/2 ...

`measure` counts one layer's files and bytes, in total and per distribution (the dist-info RECORD or
conda-meta record that names a file; bytecode goes with its source; what none names counts to the
layer only).
`merge` writes the plan with those counts as the image's /opt/rapidship/layers.json, which `invoke
size-report` shows. A layer holding a distribution its plan does not give it, or a planned layer
without a record, is an error naming it, never a layer left out. Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import re
import sys
from pathlib import Path

RECORD = "layer.json"  # each layer stage's record, in its records folder


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
    """Every file some package names -> its package's name: a dist-info RECORD's (pip), or a
    conda-meta record's `files` (conda), which decides where both name a file: the plan's names
    are the conda packages' there. The one place the two formats' ownership differs."""
    found: dict[Path, str] = {}
    for record in sorted(prefix.glob("lib/python*/site-packages/*.dist-info/RECORD")):
        meta = record.parent / "METADATA"
        name = metadata_name(meta.read_text(errors="replace") if meta.is_file() else "",
                             record.parent.name.rsplit("-", 1)[0])
        text = record.read_text(encoding="utf-8", errors="surrogateescape")
        found.update(dict.fromkeys(record_paths(record.parent.parent, text), name))
    for meta in sorted(prefix.glob("conda-meta/*.json")):
        found.update(conda_paths(prefix, json.loads(meta.read_text())))
    return found


def conda_paths(prefix: Path, record: dict) -> dict[Path, str]:
    """The files a conda-meta record names, and the record itself (it goes with them) -> its package."""
    owned = dict.fromkeys((Path(os.path.normpath(prefix / rel)) for rel in record.get("files", [])), record["name"])
    owned[prefix / "conda-meta" / f"{record['name']}-{record['version']}-{record['build']}.json"] = record["name"]
    return owned


def owner_of(path: Path, owned: dict[Path, str]) -> str | None:
    """The distribution that installed `path`: its RECORD's, or (bytecode) its source's."""
    owner = owned.get(path)
    if owner is None and path.suffix == ".pyc" and path.parent.name == "__pycache__":
        try:
            owner = owned.get(Path(importlib.util.source_from_cache(str(path))))
        except ValueError:
            owner = None
    return owner


def measure(prefix: Path, layer: str) -> dict:
    """One layer's files (and symlinks) and bytes, in total and per distribution."""
    owned = owners(prefix)
    held = {"layer": layer, "files": 0, "bytes": 0, "distributions": {}}
    for root, dirs, files in os.walk(prefix):
        dirs.sort()
        for name in sorted(files) + sorted(d for d in dirs if os.path.islink(os.path.join(root, d))):
            path = Path(root, name)
            size = path.lstat().st_size
            held["files"] += 1
            held["bytes"] += size
            if (owner := owner_of(path, owned)) is not None:
                d = held["distributions"].setdefault(canonical(owner), {"files": 0, "bytes": 0})
                d["files"] += 1
                d["bytes"] += size
    return held


class Refused(Exception):
    """The layers' records do not fit the plan: the message names what, the build stops."""


def merge(plan: dict, pieces: list[dict]) -> dict:
    """Pure: the plan with what each layer and distribution holds."""
    by_layer = {}
    for piece in pieces:
        if piece["layer"] in by_layer:
            raise Refused(f"two records for layer {piece['layer']}")
        by_layer[piece["layer"]] = piece
    for layer in plan["layers"]:
        piece = by_layer.pop(layer["name"], None)
        if piece is None:
            raise Refused(f"no record for planned layer {layer['name']}")
        planned = {canonical(d["name"]) for d in layer["distributions"]}
        if stray := sorted(set(piece["distributions"]) - planned):
            raise Refused(f"layer {layer['name']} holds distribution(s) its plan does not give it: {', '.join(stray)}")
        layer.update(files=piece["files"], bytes=piece["bytes"])
        for d in layer["distributions"]:
            d.update(piece["distributions"].get(canonical(d["name"]), {"files": 0, "bytes": 0}))
    if by_layer:
        raise Refused(f"record(s) of layers the plan lacks: {', '.join(sorted(by_layer))}")
    return plan


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise Refused(f"{path}: not {what} ({err})") from None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("measure")
    one.add_argument("--prefix", required=True, type=Path)
    one.add_argument("--layer", required=True)
    one.add_argument("--out", required=True, type=Path)
    many = sub.add_parser("merge")
    many.add_argument("--plan", required=True, type=Path)
    many.add_argument("--out", required=True, type=Path)
    many.add_argument("parts", nargs="*", type=Path, help="each layer stage's records folder")
    args = parser.parse_args(argv)
    if args.command == "measure":
        held = measure(args.prefix, args.layer)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(held, indent=1) + "\n")
        print(f"layer_record: {args.layer}: {held['files']} files, {held['bytes']:,} B")
        return 0
    try:
        doc = merge(_read_json(args.plan, "a layer plan"), [_read_json(p / RECORD, "a layer record") for p in args.parts])
    except (Refused, KeyError, TypeError) as err:
        print(f"layer_record: --plan {args.plan}: {err}: the plan and the layer stages were made from different "
              "renders; render the variant again (invoke render)", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    held = {layer["name"]: layer for layer in doc["layers"]}
    print(f"layer_record: {len(held)} layers, " + ", ".join(
        f"{n} {held[n]['files']} files {held[n]['bytes']:,} B" for n in sorted(held, key=lambda n: -held[n]["bytes"])[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
