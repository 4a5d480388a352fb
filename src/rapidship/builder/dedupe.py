"""Builder side: byte-identical copies in one of the env's layers become relative symlinks to one of them.

A wheel cannot hold a symlink, so a library's soname links arrive as full copies (libucp.so,
libucp.so.0, libucp.so.0.0.0: 10 MB each) and auditwheel vendors the same libgomp into every
package that needs it. The loader and Python follow symlinks, so one copy serves all. Kept as
real files: anything under 64 KiB (not worth a link), and a copy whose move would change what it
loads: an ELF file with an `$ORIGIN` run path is only linked to a copy in its own directory
(`$ORIGIN` is the directory of the name it was opened by, the link's, so a link elsewhere would
look for its neighbours in the wrong place). The pip builder runs it on each layer's own folder
and writes the layer's index of large files (`--index`); from every layer's index one step plans,
per layer, which of its copies of a file in a layer below become links down to the lowest copy
(`--plan-links`: links only point down), and each layer's link step applies its own plan
(`--links`). BuildKit keys that step by its plan's content, so a patch re-runs it only in layers
whose plan changed (a copy below came or went). Standard library only; writes a JSON record
(`--merge` joins the layers' records into the env's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Iterator

MIN_BYTES = 64 * 1024


def origin_dependent(path: str) -> bool:
    """Does this ELF file name `$ORIGIN` in a DT_RPATH/DT_RUNPATH? (a cheap scan of its bytes:
    the string lives in .dynstr; any mention keeps the file where it is, erring on the safe side)"""
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return False
        f.seek(0)
        while chunk := f.read(1 << 22):
            if b"$ORIGIN" in chunk or b"${ORIGIN}" in chunk:
                return True
            f.seek(f.tell() - 8)  # a name split across two chunks is still seen
            if len(chunk) < 1 << 22:
                break
    return False


def digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def large_files(prefix: str) -> Iterator[tuple[str, int]]:
    """(path, size) of every regular file of MIN_BYTES or more under `prefix`, in a fixed order."""
    for root, dirs, files in os.walk(prefix):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if not os.path.islink(path) and os.path.isfile(path) and (size := os.path.getsize(path)) >= MIN_BYTES:
                yield path, size


def plan(prefix: str) -> list[tuple[str, str]]:
    """(copy to replace, file it will link to), for every byte-identical copy in `prefix`."""
    by_size: dict[int, list[str]] = {}
    for path, size in large_files(prefix):
        by_size.setdefault(size, []).append(path)
    links = []
    for paths in by_size.values():
        if len(paths) < 2:
            continue
        by_hash: dict[str, list[str]] = {}
        for path in paths:
            by_hash.setdefault(digest(path), []).append(path)
        for group in by_hash.values():
            # the longest name is the real file (libucp.so.0.0.0 over libucp.so); ties: the first
            keep = sorted(group, key=lambda p: (-len(os.path.basename(p)), p))[0]
            pinned = origin_dependent(keep)
            for path in group:
                if path != keep and (not pinned or os.path.dirname(path) == os.path.dirname(keep)):
                    links.append((path, keep))
    return sorted(links)


def index(prefix: str, layer: int) -> dict:
    """The layer's regular files a copy in a layer above could link to: path, size, sha256, and
    whether it loads its neighbours by `$ORIGIN` (then only a copy in its own folder may link to it)."""
    return {"layer": layer, "files": [{"path": os.path.relpath(path, prefix), "size": size, "sha256": digest(path),
                                       "origin": origin_dependent(path)} for path, size in large_files(prefix)]}


def plan_links(indexes: list[dict]) -> dict[int, list[list[str]]]:
    """Pure: per layer, [its copy, the file it will link to] for each of its files that a layer
    below holds byte for byte; the copy kept is in the lowest such layer (then the longest name,
    then the path). Every layer has a plan, most of them empty."""
    lowest: dict[tuple[int, str], tuple[int, dict]] = {}
    for ix in sorted(indexes, key=lambda ix: ix["layer"]):
        for e in sorted(ix["files"], key=lambda e: (-len(os.path.basename(e["path"])), e["path"])):
            lowest.setdefault((e["size"], e["sha256"]), (ix["layer"], e))
    plans: dict[int, list[list[str]]] = {}
    for ix in indexes:
        plans[ix["layer"]] = sorted([e["path"], keep["path"]] for e in ix["files"]
                                    for layer, keep in [lowest[(e["size"], e["sha256"])]]
                                    if layer < ix["layer"] and (not keep["origin"]
                                                                or os.path.dirname(keep["path"]) == os.path.dirname(e["path"])))
    return plans


def link(prefix: str, links: list[list[str]]) -> list[dict]:
    """Each copy (relative to prefix) replaced by a relative symlink to the file it names; the record's rows."""
    rows = []
    for path, keep in links:
        full = os.path.join(prefix, path)
        rows.append({"path": path, "to": keep, "bytes": os.path.getsize(full)})
        os.unlink(full)
        os.symlink(os.path.relpath(keep, os.path.dirname(path)), full)
    return rows


