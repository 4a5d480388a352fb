"""`python3 -m prune.merge --record OUT RECORD...`: one prune record of an env from its layers' records.

The pip builder prunes each of the env's layers in that layer's own stage (a patch of one package
prunes only its layer again); the image keeps one record of the env, as a whole-env prune writes it:
totals summed, files and wheels joined, the census's counts summed and its files left joined. A
byte-identical copy in two layers is counted once in each (copies are linked only inside a layer).
Records that kept different architectures are refused: they are not one env's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .files import SCHEMA_VERSION, _summed

_ARCH_TOTALS = ("arch_before", "arch_after")


def merge(records: list[dict]) -> dict:
    """Pure: the env's record from its layers' records (ValueError: they kept different GPUs)."""
    keeps = {tuple(r["keep"]) for r in records}
    if len(keeps) != 1:
        raise ValueError(f"the layers' records keep different GPUs: {sorted(keeps)}")
    totals = {key: sum(r["totals"][key] for r in records) for key in records[0]["totals"] if key not in _ARCH_TOTALS}
    totals.update({key: dict(sorted(_summed(r["totals"][key] for r in records).items())) for key in _ARCH_TOTALS})
    out = {"schema_version": SCHEMA_VERSION, "keep": list(keeps.pop()), "totals": totals,
           "wheels": [w for r in records for w in r.get("wheels") or []],
           "files": sorted((f for r in records for f in r["files"]), key=lambda f: f["path"])}
    if censuses := [r["census"] for r in records if "census" in r]:
        out["census"] = {**{key: sum(c[key] for c in censuses) for key in
                            ("files_with_device_code", "copies_counted_once", "container_bytes", "for_no_listed_gpu_bytes")},
                         "for_no_listed_gpu_by_arch": _summed(c["for_no_listed_gpu_by_arch"] for c in censuses),
                         "left": sorted((f for c in censuses for f in c["left"]), key=lambda f: (-f["bytes"], f["path"]))}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prune.merge", description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, required=True, help="where the env's record goes")
    parser.add_argument("records", nargs="+", type=Path, help="each layer's record")
    args = parser.parse_args(argv)
    try:
        record = merge([json.loads(p.read_text()) for p in args.records])
    except (OSError, ValueError, KeyError) as err:
        print(f"prune.merge: {err}: render the variant again (invoke render) and build it", file=sys.stderr)
        return 2
    args.record.write_text(json.dumps(record, indent=1) + "\n")
    t = record["totals"]
    print(f"prune: the env: {t['pruned']} of {t['with_device_code']} files with device code pruned, "
          f"{t['refused']} refused, {t['saved_bytes']:,} bytes saved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
