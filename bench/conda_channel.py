"""A conda channel made of real bytes, where no conda channel can be reached: the RAPIDS pip lock's
own wheels, each turned into one `.conda` package, plus Python itself from Debian 12's python3.11
packages relocated under the prefix, indexed with py-rattler (docs/conda.md, "A channel made of
wheels"). Usage:

    python3 bench/conda_channel.py make --out CHANNEL [--lock locks/rapids-pip/requirements.txt]
                                        [--wheels DIR] [--debs DIR] [--work DIR]
    python3 bench/conda_channel.py lock CHANNEL [--require cudf-cu12 --require dask-cuda ...]
    python3 bench/conda_channel.py serve CHANNEL

`make` downloads what is missing (`pip download --no-deps --only-binary=:all: --require-hashes`
with the lock's hashes, `apt-get download` for the Debian packages), converts, indexes and prints
the seconds of each step. `lock` serves the channel on 127.0.0.1 and solves a conda env spec
against it with rapidship's own `lock_conda`. Package names stay the wheels' (canonical) names:
`cudf-cu12`, not conda-forge's `cudf`.
"""

from __future__ import annotations

import argparse
import base64
import email.parser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rapidship.errors import RapidshipError  # noqa: E402

PYTHON = "3.11"
SITE = f"lib/python{PYTHON}/site-packages"
PYTHON_DEP = f"python >={PYTHON},<3.12.0a0"
# conda-build pads its host prefix the same way: longer than any install prefix.
PLACEHOLDER = "/opt/conda-bld/wheels_1767225600/_h_env_placehold_placehold_placehold_placehold_placehold_placehold_pl"
# One time for every member, index.json and zip entry: the same inputs make the same bytes.
EPOCH = 1767225600  # 2026-01-01T00:00:00Z
SUBDIRS = {"x86_64": "linux-64", "aarch64": "linux-aarch64"}
ARCHES = {"amd64": "x86_64", "arm64": "aarch64"}
PIP_PLATFORMS = ("manylinux_2_28", "manylinux_2_27", "manylinux_2_24", "manylinux_2_17", "manylinux2014",
                 "manylinux2010", "manylinux1")
# Supplied by every Linux base image (conda-forge ships them as sysroot/libgcc packages instead).
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1",
               "libresolv.so.2", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libgcc_s.so.1", "libstdc++.so.6"}


class ChannelError(Exception):
    """One clear line: what is wrong and with which file."""


# ---- wheel metadata -> conda metadata (pure) ----

def conda_specifier(spec: str) -> str:
    """A PEP 440 specifier set -> a conda match-spec version ('' when unconstrained)."""
    from packaging.specifiers import SpecifierSet

    parts = []
    for one in sorted(SpecifierSet(spec), key=str):
        op, version = one.operator, one.version
        if op == "===":
            parts.append(f"=={version}")
        elif op == "~=":
            release = version.split(".")
            parts += [f">={version}", ".".join(release[:-1]) + ".*"]
        elif op == "==" and version.endswith(".*"):
            parts.append(version)
        else:
            parts.append(f"{op}{version}")
    return ",".join(parts)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def marker_env(machine: str, extra: str = "") -> dict[str, str]:
    return {"platform_machine": machine, "platform_system": "Linux", "sys_platform": "linux", "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "python_version": PYTHON, "python_full_version": f"{PYTHON}.2", "platform_release": "",
            "platform_version": "", "implementation_version": f"{PYTHON}.2", "extra": extra}


