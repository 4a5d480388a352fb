"""`python3 -m prune` in the builder stage (this package is copied into the build context as
builder/prune; stdlib only): prune an env's device code in place and write the record."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import fatbin, files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prune", description=__doc__.splitlines()[0])
    parser.add_argument("--keep", required=True, help="compute capabilities to keep, e.g. 80,90")
    parser.add_argument("--record", type=Path, required=True, help="where the JSON record goes")
    parser.add_argument("--cuobjdump", help="NVIDIA cuobjdump: every rewritten file must be listed by it")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    try:
        keep = fatbin.parse_keep(args.keep)
    except ValueError as err:
        parser.error(f"--keep: {err}")
    if args.cuobjdump and not os.access(args.cuobjdump, os.X_OK):
        parser.error(f"--cuobjdump: {args.cuobjdump} is not an executable file")
    for path in args.paths:
        if not path.exists():
            parser.error(f"{path} does not exist")

    def show(entry: dict) -> None:
        if entry["status"] != "unchanged":
            saved = entry["bytes_before"] - entry["bytes_after"]
            print(f"prune: {entry['status']:8} {saved / 2**20:9.1f} MiB saved  {entry['path']}"
                  + (f"  ({entry['reason']})" if entry["reason"] else ""), flush=True)

    record = files.prune_paths(args.paths, keep, cuobjdump=args.cuobjdump, jobs=max(1, args.jobs), on_file=show)
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(json.dumps(timeless(record), indent=1) + "\n")
    t = record["totals"]
    print(f"prune: kept sm {','.join(map(str, keep))}: {t['pruned']} of {t['with_device_code']} files with device "
          f"code pruned, {t['refused']} refused, {t['saved_bytes']:,} bytes saved in {t['seconds']} s")
    if c := record.get("census"):
        print(f"prune: left for no listed GPU: {c['for_no_listed_gpu_bytes']:,} of {c['container_bytes']:,} bytes of "
              f"device code in {len(c['left'])} of {c['files_with_device_code']} distinct files "
              f"({c['copies_counted_once']} copies counted once)")
    return 0


def timeless(record: dict) -> dict:
    """The record without how long each step took: it ships in the image, whose bytes must be the
    same on every build of one lock (the times are printed into the build log instead)."""
    return {**record, "totals": {k: v for k, v in record["totals"].items() if k != "seconds"},
            "files": [{k: v for k, v in f.items() if k != "seconds"} for f in record["files"]],
            "wheels": [{k: v for k, v in w.items() if k != "seconds"} for w in record.get("wheels") or []]}


if __name__ == "__main__":
    sys.exit(main())
