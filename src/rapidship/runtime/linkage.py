"""Every ELF file's NEEDED libraries, looked up as the dynamic loader looks them up, in this filesystem.

Run inside an image (`PYTHONPATH=/opt/rapidship python -m rapids_runtime.linkage`), so it reads the
image as a container of it sees it, on whichever arch (under qemu too). Per NEEDED name:
  - linked: found where the loader searches (DT_RPATH when there is no DT_RUNPATH, then
    LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.conf and the default dirs; $ORIGIN expanded);
  - elsewhere: not on that path but in the image under that name (RAPIDS wheels load their
    dependencies first with ctypes, so the loader finds them already mapped);
  - allowed: absent, but the host's driver brings it in (libcuda.so.1, libnvidia-ml.so.1);
  - missing: absent: the file cannot load here.
A file built for another machine than this one (an x86-64 library in an arm64 image: what a
cross-install that picked the wrong wheel ships) is listed too. Exit 1 on either. Standard library only.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import struct
import sys

MACHINES = {"x86_64": 62, "aarch64": 183}  # e_machine: EM_X86_64, EM_AARCH64
DRIVER_LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")  # mounted from the host by the NVIDIA container runtime
DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_RPATH, DT_RUNPATH = 1, 5, 10, 15, 29
PT_LOAD, PT_DYNAMIC = 1, 2
SKIP = ("/proc", "/sys", "/dev")


def read_elf(path: str) -> dict | None:
    """{machine, needed, rpath, runpath} of a 64-bit little-endian ELF object, or None for anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            etype, machine = struct.unpack_from("<HH", head, 16)
            if etype not in (2, 3):  # executables and shared objects; relocatable .o files are never loaded
                return None
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            phdrs = [struct.unpack_from("<IIQQQQQQ", table, i * phentsize) for i in range(phnum)]
            dynamic = next((p for p in phdrs if p[0] == PT_DYNAMIC), None)
            out = {"machine": machine, "needed": [], "rpath": [], "runpath": []}
            if dynamic is None:
                return out  # static: needs nothing
            f.seek(dynamic[2])
            raw = f.read(dynamic[5])
            entries = [struct.unpack_from("<qQ", raw, i) for i in range(0, len(raw) - 15, 16)]
            strtab = next((v for t, v in entries if t == DT_STRTAB), None)
            strsz = next((v for t, v in entries if t == DT_STRSZ), 0)
            load = next((p for p in phdrs if p[0] == PT_LOAD and p[3] <= (strtab or -1) < p[3] + p[5]), None)
            if strtab is None or load is None:
                return out
            f.seek(strtab - load[3] + load[2])
            strings = f.read(strsz)
    except (OSError, struct.error):
        return None

    def text(at: int) -> str:
        return strings[at:strings.find(b"\0", at)].decode("utf-8", "replace")

    for tag, value in entries:
        if tag == DT_NEEDED:
            out["needed"].append(text(value))
        elif tag in (DT_RPATH, DT_RUNPATH):
            out["rpath" if tag == DT_RPATH else "runpath"] += [d for d in text(value).split(":") if d]
    return out


def conf_dirs(root: str, conf: str = "/etc/ld.so.conf", seen: set | None = None) -> list[str]:
    """The dirs /etc/ld.so.conf names, following `include` globs."""
    seen = seen if seen is not None else set()
    if conf in seen:
        return []
    seen.add(conf)
    try:
        lines = open(root.rstrip("/") + conf).read().splitlines()
    except OSError:
        return []
    out = []
    for line in (ln.split("#")[0].strip() for ln in lines):
        if line.startswith("include "):
            for inc in sorted(glob.glob(root.rstrip("/") + line.split(None, 1)[1])):
                out += conf_dirs(root, inc[len(root.rstrip("/")):], seen)
        elif line.startswith("/"):
            out.append(line)
    return out


