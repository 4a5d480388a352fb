"""Builder side: measure what each trim pattern removes from an env, before it is removed.

Runs in the builder stage with any python3 (stdlib only; copied into the build context). Writes a
small JSON record that the runtime stage keeps at /opt/rapidship/trims.json, so `invoke
size-report` can say what each trim saved and why it is safe, without a second build. Two pattern
styles, matching
the two tools that trim:
  pack  conda-pack --exclude: fnmatch on each file's path relative to the prefix
  find  find PREFIX -path PATTERN -exec rm -rf: fnmatch on absolute paths of files and
        directories; everything under a matched directory goes too
`*` matches across `/` in both (fnmatch and find -path agree on that).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from fnmatch import fnmatchcase
from pathlib import Path


def _walk(prefix: Path):
    """(absolute path, relative path, bytes, is_dir) for every entry; symlinks count as themselves."""
    for root, dirs, files in os.walk(prefix):
        for name in dirs:
            full = os.path.join(root, name)
            yield full, os.path.relpath(full, prefix), 0, not os.path.islink(full)
        for name in files:
            full = os.path.join(root, name)
            yield full, os.path.relpath(full, prefix), os.lstat(full).st_size, False


def measure(prefix: Path, patterns: list[str], style: str, why: dict[str, str] | None = None) -> dict:
    entries = list(_walk(prefix))
    per_pattern = {p: 0 for p in patterns}
    trimmed = 0
    total = 0
    pyc = 0
    for full, rel, size, is_dir in entries:
        total += size
        if rel.endswith(".pyc"):
            pyc += size
        if is_dir:
            continue
        hit = None
        for pattern in patterns:
            if style == "pack":
                if fnmatchcase(rel, pattern):
                    hit = pattern
                    break
            elif any(fnmatchcase(p, pattern) for p in _self_and_parents(full, str(prefix))):
                hit = pattern
                break
        if hit:
            per_pattern[hit] += size
            trimmed += size
    # No prefix in the record: the build prefix must leave no trace in the image.
    return {"style": style, "before_bytes": total, "trimmed_bytes": trimmed,
            "after_bytes": total - trimmed, "pyc_bytes": pyc, "patterns": per_pattern,
            "why": {p: (why or {}).get(p, "") for p in patterns}}


def _self_and_parents(full: str, stop: str):
    path = full
    while len(path) > len(stop):
        yield path
        path = os.path.dirname(path)


def merge(records: list[dict]) -> dict:
    """Pure: one record of the env from its layers' records (the pip builder trims each layer on its own)."""
    patterns = list(dict.fromkeys(p for r in records for p in r["patterns"]))
    return {"style": records[0]["style"] if records else "find",
            **{key: sum(r[key] for r in records) for key in ("before_bytes", "trimmed_bytes", "after_bytes", "pyc_bytes")},
            "patterns": {p: sum(r["patterns"].get(p, 0) for r in records) for p in patterns},
            "why": {p: next(r["why"][p] for r in records if p in r["why"]) for p in patterns}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merge", type=Path, nargs="+", metavar="RECORD",
                        help="write one record of these records (each layer's) to --out, measuring nothing")
    parser.add_argument("--prefix", type=Path)
    parser.add_argument("--style", choices=("pack", "find"))
    parser.add_argument("--trim", nargs=2, action="append", default=[], metavar=("PATTERN", "WHY"),
                        help="a pattern and the reason a runtime never needs what it matches")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.merge:
        args.out.write_text(json.dumps(merge([json.loads(p.read_text()) for p in args.merge]), indent=1) + "\n")
        return 0
    if args.prefix is None or args.style is None:
        parser.error("--prefix and --style are needed to measure")
    record = measure(args.prefix, [p for p, _ in args.trim], args.style, dict(args.trim))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"measure_trims: {record['trimmed_bytes']} of {record['before_bytes']} bytes match the trims "
          f"(pyc {record['pyc_bytes']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
