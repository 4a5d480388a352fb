"""A local conda channel of real `.conda` packages, made the way conda-build lays them out.

`rtest-hello` (linux-64 or linux-aarch64) carries the three kinds of prefix a real env carries:
  bin/rtest-hello        an ELF binary compiled with the placeholder prefix baked into a string
                         (binary prefix: conda-pack must rewrite it in place, NUL-padded)
  etc/rtest/rtest.conf   a text file naming <prefix>/share/rtest/data.txt (text prefix)
  bin/rtest-greet        an entry-point script whose shebang is <prefix>/bin/rtest-hello
`rtest-data` (noarch: generic) holds share/rtest/data.txt; rtest-hello depends on it, so the solve
has to follow a dependency across subdirs. The channel is indexed with py-rattler (repodata.json
with sha256), packed with conda-package-handling.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

from rapidship.render.layer_plan import DISC_PER_WHEEL_BYTE, GROUP_DISC_BYTES

# conda-build pads its host prefix the same way: long enough for any install prefix.
PLACEHOLDER = "/opt/conda-bld/rtest_1700000000000/_h_env_placehold_placehold_placehold_placehold_placehold_placehold"
DATA_TEXT = "hello from rtest-data 1.0\n"

HELLO_C = r"""
#include <stdio.h>
static const char data_path[] = PREFIX "/share/rtest/data.txt";
int main(int argc, char **argv) {
    char buf[256];
    size_t n;
    FILE *f = fopen(data_path, "r");
    if (!f) { fprintf(stderr, "rtest-hello: cannot open %s\n", data_path); return 3; }
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    printf("data-path=%s\n", data_path);
    printf("data=%s", buf);
    if (argc > 1) printf("script=%s\n", argv[1]);
    return 0;
}
"""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _package(root: Path, out_dir: Path, index: dict, prefixed: dict[str, str]) -> Path:
    """Write info/ for the files under root and pack root into <out_dir>/<name>-<ver>-<build>.conda."""
    from conda_package_handling.api import create

    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not str(p.relative_to(root)).startswith("info/"))
    info = root / "info"
    info.mkdir(exist_ok=True)
    paths = []
    for rel in files:
        entry = {"_path": rel, "path_type": "hardlink", "sha256": _sha(root / rel), "size_in_bytes": (root / rel).stat().st_size}
        if rel in prefixed:
            entry |= {"prefix_placeholder": PLACEHOLDER, "file_mode": prefixed[rel]}
        paths.append(entry)
    (info / "paths.json").write_text(json.dumps({"paths": paths, "paths_version": 1}, indent=1))
    (info / "files").write_text("\n".join(files) + "\n")
    if prefixed:
        (info / "has_prefix").write_text("".join(f"{PLACEHOLDER} {mode} {rel}\n" for rel, mode in sorted(prefixed.items())))
    (info / "index.json").write_text(json.dumps(index, indent=1))
    name = f"{index['name']}-{index['version']}-{index['build']}"
    out_dir.mkdir(parents=True, exist_ok=True)
    every = files + sorted(str(p.relative_to(root)) for p in info.iterdir())
    create(str(root), every, f"{name}.conda", out_folder=str(out_dir))
    return out_dir / f"{name}.conda"


def build_channel(channel: Path, work: Path, subdir: str = "linux-64") -> list[Path]:
    """Make <channel>/{noarch,<subdir>}/*.conda plus repodata; return the package files."""
    gcc = shutil.which("gcc")
    if not gcc:
        raise RuntimeError("gcc is needed to build the test channel's ELF binary (apt-get install gcc)")
    stamp = int(time.time() * 1000)
    made = []

    data_root = work / "rtest-data"
    (data_root / "share/rtest").mkdir(parents=True)
    (data_root / "share/rtest/data.txt").write_text(DATA_TEXT)
    made.append(_package(data_root, channel / "noarch", {
        "name": "rtest-data", "version": "1.0", "build": "0", "build_number": 0, "subdir": "noarch",
        "noarch": "generic", "depends": [], "license": "Apache-2.0", "timestamp": stamp}, {}))

    hello_root = work / "rtest-hello"
    (hello_root / "bin").mkdir(parents=True)
    (hello_root / "etc/rtest").mkdir(parents=True)
    src = work / "hello.c"
    src.write_text(HELLO_C)
    subprocess.run([gcc, "-O2", "-o", str(hello_root / "bin/rtest-hello"), f'-DPREFIX="{PLACEHOLDER}"', str(src)],
                   check=True, capture_output=True)
    assert PLACEHOLDER.encode() in (hello_root / "bin/rtest-hello").read_bytes()
    (hello_root / "etc/rtest/rtest.conf").write_text(f"data={PLACEHOLDER}/share/rtest/data.txt\n")
    greet = hello_root / "bin/rtest-greet"
    greet.write_text(f"#!{PLACEHOLDER}/bin/rtest-hello\n# entry point: the kernel runs rtest-hello with this path\n")
    greet.chmod(0o755)
    # What a runtime never needs: the pack excludes must drop these (and measure them).
    (hello_root / "include").mkdir()
    (hello_root / "include/rtest.h").write_text("int rtest(void);\n" * 64)
    (hello_root / "lib").mkdir()
    (hello_root / "lib/librtest.a").write_bytes(b"!<arch>\n" + b"\0" * 4096)
    arch = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}[subdir]
    made.append(_package(hello_root, channel / subdir, {
        "name": "rtest-hello", "version": "1.0", "build": "h0_0", "build_number": 0, "subdir": subdir,
        "arch": arch, "platform": "linux", "depends": ["rtest-data 1.0.*"], "license": "Apache-2.0",
        "timestamp": stamp}, {"bin/rtest-hello": "binary", "bin/rtest-greet": "text", "etc/rtest/rtest.conf": "text"}))
    index_channel(channel)
    return made


def _blob(seed: str, size: int) -> bytes:
    """Incompressible bytes (a package's size on a disc is its bytes), the same for the same seed."""
    out, block = bytearray(), seed.encode()
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])


SHARED = _blob("shared", 96 * 1024)  # one file two packages carry: the upper layer's copy links down
# over the plan's group limit (a compiled package's estimated bytes on a disc): a layer of its own
BIG = int(GROUP_DISC_BYTES / DISC_PER_WHEEL_BYTE[False]) + 128 * 1024


def add_layered_packages(channel: Path, work: Path, big_version: str = "1.0", subdir: str = "linux-64",
                         only_big: bool = False, seed: str = "") -> None:
    """More packages beside build_channel's, for an env the layer plan splits: rtest-big and
    rtest-twin (each over the group limit: a layer of its own; both carry SHARED), a stand-in python
    3.11 (its record gives noarch packages their site-packages; its bin/python3.11 is a shell script
    that names what it runs, so a relocated shebang shows), and rtest-pylib (noarch: python, with an
    entry point the installer writes). `only_big`: just rtest-big at `big_version`, a patch (a package
    made again differs in its archive's times, so the others are left as they are). `seed` makes the
    blobs this run's own, so no engine's cache holds a step that reads them. Re-indexes."""
    for name, version in (("rtest-big", big_version), ("rtest-twin", "1.0"))[:1 if only_big else 2]:
        root = work / f"{name}-{version}"
        (root / f"share/{name}").mkdir(parents=True)
        (root / f"share/{name}/blob.bin").write_bytes(_blob(f"{seed}{name}-{version}", BIG))
        (root / f"share/{name}/shared.bin").write_bytes(SHARED)
        _package(root, channel / subdir, {"name": name, "version": version, "build": "h0_0", "build_number": 0,
                                          "subdir": subdir, "depends": [], "license": "Apache-2.0"}, {})
    if only_big:
        index_channel(channel)
        return
    python = work / "python-3.11.2"
    (python / "bin").mkdir(parents=True)
    (python / "lib/python3.11").mkdir(parents=True)
    (python / "lib/python3.11/os.py").write_text("# the stand-in's landmark\n")
    (python / "bin/python3.11").write_text('#!/bin/sh\necho "stand-in python $*"\n')
    (python / "bin/python3.11").chmod(0o755)
    _package(python, channel / subdir, {"name": "python", "version": "3.11.2", "build": "h0_0_cpython", "build_number": 0,
                                        "subdir": subdir, "depends": [], "license": "PSF-2.0"}, {})
    pylib = work / "rtest-pylib"
    (pylib / "site-packages/rtest_pylib").mkdir(parents=True)
    (pylib / "site-packages/rtest_pylib/__init__.py").write_text("def main():\n    print('rtest-pylib')\n")
    (pylib / "info").mkdir()
    (pylib / "info/link.json").write_text(json.dumps({"noarch": {"type": "python", "entry_points": ["rtest-py = rtest_pylib:main"]},
                                                      "package_metadata_version": 1}))
    _package(pylib, channel / "noarch", {"name": "rtest-pylib", "version": "1.0", "build": "pyh0_0", "build_number": 0,
                                         "subdir": "noarch", "noarch": "python", "depends": ["python >=3.11,<3.12"],
                                         "license": "Apache-2.0"}, {})
    index_channel(channel)


def index_channel(channel: Path) -> None:
    from rattler.index import index_fs

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel, force=True))


# A conda variant on debian12 over the test channel (the locally bootstrapped base works), and its env.
TEST_VARIANTS = """
defaults:
  registry_prefix: harbor.example.internal/dockerhub
  budget_bytes: 4700000000
  uid: 1001
  user: rapids
  rapids: "26.10"
  python: "3.11"
  flavour: conda
  image: {image}
  env: rtest
  conda_builder: library/python:3.11-slim-bookworm
oses:
  debian12:
    family: deb
    distro: debian
    version: "12"
    arches: [amd64]
    image: library/debian:bookworm-slim
axes:
  cuda: ["cpu"]
  os: [debian12]
"""
# The same, with the packages add_layered_packages makes: an env of five layers.
TEST_ENV_LAYERED = """flavour: conda
channels: [rtest]
pin: []          # python comes from the spec here: the stand-in, not the variant's line
requirements:
  - rtest-hello 1.0.*
  - rtest-big
  - rtest-twin
  - rtest-pylib
"""
TEST_ENV = """flavour: conda
channels: [rtest]
pin: []          # the test channel has no python: nothing of the variant is pinned
requirements:
  - rtest-hello 1.0.*
"""