def conda_depends(requires: list[str], machine: str, extras_of: dict[str, list[str]] | None = None) -> list[str]:
    """Requires-Dist -> conda depends for linux/`machine`, Python 3.11: markers evaluated, names
    canonical, specifiers translated. A requirement with extras also depends on what those extras
    of the target add (from `extras_of`, the target's own Requires-Dist), since conda has no extras."""
    from packaging.requirements import Requirement

    extras_of = extras_of or {}
    out: list[str] = []
    todo = [(r, "") for r in requires]
    seen: set[tuple[str, str]] = set()
    while todo:
        text, extra = todo.pop(0)
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(marker_env(machine, extra)):
            continue
        name = canonical(req.name)
        version = conda_specifier(str(req.specifier))
        dep = f"{name} {version}".strip()
        if dep not in out:
            out.append(dep)
        for wanted in sorted(req.extras):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            for inner in extras_of.get(name, []):
                inner_req = Requirement(inner)
                # only what the extra adds: requirements gated on `extra == wanted`
                if inner_req.marker is not None and inner_req.marker.evaluate(marker_env(machine, wanted)) \
                        and not inner_req.marker.evaluate(marker_env(machine, "")):
                    todo.append((inner, wanted))
    return out


@dataclass(frozen=True)
class WheelInfo:
    path: Path
    name: str            # canonical: the conda package name
    version: str
    subdir: str          # noarch for pure wheels
    glibc: str | None    # the oldest glibc its manylinux tags allow
    sha256: str


def wheel_info(path: Path, machine: str = "x86_64") -> WheelInfo:
    """A wheel's conda identity for a channel of `machine` (a wheel tagged for several machines,
    like dask-cuda's, goes to that machine's subdir)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        name, version, _, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as err:
        raise ChannelError(f"{path}: not a wheel file name ({err})") from None
    platforms = {t.platform for t in tags}
    glibc = None
    if platforms == {"any"}:
        subdir = "noarch"
    else:
        mine = {p for p in platforms if p.startswith(("manylinux", "linux_")) and p.endswith("_" + machine)}
        if not mine:
            raise ChannelError(f"{path.name}: no Linux {machine} platform tag in {sorted(platforms)}")
        subdir = SUBDIRS[machine]
        glibc = oldest_glibc(mine)
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return WheelInfo(path, canonical(str(name)), str(version), subdir, glibc, digest.hexdigest())


def oldest_glibc(platforms: set[str]) -> str | None:
    legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
    found = []
    for p in platforms:
        m = re.match(r"manylinux_(\d+)_(\d+)_", p)
        if m:
            found.append((int(m.group(1)), int(m.group(2))))
        else:
            found += [v for k, v in legacy.items() if p.startswith(k + "_")]
    return ".".join(map(str, min(found))) if found else None


def read_metadata(zf: zipfile.ZipFile, wheel: str) -> tuple[str, email.message.Message]:
    infos = [n for n in zf.namelist() if re.match(r"^[^/]+\.dist-info/METADATA$", n)]
    if len(infos) != 1:
        raise ChannelError(f"{wheel}: expected one *.dist-info/METADATA, found {len(infos)}")
    return infos[0].split("/")[0], email.parser.Parser().parsestr(zf.read(infos[0]).decode("utf-8"))


def entry_points(zf: zipfile.ZipFile, dist_info: str) -> list[str]:
    """console_scripts and gui_scripts as conda writes them: `name = module:function`."""
    import configparser

    try:
        text = zf.read(f"{dist_info}/entry_points.txt").decode()
    except KeyError:
        return []
    cfg = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    cfg.optionxform = str
    cfg.read_string(text)
    return [f"{k.strip()} = {v.strip()}" for sec in ("console_scripts", "gui_scripts") if cfg.has_section(sec)
            for k, v in cfg.items(sec)]


def entry_point_script(spec: str) -> str:
    """The script conda and pip write for `name = module:obj.attr`, its shebang the prefix placeholder."""
    _, target = (s.strip() for s in spec.split("=", 1))
    module, _, attr = target.partition(":")
    head = attr.split(".")[0]
    call = attr.split("[")[0].strip()
    return (f"#!{PLACEHOLDER}/bin/python{PYTHON}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
            f"from {module} import {head}\nif __name__ == '__main__':\n"
            "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
            f"    sys.exit({call}())\n")


# ---- writing a .conda package ----

@dataclass
class Package:
    """A package being made: its files under `root` (paths relative to the prefix, or to the noarch
    python layout), which of them hold the placeholder, and its index.json."""

    root: Path
    index: dict
    prefixed: dict[str, str] = field(default_factory=dict)   # path -> file_mode (text | binary)
    link: dict | None = None
    about: dict = field(default_factory=dict)

    @property
    def stem(self) -> str:
        return f"{self.index['name']}-{self.index['version']}-{self.index['build']}"


def _hash(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest(), path.stat().st_size


def _members(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_symlink() or p.is_file())


def write_info(pkg: Package) -> list[str]:
    """info/{index,paths,files,about,link}.json and has_prefix; return the package's file paths."""
    files = [p for p in _members(pkg.root) if not p.startswith("info/")]
    paths = []
    for rel in files:
        full = pkg.root / rel
        entry: dict = {"_path": rel}
        if full.is_symlink():
            entry["path_type"] = "softlink"
            if full.exists():
                entry["sha256"], entry["size_in_bytes"] = _hash(full.resolve())
        else:
            entry["path_type"] = "hardlink"
            entry["sha256"], entry["size_in_bytes"] = _hash(full)
        if rel in pkg.prefixed:
            entry |= {"prefix_placeholder": PLACEHOLDER, "file_mode": pkg.prefixed[rel]}
        paths.append(entry)
    info = pkg.root / "info"
    info.mkdir(exist_ok=True)
    (info / "paths.json").write_text(json.dumps({"paths": paths, "paths_version": 1}, indent=1, sort_keys=True))
    (info / "files").write_text("".join(f + "\n" for f in files))
    (info / "index.json").write_text(json.dumps(pkg.index, indent=1, sort_keys=True))
    (info / "about.json").write_text(json.dumps(pkg.about, indent=1, sort_keys=True))
    if pkg.prefixed:
        (info / "has_prefix").write_text("".join(f"{PLACEHOLDER} {m} {p}\n" for p, m in sorted(pkg.prefixed.items())))
    if pkg.link:
        (info / "link.json").write_text(json.dumps(pkg.link, indent=1, sort_keys=True))
    return files


