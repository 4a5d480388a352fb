"""Builder side: one planned layer of a conda env, installed and packed in its own stage.

    /opt/installer/bin/python pack_layer.py --lock /tmp/part/conda-amd64.lock --build-prefix BUILD_PREFIX \
        --dest-prefix /opt/rapids --out /out/layers/compiled/numpy --records /out/records \
        --trims /tmp/builder/trims.json --channels-secret /run/secrets/conda-channels
    /opt/installer/bin/python pack_layer.py --rest --out /out/layers/env --records /out/records --trims ...

The layer's part of one arch's lock (render/layer_plan.py conda_lock_parts; absent or empty: the arch
installs nothing here) is installed exactly as locked into a fresh build prefix by install_lock.py
(every sha256 checked; python only read, as a companion, where the layer's `noarch: python` packages
need its version). What the pack excludes match is measured (RECORDS/trims.json), then conda-pack
packs the prefix with --dest-prefix, so every text and binary prefix of the layer is rewritten as in
a whole env, and the result lands in OUT, laid out as the prefix. conda-pack finds site-packages from
python's conda-meta record, which lies in python's own layer: `site_packages` tells it. Bytecode of
every Python source a package ships without it (`noarch: python` packages, which conda compiles at
install and py-rattler does not; packages built without it) is compiled as if at the prefix, keyed
by source hash, where this interpreter is the env's Python line.

The rest layer (--rest) is the env's own conda-meta/history, which every package layer drops.
py-rattler and conda-pack from the installer venv; otherwise standard library.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import py_compile
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its neighbours in the builder's /tmp/builder

from install_lock import LockInstallError, install, parse_channels, read_lock  # noqa: E402
from measure_trims import measure  # noqa: E402

HISTORY = Path("conda-meta/history")


def site_packages(records: list[dict]) -> str | None:
    """lib/pythonX.Y/site-packages of the python the part installs or names as its companion."""
    python = next((r for r in records if r["name"] == "python"), None)
    return f"lib/python{'.'.join(python['version'].split('.')[:2])}/site-packages" if python else None


def pack(build_prefix: Path, dest_prefix: str, excludes: list[str], site: str | None, out: Path) -> None:
    """conda-pack the build prefix (--dest-prefix, the excludes) and unpack it into `out`."""
    from conda_pack import core

    if site is not None:  # python's conda-meta lies in its own layer: say where its site-packages is
        core.find_site_packages = lambda prefix: site
    env = core.CondaEnv.from_prefix(str(build_prefix))
    for pattern in excludes:
        env = env.exclude(pattern)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "layer.tar"
        env.pack(output=str(archive), dest_prefix=dest_prefix, compress_level=0, verbose=False)
        with tarfile.open(archive) as tar:
            # conda-pack's own archive; "tar" keeps its modes where this Python has extraction filters
            tar.extractall(out, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
    (out / HISTORY).unlink(missing_ok=True)  # the rest layer's: one copy for the env


def read_only_to_others(out: Path) -> int:
    """Clear group and other write bits under the layer: the runtime user runs in group 0, so a file an
    installer made group-writable (py-rattler writes entry points 0o775) could be replaced by it for
    every later process (the suid gate refuses such an env). Returns the paths changed."""
    changed = 0
    for path in [out, *out.rglob("*")]:
        mode = path.lstat().st_mode
        if not path.is_symlink() and mode & 0o022:
            path.chmod(mode & 0o7755)
            changed += 1
    return changed


def compile_missing(out: Path, dest_prefix: str) -> int:
    """Bytecode for every package's Python sources that ship none: `noarch: python` packages (conda
    compiles them at install; py-rattler does not) and any package built without it (conda-build
    compiles a linux-64 package's sources into it; a package made from a wheel or a Debian package has
    none). The env is read-only to a random uid, so a missing .pyc is compiled again by every process
    that imports it (the pip flavour compiles all of them too). Only sources under this interpreter's
    own lib/pythonX.Y (a pyc of another line is dead weight); a layer of compiled packages names no
    python record, so the line is read from the paths. Returns the files compiled."""
    lib = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/"  # site-packages and the standard library
    compiled = 0
    for meta in sorted((out / "conda-meta").glob("*.json")):
        for rel in json.loads(meta.read_text()).get("files", []):
            source = out / rel
            if not (rel.endswith(".py") and rel.startswith(lib) and source.is_file()):
                continue
            cached = importlib.util.cache_from_source(str(source))
            if Path(cached).exists():
                continue
            py_compile.compile(str(source), cfile=cached, dfile=f"{dest_prefix}/{rel}", doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
            compiled += 1
    return compiled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the layer's folder, laid out as the prefix")
    parser.add_argument("--records", type=Path, required=True, help="where trims.json goes")
    parser.add_argument("--trims", type=Path, required=True, help="JSON list of {pattern, why}: conda-pack's excludes")
    parser.add_argument("--rest", action="store_true", help="the rest layer: the env's conda-meta/history")
    parser.add_argument("--lock", type=Path, help="the layer's part of the arch's lock")
    parser.add_argument("--build-prefix", type=Path)
    parser.add_argument("--dest-prefix", default="/opt/rapids")
    parser.add_argument("--channels-secret", type=Path, help="file of channel mirrors, one NAME=URL or URL a line")
    parser.add_argument("--cache", type=Path, default=Path("/root/.cache/rapidship-conda"))
    args = parser.parse_args(argv)
    trims = json.loads(args.trims.read_text())
    patterns = [t["pattern"] for t in trims]
    why = {t["pattern"]: t["why"] for t in trims}
    args.out.mkdir(parents=True, exist_ok=True)
    args.records.mkdir(parents=True, exist_ok=True)
    part = args.lock.read_text() if args.lock is not None and args.lock.is_file() else ""
    if args.rest or not part.strip():
        if args.rest:
            (args.out / HISTORY).parent.mkdir(parents=True, exist_ok=True)
            (args.out / HISTORY).write_text("")
        (args.records / "trims.json").write_text(json.dumps(measure(args.out, patterns, "pack", why), indent=1) + "\n")
        print(f"pack_layer: {args.out}: {'the env itself' if args.rest else 'nothing of this arch'}")
        return 0
    if args.build_prefix is None:
        parser.error("--build-prefix is needed to install a part")
    try:
        secret = args.channels_secret
        mirrors = parse_channels(secret.read_text().splitlines() if secret and secret.is_file() else [])
        records = read_lock(part)[1]
        count = install(args.lock, args.build_prefix, mirrors, args.cache)
    except LockInstallError as err:
        print(f"pack_layer: {args.lock}: {err}", file=sys.stderr)
        return 2
    record = measure(args.build_prefix, patterns, "pack", why)
    (args.records / "trims.json").write_text(json.dumps(record, indent=1) + "\n")
    site = site_packages(records)
    pack(args.build_prefix, args.dest_prefix, patterns, site, args.out)
    shutil.rmtree(args.build_prefix)
    compiled = compile_missing(args.out, args.dest_prefix)
    opened = read_only_to_others(args.out)
    print(f"pack_layer: {args.out}: {count} packages, {record['before_bytes']:,} B installed, "
          f"{record['trimmed_bytes']:,} B trimmed, {compiled} sources compiled, {opened} paths made read-only "
          "to the runtime user's group")
    return 0


if __name__ == "__main__":
    sys.exit(main())
