"""Python from Debian 12's python3.11 packages, relocated under a conda prefix, and one package per
shared library its extension modules load (conda-forge's names and split). Used by
bench/conda_channel.py; docs/conda.md, "Python from Debian", says what is changed and why."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from bench.conda_package import ARCHES, EPOCH, PLACEHOLDER, PYTHON, SUBDIRS, ChannelError, Package, members, write_conda

# Supplied by every Linux base image (conda-forge ships them as sysroot/libgcc packages instead).
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1",
               "libresolv.so.2", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libgcc_s.so.1", "libstdc++.so.6"}


# conda package name <- Debian packages, conda-forge's split: a CVE fix in OpenSSL is one package.
DEBIAN_LIBS = {
    "openssl": ["libssl3"], "libffi": ["libffi8"], "libexpat": ["libexpat1"], "libzlib": ["zlib1g"],
    "bzip2": ["libbz2-1.0"], "liblzma": ["liblzma5"], "libsqlite": ["libsqlite3-0"],
    "ncurses": ["libncursesw6", "libtinfo6"], "readline": ["libreadline8"], "libuuid": ["libuuid1"],
    "libxcrypt": ["libcrypt1"],
}
DEBIAN_PYTHON = ["python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib", "python3.11"]
# Modules whose libraries the channel does not carry: nis (libnsl -> libtirpc -> Kerberos; deprecated,
# gone in 3.13) and _dbm (Berkeley DB). conda-forge's python builds neither against those libraries.
DROPPED_MODULES = ("nis.cpython-", "_dbm.cpython-")


def debian_version(deb: Path) -> tuple[str, str]:
    """(conda version, build) from a .deb's Version: epoch dropped, upstream -> version, revision -> build."""
    version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True).stdout.strip()
    version = version.split(":", 1)[-1]
    upstream, _, revision = version.rpartition("-") if "-" in version else (version, "", "0")
    clean = lambda s: re.sub(r"[^A-Za-z0-9_.]", "_", s)  # noqa: E731
    return clean(upstream), "deb_" + clean(revision).replace(".", "_")


def find_debs(debs: Path, names: list[str], arch: str) -> dict[str, Path]:
    found = {}
    for name in names:
        hits = sorted(debs.glob(f"{name}_*_{arch}.deb"))
        if len(hits) != 1:
            raise ChannelError(f"{debs}: expected one {name}_*_{arch}.deb, found {len(hits)}: "
                               f"apt-get download {name} (in that folder)")
        found[name] = hits[0]
    return found


def download_debs(debs: Path, arch: str = "amd64") -> None:
    names = DEBIAN_PYTHON + [d for ds in DEBIAN_LIBS.values() for d in ds]
    missing = [n for n in names if not list(debs.glob(f"{n}_*_{arch}.deb"))]
    if missing:
        debs.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", "-q", *missing], cwd=debs, check=True, capture_output=True)


def _elf(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(4) == b"\x7fELF"


def needed(path: Path) -> list[str]:
    return subprocess.run(["patchelf", "--print-needed", str(path)], capture_output=True, text=True,
                          check=True).stdout.split()


def _extract(deb: Path, into: Path, multiarch: str) -> None:
    """The .deb's files under the prefix: /usr/bin -> bin, /usr/lib/python3.11 -> lib/python3.11,
    shared libraries (/lib or /usr/lib/<multiarch>) -> lib; docs, man pages and /etc stay behind."""
    raw = into.parent / (into.name + ".raw")
    shutil.rmtree(raw, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(raw)], check=True)
    moves = {"usr/bin": "bin", f"usr/lib/python{PYTHON}": f"lib/python{PYTHON}",
             f"usr/lib/{multiarch}": "lib", f"lib/{multiarch}": "lib"}
    for src, dst in moves.items():
        if (raw / src).is_dir():
            (into / dst).mkdir(parents=True, exist_ok=True)
            shutil.copytree(raw / src, into / dst, symlinks=True, dirs_exist_ok=True)
    shutil.rmtree(raw)


# Python 3.11 freezes `site` into the binary, so Debian's dist-packages layout cannot be patched in
# site.py; the stdlib's sitecustomize (imported by site, -I included) puts upstream's back.
SITECUSTOMIZE = """\
# <prefix>/lib/python3.11/site-packages, where conda packages put their files. Debian's python looks
# in dist-packages (its `site` module is frozen into the interpreter); upstream CPython's, and so
# site.getsitepackages() here (CUDA's library finders read it), in site-packages.
import os
import site
import sys


def getsitepackages(prefixes=None):
    return [os.path.join(prefix, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
            for prefix in dict.fromkeys(prefixes or site.PREFIXES) if prefix]


site.getsitepackages = getsitepackages
for _path in getsitepackages():
    site.addsitedir(_path)
"""


