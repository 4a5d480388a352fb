"""Builder side: one planned layer of a pip env, made in its own stage, into a folder laid out as the prefix.

    python3.11 install_layer.py --prefix /opt/rapids --out /out/layers/compiled/numpy --records /out/records \
        --trims /tmp/builder/trims.json [--lock /tmp/part/requirements-amd64.txt --arch amd64 \
        --python-version 3.11 --glibc-minor 36]

With a lock (the layer's part of one arch's lock; absent or empty: the arch installs nothing here),
the venv's pip at PREFIX installs its wheels for the target arch (`--target`, exact platform tags,
hashes required, no dependencies, no bytecode) into OUT's site-packages, and target_layout.py puts
scripts and data where a venv has them. Then, for every layer (the venv's own too): what each trim
pattern matches is measured (RECORDS/trims.json) and removed, as `find OUT -depth -path PATTERN
-exec rm -rf` would; and PREFIX's python compiles the bytecode as if the files lay at PREFIX (keyed
by source hash: two builds of one lock give the same files; -S: no .pth of the env runs). pip's index
and CA come from the environment the build step sets from its secrets. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from fnmatch import fnmatchcase
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its neighbours in the builder's /tmp/builder

from measure_trims import measure  # noqa: E402
from target_layout import relocate  # noqa: E402

MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}


def platforms(arch: str, glibc_minor: int) -> list[str]:
    """pip's --platform tags a wheel for `arch` may carry on a glibc 2.<glibc_minor> runtime."""
    machine = MACHINES.get(arch)
    if machine is None:
        raise SystemExit(f"install_layer: no wheel platform for --arch {arch} (TARGETARCH)")
    return [f"manylinux2014_{machine}"] + [f"manylinux_2_{m}_{machine}" for m in range(17, glibc_minor + 1)]


def remove_trimmed(root: Path, patterns: list[str]) -> None:
    """What `find ROOT -depth -path PATTERN -exec rm -rf {} +` removes, for each pattern (`*` matches
    across `/`, as in find and measure_trims.py)."""
    for current, dirs, files in os.walk(root):
        for name in list(dirs):
            full = os.path.join(current, name)
            if any(fnmatchcase(full, p) for p in patterns):
                dirs.remove(name)
                (os.unlink if os.path.islink(full) else shutil.rmtree)(full)
        for name in files:
            full = os.path.join(current, name)
            if any(fnmatchcase(full, p) for p in patterns):
                os.unlink(full)


def install(lock: Path, site: Path, prefix: Path, arch: str, python_version: str, glibc_minor: int) -> None:
    tags = [arg for tag in platforms(arch, glibc_minor) for arg in ("--platform", tag)]
    subprocess.run([str(prefix / "bin" / "pip"), "install", "--no-deps", "--require-hashes", "--only-binary=:all:",
                    "--disable-pip-version-check", "--no-compile", "--implementation", "cp", "--python-version",
                    python_version, *tags, "--target", str(site), "-r", str(lock)], check=True)
    relocate(site, site.parents[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", type=Path, required=True, help="the venv whose pip installs; the env's path at run time")
    parser.add_argument("--out", type=Path, required=True, help="the layer's folder, laid out as PREFIX")
    parser.add_argument("--records", type=Path, required=True, help="where trims.json goes")
    parser.add_argument("--trims", type=Path, required=True, help="JSON list of {pattern, why}")
    parser.add_argument("--lock", type=Path, help="the layer's part of the arch's lock")
    parser.add_argument("--arch", default="")
    parser.add_argument("--python-version", default="")
    parser.add_argument("--glibc-minor", type=int, default=0)
    args = parser.parse_args(argv)
    trims = json.loads(args.trims.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    if args.lock is not None and args.lock.is_file() and args.lock.stat().st_size:
        site = args.out / "lib" / f"python{args.python_version}" / "site-packages"
        try:
            install(args.lock, site, args.prefix, args.arch, args.python_version, args.glibc_minor)
        except subprocess.CalledProcessError as err:
            print(f"install_layer: pip install -r {args.lock} failed ({err.returncode}): see pip's message above",
                  file=sys.stderr)
            return 1
    patterns = [t["pattern"] for t in trims]
    record = measure(args.out, patterns, "find", {t["pattern"]: t["why"] for t in trims})
    args.records.mkdir(parents=True, exist_ok=True)
    (args.records / "trims.json").write_text(json.dumps(record, indent=1) + "\n")
    remove_trimmed(args.out, patterns)
    if (args.out / "lib").is_dir():
        subprocess.run([str(args.prefix / "bin" / "python"), "-I", "-S", "-m", "compileall", "-f", "-q", "-j", "0",
                        "--invalidation-mode", "unchecked-hash", "-s", str(args.out), "-p", str(args.prefix),
                        str(args.out / "lib")], check=True)
    print(f"install_layer: {args.out}: {record['before_bytes']:,} B installed, {record['trimmed_bytes']:,} B trimmed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
