"""A Debian security update of one package of the runtime base, full disc against delta disc.

    python3 bench/debian_update.py [--package zlib1g] [--variant cpu-debian12] [--arch amd64] \
        [--import] [--json FILE] [--keep]

Release N: this checkout's tree (`git archive` into a scratch folder), `invoke base --force` and
`invoke build` under their own RAPIDSHIP_RUN_ID. Release N+1: the same, but the base made with
`invoke base --apt-source` from a flat apt repository on 127.0.0.1 that holds one package: the
security suite's real build of --package (bytes checked against the suite's Packages index). So the
two bases differ by that package (and the source's line in /etc/apt/sources.list), as a site's base
does on a security-update day when the site's mirror carries the fix; the rest of the archive is
the suite's, as it is. Then bench/delta_disc.py (full N, full N+1, N+1 --since N; --import times the
site's side). The package's own bytes: its data tarball (`dpkg-deb --fsys-tarfile`) through zstd -3.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "bench")]

from patch_layers import built_ref, release_flags, run  # noqa: E402
from support.apt_repo import fetch_update, write_index  # noqa: E402
from support.channel_server import serve  # noqa: E402


def base_record(copy: Path, run_id: str) -> dict:
    return json.loads(next((copy / "build" / "bases").glob(f"*-{run_id}.json")).read_text())


def own_zstd_bytes(deb: Path) -> int:
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
    return len(subprocess.run(["zstd", "-3", "-q", "-c"], input=tar, capture_output=True, check=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="zlib1g", help="a package of the runtime base with a security update")
    args = release_flags(parser).parse_args()
    made: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rapidship-debian-update-") as tmp:
        copy, repo = Path(tmp) / "tree", Path(tmp) / "repo"
        copy.mkdir()
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
        update = fetch_update(args.package, args.arch, repo)
        write_index(repo, [update])
        env = dict(os.environ, SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "1796456202"))
        bases, refs = {}, {}
        try:
            with serve(repo) as (port, _):
                for release, extra in (("n", []), ("n1", ["--apt-source", f"deb [trusted=yes] http://127.0.0.1:{port}/ ./"])):
                    env["RAPIDSHIP_RUN_ID"] = f"bench-deb-{release}"
                    run(["invoke", "base", "--os", "debian12", "--arch", args.arch, "--force", *extra], copy, env)
                    bases[release] = base_record(copy, env["RAPIDSHIP_RUN_ID"])
                    made.append(bases[release]["ref"])
                    run(["invoke", "build", "--variant", args.variant, "--arch", args.arch], copy, env)
                    refs[release] = built_ref(copy, args.variant, args.arch)
                    made.append(refs[release])
            then, now = bases["n"]["inputs"]["packages"], bases["n1"]["inputs"]["packages"]
            changed = {p: [then.get(p), now.get(p)] for p in sorted(set(then) | set(now)) if then.get(p) != now.get(p)}
            disc = [sys.executable, str(ROOT / "bench" / "delta_disc.py"), "--base", refs["n"], "--new", refs["n1"]]
            out = run(disc + (["--import"] if args.imports else []), ROOT, env)
            result = json.loads(out[out.index("{\n"):])
            own = own_zstd_bytes(repo / update.filename)
            layers = {release: len(json.loads(subprocess.run(
                ["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", ref], capture_output=True,
                text=True, check=True).stdout)) for release, ref in refs.items()}
        finally:
            if not args.keep and made:
                subprocess.run(["docker", "rmi", *made], capture_output=True, check=False)
    full, delta = result["runs"]["N+1 full"]["archive_bytes"], result["runs"]["N+1 delta"]["archive_bytes"]
    print(f"\n{args.variant} {args.arch}: {args.package} {changed.get(args.package)}; the base's packages that "
          f"differ: {changed}")
    print(f"own (zstd) {own:,} B; full N+1 {full:,} B; delta {delta:,} B ({delta / full:.2%} of full, {delta / own:.1f}x own)")
    doc = {"commit": commit, "package": args.package, "versions": changed.get(args.package), "base_packages_changed": changed,
           "base_ids": {r: b["image_id"] for r, b in bases.items()}, "refs": refs, "image_layers": layers,
           "base_layers": {r: b.get("layers") for r, b in bases.items()}, "own_zstd_bytes": own,
           "delta_over_own": round(delta / own, 1), **result}
    print(json.dumps(doc, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
