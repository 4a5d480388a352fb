"""Disc export and import against the plain commands, side by side in one run.

    python bench/export_bench.py [--variant cpu-debian12 --arch amd64 | --image REF] [--rounds 3] [--media dvd]

Export: `rapidship.export.write.export` (save | zstd -T0 | split, volume files, ISO images, ISO
checksums) against plain `docker save REF | zstd -T0 -3 > file`. Import: `invoke import`'s path
(checksums of every file read straight from the ISO images; pass 1: zstd -d, every member hashed to
find the image's config and layers; pass 2: zstd -d again, those members copied into the archive
rapidship writes, into docker load) against plain `docker load -i` of the uncompressed tar and
`zstd -dc file | docker load` of the disc's own archive, which import no longer hands to the engine.
The image stays in the engine throughout (this bench removes nothing it did not make), so every
load re-reads and re-applies every layer under the same conditions. Prints JSON and the ratios.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rapidship.export.write import export, iso_name, parse_media, resolve_images  # noqa: E402
from rapidship.export.load import docker_load, plan_load  # noqa: E402
from rapidship.export.verify import verify  # noqa: E402
from rapidship.config.matrix import load_matrix  # noqa: E402
from rapidship.records import Workspace  # noqa: E402


def timed(fn):
    start = time.monotonic()
    result = fn()
    return time.monotonic() - start, result


def sh(cmd: str) -> None:
    subprocess.run(["bash", "-o", "pipefail", "-c", cmd], check=True, stdout=subprocess.DEVNULL)


def one_round(ref: str, images, media, work: Path, n: int) -> dict:
    out = work / f"round-{n}"
    plain_zst, plain_tar = work / f"plain-{n}.tar.zst", work / f"plain-{n}.tar"
    row: dict = {}
    # the machine is shared: alternate which side goes first so order and cache effects cancel
    plain = lambda: sh(f"docker save {ref} | zstd -T0 -3 -q -c > {plain_zst}")  # noqa: E731
    if n % 2 == 0:
        row["plain_save_zstd_s"], _ = timed(plain)
    # unsigned: the bench times the archive's path; verifying a signature costs milliseconds
    row["export_s"], record = timed(lambda: export(images, media, out, unsigned=True))
    if n % 2 == 1:
        row["plain_save_zstd_s"], _ = timed(plain)
    row["export_phases_s"] = record.seconds
    row["tar_bytes"], row["zstd_bytes"], row["volumes"] = record.tar_bytes, record.archive_bytes, record.volume_count
    isos = [str(out / iso_name(record.export_id, v, record.volume_count)) for v in range(1, record.volume_count + 1)]
    sh(f"zstd -dcq {plain_zst} > {plain_tar}")
    def ours() -> None:
        row["import_verify_s"], checked = timed(lambda: verify(isos))
        row["import_plan_s"], plan = timed(lambda: plan_load(checked))
        row["import_load_s"], _ = timed(lambda: docker_load(checked, plan))

    if n % 2 == 1:
        ours()
    row["plain_load_tar_s"], _ = timed(lambda: sh(f"docker load -q -i {plain_tar}"))
    row["plain_zstd_load_s"], _ = timed(lambda: sh(f"zstd -dcq {plain_zst} | docker load -q"))
    if n % 2 == 0:
        ours()
    row["import_s"] = row["import_verify_s"] + row["import_plan_s"] + row["import_load_s"]
    for p in (plain_zst, plain_tar):
        p.unlink()
    subprocess.run(["rm", "-rf", str(out)], check=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="cpu-debian12")
    ap.add_argument("--arch", default="amd64")
    ap.add_argument("--image", help="any local image ref instead of a variant")
    ap.add_argument("--media", default="dvd")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", help="scratch directory (default $TMPDIR)")
    args = ap.parse_args()

    variants = [] if args.image else [load_matrix(ROOT / "variants.yaml").get(args.variant)]
    images = resolve_images(variants, args.arch, [args.image] if args.image else [], Workspace(ROOT / "build"))
    ref = images[0].ref
    media = parse_media(args.media)
    with tempfile.TemporaryDirectory(prefix="rapidship-bench-", dir=args.work) as tmp:
        sh(f"docker save {ref} > /dev/null")  # warm the page cache for both sides alike
        rounds = [one_round(ref, images, media, Path(tmp), n) for n in range(args.rounds)]

    def med(key: str) -> float:
        return round(statistics.median(r[key] for r in rounds), 2)

    tar = rounds[0]["tar_bytes"]
    summary = {
        "image": ref, "image_id": images[0].image_id, "media": media.name, "rounds": args.rounds,
        "tar_bytes": tar, "zstd_bytes": rounds[0]["zstd_bytes"], "volumes": rounds[0]["volumes"],
        "median_s": {k: med(k) for k in ("plain_save_zstd_s", "export_s", "plain_load_tar_s", "plain_zstd_load_s",
                                          "import_verify_s", "import_plan_s", "import_load_s", "import_s")},
        "export_phases_s": rounds[len(rounds) // 2]["export_phases_s"],
        "rounds_raw": rounds,
    }
    m = summary["median_s"]
    summary["throughput_MBps"] = {"plain_save_zstd": round(tar / 1e6 / m["plain_save_zstd_s"], 1),
                                  "export": round(tar / 1e6 / m["export_s"], 1)}
    summary["ratios"] = {
        "export_vs_save_zstd": round(m["export_s"] / m["plain_save_zstd_s"], 2),
        "import_vs_docker_load_tar": round(m["import_s"] / m["plain_load_tar_s"], 2),
        "import_vs_zstd_docker_load": round(m["import_s"] / m["plain_zstd_load_s"], 2),
    }
    # per-round ratios: both sides of a pair ran back to back under the same machine load
    pairs = {"export_vs_save_zstd": ("export_s", "plain_save_zstd_s"),
             "import_vs_docker_load_tar": ("import_s", "plain_load_tar_s"),
             "import_vs_zstd_docker_load": ("import_s", "plain_zstd_load_s")}
    summary["paired_ratio_median"] = {k: round(statistics.median(r[a] / r[b] for r in rounds), 2) for k, (a, b) in pairs.items()}
    print(json.dumps(summary, indent=2))
    r = summary["ratios"]
    print(f"\n{ref}: {tar / 1e6:.0f} MB tar -> {summary['zstd_bytes'] / 1e6:.0f} MB zstd, {summary['volumes']} volume(s)",
          file=sys.stderr)
    print(f"export  {m['export_s']:.2f} s vs docker save | zstd -T0 {m['plain_save_zstd_s']:.2f} s: "
          f"ratio {r['export_vs_save_zstd']}", file=sys.stderr)
    print(f"import  {m['import_s']:.2f} s (checksums {m['import_verify_s']:.2f} + pass 1 {m['import_plan_s']:.2f} + "
          f"pass 2 and load {m['import_load_s']:.2f}) vs "
          f"docker load -i tar {m['plain_load_tar_s']:.2f} s: ratio {r['import_vs_docker_load_tar']}; "
          f"vs zstd -dc | docker load {m['plain_zstd_load_s']:.2f} s: ratio {r['import_vs_zstd_docker_load']}",
          file=sys.stderr)
    print(f"paired per-round medians: {summary['paired_ratio_median']}", file=sys.stderr)


if __name__ == "__main__":
    main()