def default_dirs(machine: str) -> list[str]:
    triplet = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}.get(machine, machine + "-linux-gnu")
    return [f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib", "/lib64", "/usr/lib64"]


def walk(root: str) -> tuple[list[str], dict[str, str]]:
    """(ELF candidates: regular files, as in-image paths; every name in the image -> one path having it)."""
    files, names = [], {}
    base = root.rstrip("/")
    for here, dirs, entries in os.walk(root):
        rel = here[len(base):] or "/"
        dirs[:] = [d for d in dirs if os.path.join(rel, d) not in SKIP]
        for name in entries:
            path = os.path.join(rel, name)
            names.setdefault(name, path)
            if os.path.isfile(base + path) and not os.path.islink(base + path):
                files.append(path)
    return files, names


def check(root: str = "/", machine: str | None = None, allowed: tuple[str, ...] = DRIVER_LIBS,
          ld_library_path: str = "") -> dict:
    """The linkage report of the filesystem at `root` for `machine` (this one's by default)."""
    machine = machine or platform.machine()
    base = root.rstrip("/")
    files, names = walk(root)
    search = conf_dirs(root) + default_dirs(machine)
    env_dirs = [d for d in ld_library_path.split(":") if d]
    report = {"machine": machine, "elf_files": 0, "wrong_machine": [], "needed": 0, "linked": 0, "elsewhere": {},
              "allowed": {}, "missing": {}}
    for path in sorted(files):
        info = read_elf(base + path)
        if info is None:
            continue
        report["elf_files"] += 1
        if info["machine"] != MACHINES.get(machine):
            report["wrong_machine"].append(path)
            continue
        origin = os.path.dirname(os.path.realpath(base + path))[len(base):] or "/"

        def expand(d: str) -> str:
            return d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)

        dirs = ([] if info["runpath"] else [expand(d) for d in info["rpath"]]) + env_dirs + \
            [expand(d) for d in info["runpath"]] + search
        for lib in info["needed"]:
            report["needed"] += 1
            if "/" in lib or any(os.path.exists(base + os.path.normpath(os.path.join(d, lib))) for d in dirs):
                report["linked"] += 1
                continue
            kind = "elsewhere" if lib in names else "allowed" if lib in allowed else "missing"
            users = report[kind].setdefault(lib, [])
            users.append(path)
    for kind in ("elsewhere", "allowed", "missing"):
        report[kind] = {lib: {"count": len(users), "first": users[:3]} for lib, users in sorted(report[kind].items())}
    return report


def ok(report: dict) -> bool:
    return not report["missing"] and not report["wrong_machine"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rapids_runtime.linkage", description=__doc__.split("\n")[0])
    parser.add_argument("--root", default="/", help="the filesystem to read (default: this container's)")
    parser.add_argument("--machine", choices=sorted(MACHINES), help="the machine its files must be for (default: this one)")
    parser.add_argument("--allow", action="append", default=list(DRIVER_LIBS), metavar="SONAME",
                        help="a library the host brings in (default: libcuda.so.1, libnvidia-ml.so.1)")
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    args = parser.parse_args(argv)
    report = check(args.root, args.machine, tuple(args.allow), os.environ.get("LD_LIBRARY_PATH", ""))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['elf_files']} ELF files for {report['machine']}: {report['needed']} NEEDED entries, "
              f"{report['linked']} on the loader's path, {sum(v['count'] for v in report['elsewhere'].values())} "
              f"loaded first by their package, {sum(v['count'] for v in report['allowed'].values())} from the driver")
        for kind, word in (("allowed", "from the host's driver"), ("missing", "MISSING")):
            for lib, seen in report[kind].items():
                print(f"  {word}: {lib} (needed by {seen['count']}, e.g. {seen['first'][0]})")
        for path in report["wrong_machine"][:20]:
            print(f"  WRONG MACHINE: {path} is not an {report['machine']} file")
    return 0 if ok(report) else 1


if __name__ == "__main__":
    sys.exit(main())