def _tar_zst(root: Path, names: list[str], level: int, out: Path) -> None:
    """A reproducible tar of `names` (sorted, fixed time, root-owned) streamed through zstd on every core."""
    with out.open("wb") as sink:
        zstd = subprocess.Popen(["zstd", f"-{level}", "-T0", "-q", "-c"], stdin=subprocess.PIPE, stdout=sink)
        with tarfile.open(fileobj=zstd.stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(names):
                member = tar.gettarinfo(str(root / name), arcname=name)
                member.mtime, member.uid, member.gid, member.uname, member.gname = EPOCH, 0, 0, "", ""
                if member.isfile():
                    with (root / name).open("rb") as fh:
                        tar.addfile(member, fh)
                else:
                    tar.addfile(member)
        zstd.stdin.close()
        if zstd.wait() != 0:
            raise ChannelError(f"zstd failed ({zstd.returncode}) packing {root}")


def write_conda(pkg: Package, out_dir: Path, level: int = 3) -> Path:
    """<out_dir>/<name>-<version>-<build>.conda: the v2 format (a stored zip of metadata.json,
    pkg-*.tar.zst, info-*.tar.zst), as conda-package-handling writes it."""
    files = write_info(pkg)
    info = sorted(p for p in _members(pkg.root) if p.startswith("info/"))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{pkg.stem}.conda"
    parts = pkg.root.parent / f"{pkg.stem}.parts"
    parts.mkdir(exist_ok=True)
    _tar_zst(pkg.root, files, level, parts / "pkg")
    _tar_zst(pkg.root, info, level, parts / "info")
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(zipfile.ZipInfo("metadata.json", date_time=(2026, 1, 1, 0, 0, 0)),
                    json.dumps({"conda_pkg_format_version": 2}))
        for arcname, part in ((f"pkg-{pkg.stem}.tar.zst", parts / "pkg"), (f"info-{pkg.stem}.tar.zst", parts / "info")):
            with part.open("rb") as src, zf.open(zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0)), "w",
                                                 force_zip64=True) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    shutil.rmtree(parts)
    return target


# ---- a wheel -> one .conda ----