def merge(records: list[dict]) -> dict:
    """Pure: one record of the env from its layers' records."""
    links = sorted((x for r in records for x in r["links"]), key=lambda x: x["path"])
    return {"schema_version": 1, "linked": len(links), "saved_bytes": sum(r["saved_bytes"] for r in records),
            "links": links}


def _load(path: str):
    with open(path) as f:
        return json.load(f)


def _save(path: str, doc) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prefix")
    parser.add_argument("--out", help="JSON record of what was linked (with --plan-links: the folder of the plans)")
    parser.add_argument("--merge", nargs="+", metavar="RECORD", help="write one record of these (each layer's) to --out")
    parser.add_argument("--index", metavar="FILE", help="also write the layer's large files (after linking) here")
    parser.add_argument("--layer", type=int, default=0, help="the layer's place in the plan (1 = lowest)")
    parser.add_argument("--plan-links", nargs="+", metavar="INDEX", help="write each layer's link plan, "
                        "<layer>.json, into the folder --out, from every layer's index")
    parser.add_argument("--links", metavar="PLAN", help="apply this layer's link plan; adds to the record at --out")
    args = parser.parse_args(argv)
    if not args.out:
        parser.error("--out is needed")
    if args.merge:
        _save(args.out, merge([_load(p) for p in args.merge]))
        return 0
    if args.plan_links:
        os.makedirs(args.out, exist_ok=True)
        plans = plan_links([_load(p) for p in args.plan_links])
        for layer, links in plans.items():
            _save(os.path.join(args.out, f"{layer}.json"), links)
        print(f"dedupe: {sum(map(len, plans.values()))} copies to link down, in {sum(map(bool, plans.values()))} "
              f"of {len(plans)} layers")
        return 0
    if not args.prefix:
        parser.error("--prefix is needed to link copies")
    if args.links:
        rows = link(args.prefix, _load(args.links))
        record = _load(args.out)
        record["links"] = sorted(record["links"] + [{"path": r["path"], "to": r["to"]} for r in rows],
                                 key=lambda r: r["path"])
        record.update(linked=len(record["links"]), saved_bytes=record["saved_bytes"] + sum(r["bytes"] for r in rows))
        _save(args.out, record)
        print(f"dedupe: {len(rows)} copies linked to layers below, {sum(r['bytes'] for r in rows):,} bytes saved")
        return 0
    rows = link(args.prefix, [[os.path.relpath(p, args.prefix), os.path.relpath(k, args.prefix)]
                              for p, k in plan(args.prefix)])
    saved = sum(r["bytes"] for r in rows)
    _save(args.out, {"schema_version": 1, "linked": len(rows), "saved_bytes": saved,
                     "links": [{"path": r["path"], "to": r["to"]} for r in rows]})
    if args.index:
        _save(args.index, index(args.prefix, args.layer))
    print(f"dedupe: {len(rows)} copies linked, {saved:,} bytes saved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
