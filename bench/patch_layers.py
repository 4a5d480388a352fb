"""A one-package patch on a real image, full disc against delta disc, for two layouts side by side.

    python3 bench/patch_layers.py --package toolz --version 1.1.0 --before COMMIT \
        [--variant cpu-debian12 --env dask-cpu --arch amd64] [--keep]

For each layout (the commit --before, e.g. the env in parts by kind; and this checkout's HEAD, the
layers planned per distribution) the bench takes that commit's tree (`git archive`, nothing of this
checkout changes), builds release N with `invoke build`, pins --package to --version in the env's
lock (the version's hashes from the index's JSON API: a real release on PyPI), records the wheel
sizes where the layout has them (`invoke lock-sizes`), builds N+1, and runs bench/delta_disc.py
(full N, full N+1, N+1 --since N; the real export code, unsigned). The package's own zstd bytes come
from `invoke size-report --delta-cost` on the planned layout's N+1. Prints one table and the JSON.
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


def layout(name: str, commit: str, args: argparse.Namespace, tmp: Path, hashes: list[str]) -> dict:
    copy = tmp / name
    copy.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
    env = dict(os.environ, SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "1796456202"))
    refs = []
    for release in ("n", "n1"):
        if release == "n1":
            lock = copy / "locks" / args.env / "requirements.txt"
            lock.write_text(pinned(lock.read_text(), args.package, args.version, hashes))
            if (copy / "locks" / args.env / "wheel-sizes.json").is_file():
                run(["invoke", "lock-sizes", "--env", args.env], copy, env)
        env["RAPIDSHIP_RUN_ID"] = f"bench-{name}-{release}"
        run(["invoke", "build", "--variant", args.variant, "--arch", args.arch], copy, env)
        refs.append(built_ref(copy, args.variant, args.arch))
    out = run([sys.executable, str(ROOT / "bench" / "delta_disc.py"), "--base", refs[0], "--new", refs[1]], ROOT, env)
    result = json.loads(out[out.index("{\n"):])
    result["refs"] = refs
    if (copy / "locks" / args.env / "wheel-sizes.json").is_file():
        report = json.loads(run(["invoke", "size-report", "--variant", args.variant, "--arch", args.arch,
                                 "--delta-cost", "--json"], copy, env))
        row = next(r for r in report["delta_cost"]["rows"] if r["distribution"] == canonical(args.package))
        result["package"] = row
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", required=True)
    parser.add_argument("--version", required=True, help="a version of the package on the index")
    parser.add_argument("--before", required=True, help="the commit of the layout to compare against")
    parser.add_argument("--variant", default="cpu-debian12")
    parser.add_argument("--env", default="dask-cpu")
    parser.add_argument("--arch", default="amd64")
    parser.add_argument("--keep", action="store_true", help="leave the built images in the engine")
    args = parser.parse_args()
    hashes = index_hashes(args.package, args.version)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    results = {}
    with tempfile.TemporaryDirectory(prefix="rapidship-patch-bench-") as tmp:
        try:
            for name, commit in (("before", args.before), ("planned", head)):
                results[name] = layout(name, commit, args, Path(tmp), hashes) | {"commit": commit}
        finally:
            if not args.keep:
                made = [ref for r in results.values() for ref in r.get("refs", [])]
                if made:
                    subprocess.run(["docker", "rmi", *made], capture_output=True, check=False)
    own = results["planned"].get("package", {}).get("own_bytes")
    print(f"\n{args.variant} {args.arch}: {args.package} -> {args.version}; its own files, zstd: {own:,} B")
    print(f"{'layout':10} {'full N+1 (zstd)':>18} {'delta (zstd)':>14} {'delta/full':>11} {'delta/own':>10}")
    for name, r in results.items():
        full, delta = r["runs"]["N+1 full"]["archive_bytes"], r["runs"]["N+1 delta"]["archive_bytes"]
        print(f"{name:10} {full:>18,} {delta:>14,} {delta / full:>10.2%} {delta / own:>9.1f}x")
    print(json.dumps({"package": args.package, "version": args.version, "own_zstd_bytes": own, **results}, indent=1))


if __name__ == "__main__":
    main()