def _record_line(rel_to_site: str, path: Path) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
    return f"{rel_to_site},sha256={digest},{path.stat().st_size}"


def wheel_package(info: WheelInfo, work: Path, extras_of: dict[str, list[str]]) -> Package:
    """Lay a wheel out as conda does: compiled wheels under the prefix (lib/python3.11/site-packages,
    bin/), pure ones in the noarch python layout (site-packages/, python-scripts/) with their entry
    points in info/link.json; scripts' `#!python` shebangs become the prefix placeholder."""
    noarch = info.subdir == "noarch"
    site = "site-packages" if noarch else SITE
    scripts = "python-scripts" if noarch else "bin"
    root = work / info.path.name
    if root.exists():
        shutil.rmtree(root)
    prefixed: dict[str, str] = {}
    machine = {v: k for k, v in SUBDIRS.items()}.get(info.subdir, "x86_64")
    with zipfile.ZipFile(info.path) as zf:
        dist_info, meta = read_metadata(zf, info.path.name)
        data_dir = dist_info.removesuffix(".dist-info") + ".data"
        points = entry_points(zf, dist_info)
        record_rows = []
        for member in zf.infolist():
            name = member.filename
            if name.endswith("/") or name in (f"{dist_info}/RECORD", f"{dist_info}/INSTALLER") \
                    or name.startswith(f"{dist_info}/RECORD."):
                continue
            if name.startswith(data_dir + "/"):
                kind, _, rest = name[len(data_dir) + 1:].partition("/")
                dest = {"purelib": f"{site}/{rest}", "platlib": f"{site}/{rest}", "scripts": f"{scripts}/{rest}",
                        "data": rest, "headers": f"include/python{PYTHON}/{info.name}/{rest}"}.get(kind)
                if dest is None:
                    raise ChannelError(f"{info.path.name}: unknown wheel data folder {kind!r}")
            else:
                dest = f"{site}/{name}"
            out = root / dest
            out.parent.mkdir(parents=True, exist_ok=True)
            data = zf.read(member)
            if dest.startswith(scripts + "/") and re.match(rb"^#!pythonw?(\s|$)", data):
                data = re.sub(rb"^#!pythonw?", f"#!{PLACEHOLDER}/bin/python{PYTHON}".encode(), data, count=1)
                prefixed[dest] = "text"
            out.write_bytes(data)
            mode = (member.external_attr >> 16) & 0o777
            os.chmod(out, 0o755 if (mode & 0o111 or dest.startswith(scripts + "/")) else 0o644)
            record_rows.append(dest)
    if not noarch:
        for spec in points:
            dest = f"bin/{spec.split('=')[0].strip()}"
            (root / "bin").mkdir(exist_ok=True)
            (root / dest).write_text(entry_point_script(spec))
            os.chmod(root / dest, 0o755)
            prefixed[dest] = "text"
            record_rows.append(dest)
    dist = root / site / dist_info
    (dist / "INSTALLER").write_text("conda\n")
    # RECORD as an installer writes it: paths relative to site-packages, this file's own row unhashed.
    rel = {dest: (dest[len(site) + 1:] if dest.startswith(site + "/") else
                  "../../../" + ("bin/" + dest[len(scripts) + 1:] if dest.startswith(scripts + "/") else dest))
           for dest in record_rows + [f"{site}/{dist_info}/INSTALLER"]}
    rows = [_record_line(r, root / d) for d, r in sorted(rel.items())] + [f"{dist_info}/RECORD,,"]
    (dist / "RECORD").write_text("\n".join(rows) + "\n")

    depends = conda_depends(meta.get_all("Requires-Dist") or [], machine, extras_of) + [PYTHON_DEP]
    if info.glibc:
        depends.append(f"__glibc >={info.glibc}")
    build = f"{'pyh' if noarch else 'py311h'}{info.sha256[:8]}_0"
    index = {"name": info.name, "version": info.version, "build": build, "build_number": 0, "depends": depends,
             "license": meta.get("License-Expression") or (meta.get("License") or "").split("\n")[0][:200],
             "subdir": info.subdir, "timestamp": EPOCH * 1000}
    if noarch:
        index["noarch"] = "python"
    else:
        index |= {"arch": machine, "platform": "linux"}
    link = {"noarch": {"type": "python", "entry_points": points}, "package_metadata_version": 1} if noarch else None
    about = {"summary": meta.get("Summary") or "", "home": meta.get("Home-page") or "",
             "source_wheel": info.path.name, "source_wheel_sha256": info.sha256}
    return Package(root, index, prefixed, link, about)


