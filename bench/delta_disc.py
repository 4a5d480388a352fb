"""A delta disc against the full disc of the same release, side by side in one run.

    python bench/delta_disc.py --base REF [--base REF ...] --new REF [--new REF ...] [--media dvd]

Exports the base release (N) whole, the new release (N+1) whole, and N+1 `--since` N's export,
with the real code path (`rapidship.export.write.export`, unsigned: a bench has no release key),
and prints each disc's archive bytes, the delta's share of the full N+1 disc, and which layers the
delta carries. The images must be in the engine (build them first, e.g. a lock with one package
bumped). The discs go to a temporary folder. Removes nothing from the engine, except with
--import: then it times `invoke import --no-verify` of the full N+1 disc on an engine without N or
N+1 and of the delta on an engine holding N (loaded back from N's full disc), as a site would, and
checks the goal delta time <= full time x 1.5 x delta bytes / full bytes + 5 s, and each import
against its floor: 1.5 x the seconds to write the bytes whose chain the engine does not hold, at this
machine's disk rate measured in the same run (512 MiB written and fsynced), + 5 s. Only the images
named are removed, each is loaded back with its own id, or the bench stops naming it. Beside the
delta import, the engine's own part of it: `docker load` alone of an archive holding only the layers
whose chain the engine lacks (cut from `docker save` of N+1, read once into the page cache first), on
the same engine holding N: what any import through docker's loader costs at least.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
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
    parser.add_argument("--import", dest="imports", action="store_true", help="also time the site's imports")
    parser.add_argument("--json", help="also write the figures here")
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
        figures = {"base": args.base, "new": args.new, "runs": runs, "delta_share": round(share, 4)}
        if args.imports:
            figures["imports"] = imports(args.base, args.new, out, share)
    print(f"delta / full N+1: {share:.4f} ({share * 100:.2f} %); "
          f"{runs['N+1 delta']['layers_left_to_the_host']} layer(s) taken from the host's N")
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


def _ids(refs: list[str]) -> dict[str, str]:
    got = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", *refs], capture_output=True, text=True)
    return dict(zip(refs, got.stdout.split())) if got.returncode == 0 else {}


def _import(disc: Path, site: Path) -> tuple[float, str]:
    """Seconds, and what the import said of the layers a delta disc lacks; `site`: the site's own records."""
    start = time.monotonic()
    got = subprocess.run(["invoke", "import", "--from", str(disc), "--no-verify"], cwd=ROOT, capture_output=True,
                         text=True, env=dict(os.environ, RAPIDSHIP_SITE_DIR=str(site)))
    if got.returncode != 0:
        sys.exit(f"import of {disc.name} failed: {got.stderr[-2000:]}")
    said = " ".join(got.stderr.split())
    line = said[said.find("delta disc:"):].split(" by content")[0] + " by content" if "delta disc:" in said else ""
    return time.monotonic() - start, line


def disk_write_rate(root: Path, size: int = 512 << 20) -> float:
    """Bytes a second this machine writes and fsyncs on the engine's file system, measured now."""
    target = root / f"rapidship-write-rate-{os.getpid()}"
    block = os.urandom(1 << 20)
    start = time.monotonic()
    with open(target, "wb") as fh:
        for _ in range(size >> 20):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    seconds = time.monotonic() - start
    target.unlink()
    return size / seconds


def layers_of(refs: list[str]) -> list[list[str]]:
    """Each image's layers (diff_ids), read while it is in the engine."""
    return [json.loads(subprocess.run(["docker", "image", "inspect", "-f", "{{json .RootFS.Layers}}", ref],
                                      capture_output=True, text=True, check=True).stdout) for ref in refs]


def refed_bytes(layer_lists: list[list[str]], sizes: dict[str, int]) -> int:
    """Tar bytes of these images' layers whose chain the engine does not hold now: what an import must
    write (every import leaves held chains out). Sizes from the engine's layer store (tar-split), where
    read while the images are in the engine (`sizes`: chain -> bytes)."""
    from rapidship.image import chain_ids, images

    held = {c for layers in images().values() for c in chain_ids(layers)}
    wanted = {c for layers in layer_lists for c in chain_ids(layers)}
    return sum(sizes[chain] for chain in wanted - held)