def _conda_layout(lib: Path) -> None:
    """Debian's site and sysconfig point at dist-packages (and /usr/local); upstream CPython, and so
    conda-forge's python, at <prefix>/lib/python3.11/site-packages. Put the upstream layout back."""
    (lib / "sitecustomize.py").write_text(SITECUSTOMIZE)
    sysconfig = lib / "sysconfig.py"
    text = sysconfig.read_text()
    debian = "            prefix_scheme = 'posix_local'\n"
    if debian not in text:
        raise ChannelError(f"{sysconfig}: Debian's posix_local default not found; this python is not the one expected")
    sysconfig.write_text(text.replace(debian, "            prefix_scheme = 'posix_prefix'\n"))


def _runpath(path: Path, runpath: str) -> None:
    subprocess.run(["patchelf", "--set-rpath", runpath, str(path)], check=True)


def python_packages(debs: Path, channel: Path, work: Path, arch: str = "amd64", level: int = 3,
                    libs: dict[str, list[str]] = DEBIAN_LIBS) -> list[Path]:
    """python (Debian's interpreter and stdlib under the prefix) and one package per library its
    extension modules load, each ELF file's RUNPATH pointing at the prefix's lib/."""
    work.mkdir(parents=True, exist_ok=True)
    machine = ARCHES[arch]
    multiarch = f"{machine}-linux-gnu"
    subdir = SUBDIRS[machine]
    provides: dict[str, str] = {}   # soname -> conda package
    packages: list[Package] = []
    for conda_name, deb_names in libs.items():
        root = work / conda_name
        shutil.rmtree(root, ignore_errors=True)
        found = find_debs(debs, deb_names, arch)
        for deb in found.values():
            _extract(deb, root, multiarch)
        version, build = debian_version(found[deb_names[0]])
        for lib in (root / "lib").rglob("*.so*"):
            provides[lib.name] = conda_name
        packages.append(Package(root, {"name": conda_name, "version": version, "build": build, "build_number": 0,
                                       "subdir": subdir, "arch": machine, "platform": "linux", "depends": [],
                                       "license": "", "timestamp": EPOCH * 1000},
                                about={"summary": f"Debian 12 {' + '.join(deb_names)}, relocated under the prefix",
                                       "source_debs": [p.name for p in found.values()]}))
    root = work / "python"
    shutil.rmtree(root, ignore_errors=True)
    found = find_debs(debs, DEBIAN_PYTHON, arch)
    for deb in found.values():
        _extract(deb, root, multiarch)
    lib = root / f"lib/python{PYTHON}"
    for name in ("EXTERNALLY-MANAGED", "sitecustomize.py"):   # Debian's pip guard; a link into /etc
        (lib / name).unlink(missing_ok=True)
    for module in (lib / "lib-dynload").iterdir():
        if module.name.startswith(DROPPED_MODULES):
            module.unlink()
    _conda_layout(lib)
    for alias in ("python3", "python"):
        (root / "bin" / alias).symlink_to(f"python{PYTHON}")
    version, build = debian_version(found["python3.11-minimal"])
    python = Package(root, {"name": "python", "version": version, "build": build, "build_number": 0,
                            "subdir": subdir, "arch": machine, "platform": "linux", "depends": [],
                            "license": "Python-2.0", "timestamp": EPOCH * 1000},
                     about={"summary": "Debian 12's CPython 3.11, relocated under the prefix",
                            "source_debs": [p.name for p in found.values()]})
    packages.append(python)
    versions = {pkg.index["name"]: pkg.index["version"] for pkg in packages}
    for pkg in packages:
        _relocate(pkg, provides, versions)
    made = [write_conda(pkg, channel / subdir, level) for pkg in packages]
    for pkg in packages:
        shutil.rmtree(pkg.root)
    return made


def _relocate(pkg: Package, provides: dict[str, str], versions: dict[str, str]) -> None:
    """RUNPATH of every ELF file to the prefix's lib/, its NEEDED libraries as depends; the Debian
    shebangs (#! /usr/bin/python3.11) to the prefix placeholder. A library nobody provides is an error."""
    depends = set()
    for rel in members(pkg.root):
        path = pkg.root / rel
        if path.is_symlink() or not path.is_file():
            continue
        if _elf(path):
            wants = [n for n in needed(path) if n not in SYSTEM_LIBS]
            missing = [n for n in wants if n not in provides]
            if missing:
                raise ChannelError(f"{pkg.index['name']}: {rel} needs {', '.join(missing)}, which no package provides")
            depends |= {provides[n] for n in wants if provides[n] != pkg.index["name"]}
            if wants:
                up = os.path.relpath("lib", os.path.dirname(rel))
                _runpath(path, "$ORIGIN" if up == "." else f"$ORIGIN/{up}")
        elif rel.startswith("bin/"):
            data = path.read_bytes()
            if re.match(rb"^#! ?/usr/bin/python", data):
                path.write_bytes(re.sub(rb"^#! ?/usr/bin/python[0-9.]*", f"#!{PLACEHOLDER}/bin/python{PYTHON}".encode(), data, count=1))
                pkg.prefixed[rel] = "text"
    # at least the version it was linked against, as a run_export would say
    pkg.index["depends"] = sorted(f"{name} >={versions[name]}" for name in depends)
