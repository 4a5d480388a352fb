"""The runtime base's layers: one per Debian package, or per group of small ones, and the dpkg state.

A Debian security update replaces one package's files and rewrites dpkg's state. With the rootfs in
one layer, a delta disc re-ships the whole base for it (about 300 times the package's own bytes for
zlib1g); with a layer per package it ships that package's layer and the state layer.

Which package a file is: dpkg's own lists (var/lib/dpkg/info/<package>[:<arch>].list), read the
way dpkg wrote them (paths as packaged, e.g. /bin/bash, found in a merged-/usr tree through its
/bin -> usr/bin link). A package's dpkg info files go with it. The rest (dpkg's status, files made
by maintainer scripts, such as /etc/passwd, the merged-/usr links) and every directory go to the
state layer, last. Bytecode made at install goes with its source. A layer also holds its files' parent directories, with the same headers as in
the state layer, so the layers together are the rootfs entry for entry. A hard-linked group stays
in the layer of its first name.

Packages of more than GROUP_BYTES lie alone, the others are grouped in name order up to that, and
the limit doubles until the base fits BUDGET layers (the env's own budget leaves room for it:
render/layer_plan.MOST_BUDGET). Pure: `plan_base_layers(members, lists)`.
"""

from __future__ import annotations

import posixpath
import re
import tarfile
from dataclasses import dataclass

BUDGET = 26
RUNTIME_BUDGET = 8  # the runtime's own apt-get step, split the same way (imagebuild/normalise.py)
GROUP_BYTES = 4 << 20  # a group's patch re-ships about 1-1.5 MB of zstd: within the goal's 2 MB
STATE = "dpkg-state"
_INFO = re.compile(r"^var/lib/dpkg/info/([^/:]+)(?::[^/.]+)?\.[^/]+$")
MERGED_USR = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}  # links to usr/<name> on a merged-/usr system
_PYC = re.compile(r"^(.*)/__pycache__/([^/]+?)\.cpython-\d+(?:\.opt-\d)?\.pyc$")
DPKG_LIST = re.compile(r"^var/lib/dpkg/info/([^/:]+)(?::[^/.]+)?\.list$")


@dataclass(frozen=True)
class BaseLayer:
    name: str                    # a package, "packages-<first>..<last>", or STATE
    packages: tuple[str, ...]
    members: tuple[tarfile.TarInfo, ...]  # in rootfs order: parent directories, then the files

    @property
    def bytes(self) -> int:
        return sum(m.size for m in self.members if m.isfile())

    def to_json(self) -> dict:
        return {"name": self.name, "packages": list(self.packages), "bytes": self.bytes, "entries": len(self.members)}


def norm_path(name: str) -> str:
    return posixpath.normpath("/" + name).lstrip("/")


def resolve(path: str, links: dict[str, str]) -> str:
    """Pure: a path as dpkg listed it -> the member that holds it, its parent folders' links followed
    (the last component is the entry itself: a listed link is that link)."""
    parts, out, hops = norm_path(path).split("/"), "", 0
    for i, part in enumerate(parts):
        step = f"{out}/{part}" if out else part
        if i < len(parts) - 1 and step in links and hops < 16:  # a parent that is a link: go where it points
            target = links[step]
            out = norm_path(target if target.startswith("/") else posixpath.join(posixpath.dirname(step), target))
            hops += 1
        else:
            out = step
    return out


def owners(by_name: dict[str, tarfile.TarInfo], lists: dict[str, str]) -> dict[str, str]:
    """Pure: member name (normalised) -> its package, from each package's dpkg list (the first
    package in name order that lists a file wins; folders as packaged belong to none, even where
    merged /usr made them links)."""
    links = {name: m.linkname for name, m in by_name.items() if m.issym()}
    owned: dict[str, str] = {}
    for package in sorted(lists):
        listed = [line.strip() for line in lists[package].splitlines() if line.strip() not in ("", "/.")]
        folders = {posixpath.dirname(line) for line in listed}  # a folder as packaged (merged /usr: a link now)
        for line in listed:
            if line in folders:
                continue
            name = resolve(line, links)
            if name not in by_name and name.split("/")[0] in MERGED_USR:  # the link is in a layer below
                name = "usr/" + name
            member = by_name.get(name)
            if member is not None and not member.isdir():
                owned.setdefault(name, package)
    for name in by_name:
        info = _INFO.match(name)
        if info and not by_name[name].isdir():
            owned.setdefault(name, info.group(1))
        compiled = _PYC.match(name)  # bytecode made at install (py3compile): its source's package
        if compiled and f"{compiled.group(1)}/{compiled.group(2)}.py" in owned:
            owned.setdefault(name, owned[f"{compiled.group(1)}/{compiled.group(2)}.py"])
    return owned


def _groups(sizes: dict[str, int], limit: int) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    small: list[str] = []
    for package in sorted(sizes):
        if sizes[package] > limit:
            out.append((package,))
            continue
        if small and sum(sizes[p] for p in small) + sizes[package] > limit:
            out.append(tuple(small))
            small = []
        small.append(package)
    return out + ([tuple(small)] if small else [])


def plan_base_layers(members: list[tarfile.TarInfo], lists: dict[str, str], budget: int = BUDGET) -> list[BaseLayer]:
    """Pure: the rootfs's members (dpkg lists by package) -> its layers in order, at most `budget`."""
    by_name = {norm_path(m.name): m for m in members if norm_path(m.name)}
    owned = owners(by_name, lists)
    # a hard-linked group goes where its first name goes
    for name, m in sorted(by_name.items()):
        if m.islnk() and norm_path(m.linkname) in by_name:
            first = norm_path(m.linkname)
            if first in owned:
                owned[name] = owned[first]
            else:
                owned.pop(name, None)
    sizes: dict[str, int] = {}
    for name, package in owned.items():
        sizes[package] = sizes.get(package, 0) + by_name[name].size
    limit = GROUP_BYTES
    while len(groups := _groups(sizes, limit)) + 1 > budget:
        limit *= 2
    layer_of = {package: i for i, group in enumerate(groups) for package in group}
    files: list[list[str]] = [[] for _ in groups]
    for name, package in owned.items():
        files[layer_of[package]].append(name)
    layers = []
    for group, names in zip(groups, files):
        parents = {posixpath.dirname(n) for n in names}
        folders = {p for d in parents for p in _ancestors(d)}
        kept = sorted(folders | set(names), key=lambda n: n.split("/"))
        label = group[0] if len(group) == 1 else f"packages-{group[0]}..{group[-1]}"
        layers.append(BaseLayer(label, group, tuple(by_name[n] for n in kept if n in by_name)))
    state = sorted((n for n in by_name if n not in owned), key=lambda n: n.split("/"))
    return layers + [BaseLayer(STATE, (), tuple(by_name[n] for n in state))]


def _ancestors(folder: str) -> list[str]:
    out = []
    while folder:
        out.append(folder)
        folder = posixpath.dirname(folder)
    return out


def dpkg_lists(tar: tarfile.TarFile, members: list[tarfile.TarInfo]) -> dict[str, str]:
    """Edge: each package's dpkg list, read from the rootfs tar."""
    out = {}
    for m in members:
        found = DPKG_LIST.match(norm_path(m.name))
        if found and m.isfile():
            data = tar.extractfile(m)
            out[found.group(1)] = data.read().decode("utf-8", "surrogateescape") if data else ""
    return out
