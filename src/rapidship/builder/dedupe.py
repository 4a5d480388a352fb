"""Builder side: byte-identical copies in one of the env's layers become relative symlinks to one of them.

A wheel cannot hold a symlink, so a library's soname links arrive as full copies (libucp.so,
libucp.so.0, libucp.so.0.0.0: 10 MB each) and auditwheel vendors the same libgomp into every
package that needs it. The loader and Python follow symlinks, so one copy serves all. Kept as
real files: anything under 64 KiB (not worth a link), and a copy whose move would change what it
loads: an ELF file with an `$ORIGIN` run path is only linked to a copy in its own directory
(`$ORIGIN` is the directory of the name it was opened by, the link's, so a link elsewhere would
look for its neighbours in the wrong place). The pip builder runs it on each layer's own folder: a
link into another layer would make that layer's rebuild depend on the other's, so copies in two
layers (auditwheel's libgomp in several RAPIDS wheels) stay copies. Standard library only; writes a
JSON record (`--merge` joins the layers' records into the env's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

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


def plan(prefix: str) -> list[tuple[str, str]]:
    """(copy to replace, file it will link to), for every byte-identical copy in `prefix`."""
    by_size: dict[int, list[str]] = {}
    for root, dirs, files in os.walk(prefix):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if not os.path.islink(path) and os.path.isfile(path) and os.path.getsize(path) >= MIN_BYTES:
                by_size.setdefault(os.path.getsize(path), []).append(path)
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


def merge(records: list[dict]) -> dict:
    """Pure: one record of the env from its layers' records (the pip builder links copies inside each
    layer: a link into another layer would tie the two layers' rebuilds together)."""
    links = sorted((x for r in records for x in r["links"]), key=lambda x: x["path"])
    return {"schema_version": 1, "linked": len(links), "saved_bytes": sum(r["saved_bytes"] for r in records),
            "links": links}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prefix")
    parser.add_argument("--merge", nargs="+", metavar="RECORD", help="write one record of these (each layer's) to --out")
    parser.add_argument("--out", required=True, help="JSON record of what was linked")
    args = parser.parse_args(argv)
    if args.merge:
        records = []
        for path in args.merge:
            with open(path) as f:
                records.append(json.load(f))
        with open(args.out, "w") as f:
            json.dump(merge(records), f, indent=1)
        return 0
    if not args.prefix:
        parser.error("--prefix is needed to link copies")
    links = plan(args.prefix)
    saved = 0
    for path, keep in links:
        saved += os.path.getsize(path)
        os.unlink(path)
        os.symlink(os.path.relpath(keep, os.path.dirname(path)), path)
    record = {"schema_version": 1, "linked": len(links), "saved_bytes": saved,
              "links": [{"path": os.path.relpath(p, args.prefix), "to": os.path.relpath(k, args.prefix)}
                        for p, k in links]}
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    print(f"dedupe: {len(links)} copies linked, {saved:,} bytes saved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
