"""One `.conda` package written from a folder of files (the v2 format: a stored zip of
metadata.json, pkg-*.tar.zst and info-*.tar.zst), with its info/ (index, paths with sha256 and
sizes, files, about, has_prefix, link) and the same bytes for the same inputs. Used by
bench/conda_channel.py."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

PYTHON = "3.11"
# conda-build pads its host prefix the same way: longer than any install prefix.
PLACEHOLDER = "/opt/conda-bld/wheels_1767225600/_h_env_placehold_placehold_placehold_placehold_placehold_placehold_pl"
# One time for every member, index.json and zip entry: the same inputs make the same bytes.
EPOCH = 1767225600  # 2026-01-01T00:00:00Z
SUBDIRS = {"x86_64": "linux-64", "aarch64": "linux-aarch64"}
ARCHES = {"amd64": "x86_64", "arm64": "aarch64"}


class ChannelError(Exception):
    """One clear line: what is wrong and with which file."""


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


def members(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_symlink() or p.is_file())


def write_info(pkg: Package) -> list[str]:
    """info/{index,paths,files,about,link}.json and has_prefix; return the package's file paths."""
    files = [p for p in members(pkg.root) if not p.startswith("info/")]
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
    info = sorted(p for p in members(pkg.root) if p.startswith("info/"))
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
