"""A delta disc against the full disc of the same release, side by side in one run.

    python bench/delta_disc.py --base REF [--base REF ...] --new REF [--new REF ...] [--media dvd]

Exports the base release (N) whole, the new release (N+1) whole, and N+1 `--since` N's export,
with the real code path (`rapidship.export.write.export`, unsigned: a bench has no release key),
and prints each disc's archive bytes, the delta's share of the full N+1 disc, and which layers the
delta carries. The images must be in the engine (build them first, e.g. a lock with one package
bumped). Removes nothing from the engine; the discs go to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from dataclasses import asdict  # noqa: E402

from rapidship.export.delta import plan_delta  # noqa: E402
from rapidship.export.verify import previous_release  # noqa: E402
from rapidship.export.write import export, parse_media, resolve_images  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", action="append", required=True, help="an image of release N (repeatable)")
    parser.add_argument("--new", action="append", required=True, help="an image of release N+1 (repeatable)")
    parser.add_argument("--media", default="dvd")
    args = parser.parse_args()
    media = parse_media(args.media)
    with tempfile.TemporaryDirectory(prefix="rapidship-delta-bench-") as tmp:
        out, runs = Path(tmp), {}
        for name, refs, since in (("N full", args.base, None), ("N+1 full", args.new, None),
                                  ("N+1 delta", args.new, "N full")):
            start = time.monotonic()
            images = resolve_images([], None, refs)
            delta = plan_delta([asdict(i) for i in images], *previous_release(
                str(out / since.replace(" ", "-") / "export.json"))) if since else None
            record = export(images, media, out / name.replace(" ", "-"), unsigned=True, delta=delta)
            runs[name] = {"archive_bytes": record.archive_bytes, "tar_bytes": record.tar_bytes,
                          "volumes": record.volume_count, "seconds": round(time.monotonic() - start, 1),
                          "layers_left_to_the_host": len(record.extends.get("layers", []))}
            print(f"{name:10} {record.archive_bytes:>15,} B zstd ({record.tar_bytes:,} B tar), "
                  f"{record.volume_count} volume(s), {runs[name]['seconds']} s", flush=True)
    share = runs["N+1 delta"]["archive_bytes"] / runs["N+1 full"]["archive_bytes"]
    print(f"delta / full N+1: {share:.4f} ({share * 100:.2f} %); "
          f"{runs['N+1 delta']['layers_left_to_the_host']} layer(s) taken from the host's N")
    print(json.dumps({"runs": runs, "delta_share": round(share, 4)}, indent=2))


if __name__ == "__main__":
    main()