def engine_load(saved: Path, out: Path) -> tuple[float, int]:
    """Seconds `docker load` alone takes for the layers of `saved` (a docker save) whose chain the
    engine does not hold, and their tar bytes: the others are named in the manifest and left out,
    as the import leaves them out."""
    from rapidship.image import chain_ids, images
    from rapidship.imagebuild.normalise import layer_member

    held = {c for layers in images().values() for c in chain_ids(layers)}
    fed = 0
    with tarfile.open(saved) as src, tarfile.open(out, "w") as dst:
        manifest = json.load(src.extractfile("manifest.json"))
        for image in manifest:
            diff_ids = json.load(src.extractfile(image["Config"]))["rootfs"]["diff_ids"]
            dst.addfile(src.getmember(image["Config"]), src.extractfile(image["Config"]))
            for name, chain in zip(image["Layers"], chain_ids(diff_ids)):
                if chain in held or name in dst.getnames():
                    continue
                member = layer_member(src, name)
                info = tarfile.TarInfo(name)
                info.size = member.size
                dst.addfile(info, src.extractfile(member))
                fed += member.size
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        dst.addfile(info, io.BytesIO(data))
    subprocess.run(["cat", str(out)], stdout=subprocess.DEVNULL, check=True)  # from the page cache, as a pipe is
    start = time.monotonic()
    subprocess.run(["docker", "load", "-q", "-i", str(out)], capture_output=True, check=True)
    seconds = time.monotonic() - start
    out.unlink()
    return seconds, fed


def imports(base: list[str], new: list[str], out: Path, share: float) -> dict:
    """The site's side: N+1 full on an engine without N or N+1, the delta on one holding N."""
    want = _ids(base + new)
    if len(want) != len(base + new):
        sys.exit("--import: every --base and --new image must be in the engine")

    def gone(refs):
        subprocess.run(["docker", "rmi", *refs], capture_output=True, check=True)

    def back(refs):
        held = _ids(refs)
        if any(held.get(r) != want[r] for r in refs):
            sys.exit(f"--import: the engine holds {held} where {({r: want[r] for r in refs})} was loaded")

    from rapidship.export.hostlayers import store
    from rapidship.image import chain_ids, images

    found = store()
    if found is None:
        sys.exit("--import: the engine's layer store is not readable here (overlay2, as root)")
    new_layers = layers_of(new)
    sizes = {c: found.size(c) for layers in new_layers for c in chain_ids(layers)}  # read while they are there
    others = {c for ident, layers in images().items() if ident not in want.values() for c in chain_ids(layers)}
    if sum(n for c, n in sizes.items() if c in others) > 0.5 * sum(sizes.values()):
        sys.exit("--import: other images in the engine hold most of N+1's chains, so no import here would be a "
                 "site's: remove them first (docker images), then run the bench again")
    rate = disk_write_rate(found.root)
    refed = {}
    saved = out / "N+1-saved.tar"
    subprocess.run(["docker", "save", "-o", str(saved), *new], capture_output=True, check=True)
    gone(new + base)
    refed["full"] = refed_bytes(new_layers, sizes)
    full, _ = _import(out / "N+1-full", out / "site-a")  # a site that receives N+1 whole
    back(new)
    gone(new)
    _import(out / "N-full", out / "site-b")  # a site that holds N, then receives the delta
    back(base)
    refed["delta"] = refed_bytes(new_layers, sizes)
    delta, how = _import(out / "N+1-delta", out / "site-b")
    back(new)
    gone(new)  # the engine holds N again: docker load alone of what the delta import fed it
    engine, fed = engine_load(saved, out / "N+1-refed.tar")
    back(new)
    saved.unlink()
    goal = full * 1.5 * share + 5
    verdict = "met" if delta <= goal else "missed"
    # the floor: writing the bytes the engine does not hold, at this machine's disk rate (measured now)
    floors = {k: round(1.5 * b / rate + 5, 2) for k, b in refed.items()}
    print(f"import: full N+1 {full:.1f} s, delta {delta:.1f} s (goal {goal:.1f} s: {verdict})"
          + (f"; {how}" if how else ""), flush=True)
    print(f"re-fed: full {refed['full']:,} B, delta {refed['delta']:,} B at {rate / 1e6:,.0f} MB/s written: "
          f"the floor's goal (1.5 x write + 5 s) full {floors['full']} s, delta {floors['delta']} s", flush=True)
    print(f"docker load alone of the delta's re-fed layers ({fed:,} B of tar): {engine:.1f} s "
          f"({delta / engine:.2f}x of it for the whole delta import)", flush=True)
    return {"full_import_s": round(full, 2), "delta_import_s": round(delta, 2), "goal_s": round(goal, 2),
            "met": delta <= goal, "delta_said": how, "disk_write_bytes_per_s": round(rate),
            "refed_bytes": refed, "floor_goal_s": floors,
            "engine_load_delta_s": round(engine, 2), "engine_load_delta_tar_bytes": fed,
            "floor_met": {"full": full <= floors["full"], "delta": delta <= floors["delta"]}}


if __name__ == "__main__":
    main()
