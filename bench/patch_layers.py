"""A one-package patch on a real image, full disc against delta disc, for two layouts side by side.

    python3 bench/patch_layers.py --pin toolz==1.1.0 [--pin ...] [--from] [--before COMMIT] \
        [--layouts before,planned] [--variant cpu-debian12 --env dask-cpu --arch amd64] [--import] \
        [--json FILE] [--keep]

For each layout (the commit --before, e.g. the env in parts by kind; and this checkout's HEAD, the
layers planned per distribution) the bench takes that commit's tree (`git archive`, nothing of this
checkout changes), builds the committed lock with `invoke build`, pins each --pin in the env's lock
(the version's hashes from the index's JSON API: a real release on PyPI), records the wheel sizes
where the layout has them (`invoke lock-sizes`), builds that, and runs bench/delta_disc.py (full N,
full N+1, N+1 --since N; the real export code, unsigned; --import times the site's side too). The
pinned lock is release N+1, or with --from release N (a patch that brought the lock to its
versions, e.g. a hotfix already locked). The packages' own zstd bytes come from `invoke size-report
--delta-cost` on the planned layout's N+1. Prints one table and the JSON.
Each build has its own RAPIDSHIP_RUN_ID; the images it built are removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rapidship.lock.sizes import canonical  # noqa: E402


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    got = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if got.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed in {cwd.name}:\n{got.stdout[-2000:]}\n{got.stderr[-3000:]}")
    return got.stdout


def pinned(lock: str, package: str, version: str, hashes: list[str]) -> str:
    """The lock with `package`'s block pinned to `version` and its hashes (markers and comments kept)."""
    lines, out, skipping = lock.splitlines(), [], False
    for line in lines:
        head = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(\s*;[^\\]*)?\s*\\?$", line)
        if head and not line[0].isspace():
            skipping = canonical(head.group(1)) == canonical(package)
            if skipping:
                out.append(f"{head.group(1)}=={version}{head.group(3) or ''} \\")
                out += [f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else "") for i, h in enumerate(hashes)]
                continue
        if skipping and line.strip().startswith("--hash="):
            continue
        skipping = skipping and not line.strip().startswith("#") and bool(line.strip())
        out.append(line)
    if not any(line.startswith(f"{package}=={version}") for line in out):
        sys.exit(f"{package} is not pinned in the lock")
    return "\n".join(out) + "\n"


def index_hashes(package: str, version: str) -> list[str]:
    import requests

    files = requests.get(f"https://pypi.org/simple/{canonical(package)}/", timeout=60,
                         headers={"Accept": "application/vnd.pypi.simple.v1+json"}).json()["files"]
    found = sorted(f["hashes"]["sha256"] for f in files if re.search(rf"-{re.escape(version)}[-.]", f["filename"])
                   and f["filename"].endswith((".whl", ".tar.gz")))
    if not found:
        sys.exit(f"the index has no {package} {version}")
    return found


def built_ref(copy: Path, variant: str, arch: str) -> str:
    return json.loads((copy / "build" / variant / f"build-{arch}.json").read_text())["ref"]