def wheel_extras(infos: list[WheelInfo]) -> dict[str, list[str]]:
    """Every wheel's Requires-Dist by name: what an extra of it adds is read from here."""
    out = {}
    for info in infos:
        with zipfile.ZipFile(info.path) as zf:
            out[info.name] = read_metadata(zf, info.path.name)[1].get_all("Requires-Dist") or []
    return out


def convert_wheels(wheels: list[Path], channel: Path, work: Path, level: int = 3, arch: str = "amd64") -> list[Path]:
    infos = [wheel_info(w, ARCHES[arch]) for w in sorted(wheels)]
    dupes = sorted({i.name for i in infos if sum(j.name == i.name for j in infos) > 1})
    if dupes:
        raise ChannelError(f"more than one wheel of {', '.join(dupes)}: keep one per package (one lock, one arch)")
    extras = wheel_extras(infos)
    work.mkdir(parents=True, exist_ok=True)
    made = []
    for info in infos:
        pkg = wheel_package(info, work, extras)
        made.append(write_conda(pkg, channel / info.subdir, level))
        shutil.rmtree(pkg.root)
    return made


# ---- Python from Debian's python3.11 packages ----

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
    for rel in _members(pkg.root):
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


# ---- the channel ----

def index_channel(channel: Path) -> None:
    import asyncio

    from rattler.index import index_fs

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel, force=True))


def download_wheels(lock: Path, wheels: Path, arch: str = "amd64") -> None:
    from rapidship.lock.pip import for_arch

    wheels.mkdir(parents=True, exist_ok=True)
    req = wheels / f"requirements-{arch}.txt"
    req.write_text(for_arch(lock.read_text(), arch, PYTHON, str(lock)))
    machine = ARCHES[arch]
    platforms = [a for p in PIP_PLATFORMS for a in ("--platform", f"{p}_{machine}")]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
                    *platforms, "--python-version", PYTHON, "--implementation", "cp", "--abi", f"cp{PYTHON.replace('.', '')}",
                    "-r", str(req), "-d", str(wheels), "-q"], check=True)


def make_channel(out: Path, wheels: list[Path], debs: Path, work: Path, arch: str = "amd64",
                 level: int = 3) -> dict[str, float]:
    """The whole channel in `out` (its name is the channel's): python and its libraries, every
    wheel, indexed; the seconds of each step."""
    channel = out
    seconds = {}
    start = time.monotonic()
    python_packages(debs, channel, work, arch, level)
    seconds["python"] = time.monotonic() - start
    start = time.monotonic()
    convert_wheels(wheels, channel, work, level, arch)
    seconds["wheels"] = time.monotonic() - start
    start = time.monotonic()
    index_channel(channel)
    seconds["index"] = time.monotonic() - start
    return seconds


# ---- lock a conda spec against it ----

VARIANTS = """
defaults:
  registry_prefix: harbor.example.internal/dockerhub
  budget_bytes: 4700000000
  uid: 1001
  user: rapids
  rapids: "26.10"
  python: "3.11"
  flavour: conda
  image: rapidship-bench/wheels
  env: {env}
  conda_builder: library/python:3.11-slim-bookworm
oses:
  debian12:
    family: deb
    distro: debian
    version: "12"
    arches: [amd64]
    image: library/debian:bookworm-slim
axes:
  cuda: ["{cuda}"]
  os: [debian12]
"""


def env_spec(channel_name: str, requirements: list[str]) -> str:
    reqs = "".join(f"  - {r}\n" for r in requirements)
    return (f"flavour: conda\nchannels: [{channel_name}]\n"
            "pin: [python]     # the channel has python; no cuda-version package (the wheels carry CUDA)\n"
            f"requirements:\n{reqs}")


