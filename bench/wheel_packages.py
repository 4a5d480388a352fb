"""A wheel -> one `.conda` package, laid out as conda lays out Python packages (pure wheels as
`noarch: python`, compiled ones under the prefix for their Linux subdir), `depends` from
Requires-Dist. Used by bench/conda_channel.py."""

from __future__ import annotations

import base64
import email.parser
import hashlib
import os
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bench.conda_package import PLACEHOLDER, PYTHON, SUBDIRS, ARCHES, EPOCH, ChannelError, Package, write_conda

SITE = f"lib/python{PYTHON}/site-packages"
PYTHON_DEP = f"python >={PYTHON},<3.12.0a0"


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