def layout(name: str, commit: str, args: argparse.Namespace, tmp: Path, pins: dict[str, tuple[str, list[str]]]) -> dict:
    copy = tmp / name
    copy.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
    env = dict(os.environ, SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "1796456202"))
    refs = {}
    lock = copy / "locks" / args.env / "requirements.txt"
    committed = lock.read_text()
    # N, then N+1 (whose build record the size report reads); --from makes the pinned lock N
    for release in ("n", "n1"):
        pinned_here = (release == "n") == args.from_pins
        text = committed
        for package, (version, hashes) in pins.items():
            text = pinned(text, package, version, hashes) if pinned_here else text
        lock.write_text(text)
        if (copy / "locks" / args.env / "wheel-sizes.json").is_file():
            run(["invoke", "lock-sizes", "--env", args.env], copy, env)
        env["RAPIDSHIP_RUN_ID"] = f"bench-{name}-{release}"
        run(["invoke", "build", "--variant", args.variant, "--arch", args.arch], copy, env)
        refs[release] = built_ref(copy, args.variant, args.arch)
    disc = [sys.executable, str(ROOT / "bench" / "delta_disc.py"), "--base", refs["n"], "--new", refs["n1"]]
    if args.imports:
        disc.append("--import")
    out = run(disc, ROOT, env)
    result = json.loads(out[out.index("{\n"):])
    result["refs"] = [refs["n"], refs["n1"]]
    if (copy / "locks" / args.env / "wheel-sizes.json").is_file():  # the table of release N+1's image
        report = json.loads(run(["invoke", "size-report", "--variant", args.variant, "--arch", args.arch,
                                 "--delta-cost", "--json"], copy, env))
        result["packages"] = [r for r in report["delta_cost"]["rows"] if r["distribution"] in {canonical(p) for p in pins}]
        result["size_report"] = report  # N+1's whole table and plan, kept as the record of that image
    return result


def release_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The flags of a bench that builds N and N+1 and compares their discs (this one, debian_update)."""
    parser.add_argument("--variant", default="cpu-debian12")
    parser.add_argument("--arch", default="amd64")
    parser.add_argument("--import", dest="imports", action="store_true", help="also time the site's imports")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="leave the built images in the engine")
    return parser


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pin", action="append", required=True, metavar="PACKAGE==VERSION",
                        help="a version on the index the patch moves the package to (repeatable)")
    parser.add_argument("--from", dest="from_pins", action="store_true",
                        help="the pins are release N, and the committed lock the patch's release N+1")
    parser.add_argument("--before", help="the commit of the layout to compare against")
    parser.add_argument("--layouts", default="before,planned", help="which layouts to build (before, planned)")
    parser.add_argument("--env", default="dask-cpu")
    args = release_flags(parser).parse_args()
    layouts = args.layouts.split(",")
    if "before" in layouts and not args.before:
        sys.exit("--before COMMIT is needed for the before layout (or --layouts planned)")
    pins = {}
    for pin in args.pin:
        package, sep, version = pin.partition("==")
        if not sep or not package or not version:
            sys.exit(f"--pin {pin}: write PACKAGE==VERSION")
        pins[package] = (version, index_hashes(package, version))
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    results = {}
    with tempfile.TemporaryDirectory(prefix="rapidship-patch-bench-") as tmp:
        try:
            for name, commit in (("before", args.before), ("planned", head)):
                if name in layouts:
                    results[name] = layout(name, commit, args, Path(tmp), pins) | {"commit": commit}
        finally:
            if not args.keep:
                made = [ref for r in results.values() for ref in r.get("refs", [])]
                if made:
                    subprocess.run(["docker", "rmi", *made], capture_output=True, check=False)
    rows = results.get("planned", {}).get("packages") or []
    own = sum(r["own_bytes"] for r in rows) or None
    said = ", ".join(f"{p}{'<-' if args.from_pins else '->'}{v}" for p, (v, _) in pins.items())
    print(f"\n{args.variant} {args.arch}: {said}; their own files, zstd: {own or 0:,} B")
    print(f"{'layout':10} {'full N+1 (zstd)':>18} {'delta (zstd)':>14} {'delta/full':>11} {'delta/own':>10}")
    for name, r in results.items():
        full, delta = r["runs"]["N+1 full"]["archive_bytes"], r["runs"]["N+1 delta"]["archive_bytes"]
        print(f"{name:10} {full:>18,} {delta:>14,} {delta / full:>10.2%} {f'{delta / own:.2f}x' if own else '-':>10}")
    doc = {"pins": {p: v for p, (v, _) in pins.items()}, "pins_are": "N" if args.from_pins else "N+1",
           "own_zstd_bytes": own, **results}
    print(json.dumps(doc, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