def lock_against(channel: Path, requirements: list[str], project: Path, cuda: str = "12.9") -> Path:
    """Serve the channel on 127.0.0.1 and lock the spec with rapidship's lock_conda; the lock file."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.channel_server import serve

    from rapidship.config.matrix import load_matrix
    from rapidship.lock.conda import lock_conda
    from rapidship.lock.pip import load_env_spec

    (project / "envs").mkdir(parents=True, exist_ok=True)
    (project / "variants.yaml").write_text(VARIANTS.format(env="wheels", cuda=cuda))
    (project / "envs/wheels.yaml").write_text(env_spec(channel.name, requirements))
    matrix = load_matrix(project / "variants.yaml")
    spec = load_env_spec("wheels", project / "envs")
    with serve(channel.parent) as (port, _):
        return lock_conda(spec, matrix, [f"http://127.0.0.1:{port}/{channel.name}"], project / "locks")[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    make = sub.add_parser("make", help="download what is missing, convert, index")
    make.add_argument("--out", type=Path, required=True, help="the channel folder (its name is the channel's)")
    make.add_argument("--lock", type=Path, default=ROOT / "locks/rapids-pip/requirements.txt")
    make.add_argument("--wheels", type=Path, default=Path("build/conda-channel/wheels"))
    make.add_argument("--debs", type=Path, default=Path("build/conda-channel/debs"))
    make.add_argument("--work", type=Path, default=None)
    make.add_argument("--level", type=int, default=3, help="zstd level of the .conda members")
    lock = sub.add_parser("lock", help="serve the channel on 127.0.0.1 and lock a spec against it")
    lock.add_argument("channel", type=Path)
    lock.add_argument("--require", action="append", default=None)
    lock.add_argument("--project", type=Path, default=None)
    serve_cmd = sub.add_parser("serve", help="serve the channel's parent folder on 127.0.0.1 until interrupted")
    serve_cmd.add_argument("channel", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "make":
            start = time.monotonic()
            download_wheels(args.lock, args.wheels)
            download_debs(args.debs)
            fetched = time.monotonic() - start
            wheels = sorted(args.wheels.glob("*.whl"))
            with tempfile.TemporaryDirectory(dir=args.work) as work:
                seconds = make_channel(args.out, wheels, args.debs, Path(work))
            packages = sorted(args.out.rglob("*.conda"))
            size = sum(p.stat().st_size for p in packages)
            print(json.dumps({"download_s": round(fetched, 1), **{f"{k}_s": round(v, 1) for k, v in seconds.items()},
                              "wheels": len(wheels), "wheel_bytes": sum(w.stat().st_size for w in wheels),
                              "packages": len(packages), "package_bytes": size}, indent=1))
        elif args.cmd == "lock":
            reqs = args.require or ["cudf-cu12", "dask-cudf-cu12", "dask-cuda", "cuml-cu12"]
            start = time.monotonic()
            with tempfile.TemporaryDirectory() as tmp:
                path = lock_against(args.channel.resolve(), reqs, args.project or Path(tmp))
                packages = next(line for line in path.read_text().splitlines() if line.startswith("# packages:"))
                print(f"{path if args.project else 'lock'}: {packages[2:]}, solved in {time.monotonic() - start:.1f} s")
        else:
            sys.path.insert(0, str(ROOT / "tests"))
            from support.channel_server import serve

            with serve(args.channel.resolve().parent) as (port, _):
                print(f"http://127.0.0.1:{port}/{args.channel.name}", flush=True)
                while True:
                    time.sleep(3600)
    except ChannelError as err:
        print(f"conda_channel: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        said = (err.stderr or b"").decode(errors="replace").strip()[-500:] if isinstance(err.stderr, bytes) else ""
        print(f"conda_channel: {' '.join(map(str, err.cmd[:4]))} ... failed (exit {err.returncode}) {said}".rstrip(),
              file=sys.stderr)
        return 2
    except RapidshipError as err:
        print(f"conda_channel: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
