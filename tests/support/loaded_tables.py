"""How the dynamic loader reads each library's program header table, run where the libraries live
(stdlib only, so it runs inside an image, under qemu for the other arch):

    python loaded_tables.py [--import cudf,cuml] [--record /opt/rapidship/prune.json --root /opt/rapids] [LIB ...]

For each library: `ld.so --list` (what `ldd` runs) with every library folder under the roots on
its path, and, loaded with ctypes, the table dl_iterate_phdr hands out (what the C++ unwinder and
debuggers read) against the table in the file. Prints JSON {path: {"listed": exit status,
"said": loader messages, "same_in_memory": bool}}.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import struct
import subprocess

FIELDS = ("type", "flags", "offset", "vaddr", "paddr", "filesz", "memsz", "align")


class Phdr(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in FIELDS[:2]] + [(n, ctypes.c_uint64) for n in FIELDS[2:]]


class Info(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_uint64), ("name", ctypes.c_char_p), ("phdr", ctypes.POINTER(Phdr)),
                ("phnum", ctypes.c_uint16)]


def in_file(path: str) -> list[tuple]:
    with open(path, "rb") as f:
        head = f.read(64)
        phoff, = struct.unpack_from("<Q", head, 32)
        phnum, = struct.unpack_from("<H", head, 56)
        f.seek(phoff)
        raw = f.read(phnum * 56)
    return [struct.unpack_from("<IIQQQQQQ", raw, i * 56) for i in range(phnum)]


def in_memory(paths: list[str]) -> dict[str, list[tuple]]:
    """The tables by path; one file under several names (links) is loaded once, so by inode."""
    seen: dict[tuple[int, int], list[tuple]] = {}

    def each(info, _size, _data):
        name = (info.contents.name or b"").decode()
        if name and os.path.exists(name):
            seen[_inode(name)] = [tuple(getattr(info.contents.phdr[i], f) for f in FIELDS)
                                  for i in range(info.contents.phnum)]
        return 0

    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Info), ctypes.c_size_t, ctypes.c_void_p)(each)
    ctypes.CDLL(None).dl_iterate_phdr(callback, None)
    return {p: seen[_inode(p)] for p in paths if _inode(p) in seen}


def _inode(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def listed(path: str, library_path: str) -> tuple[int, list[str]]:
    loader = (glob.glob("/lib64/ld-linux-*.so.*") + glob.glob("/lib/ld-linux-*.so.*"))[0]
    run = subprocess.run([loader, "--library-path", library_path, "--list", path], capture_output=True, text=True)
    said = [line.strip() for line in (run.stdout + run.stderr).splitlines()
            if "not found" in line or "Inconsistency" in line or "error" in line]
    return run.returncode, said


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--import", dest="modules", default="")
    args.add_argument("--record")
    args.add_argument("--root", default="")
    args.add_argument("libs", nargs="*")
    opts = args.parse_args()
    libs = list(opts.libs)
    if opts.record:
        with open(opts.record) as f:
            libs += [os.path.join(opts.root, e["path"]) for e in json.load(f)["files"] if e["status"] == "pruned"]
    roots = [opts.root] if opts.root else sorted({os.path.dirname(p) for p in libs})
    folders = sorted({d for r in roots for d, _, names in os.walk(r) if any(".so" in n for n in names)})
    for module in filter(None, opts.modules.split(",")):
        __import__(module)   # their loaders put libraries others need by soname in place
    for lib in libs:
        ctypes.CDLL(lib)
    memory = in_memory(libs)
    out = {}
    for lib in libs:
        status, said = listed(lib, ":".join(folders))
        out[lib] = {"listed": status, "said": said, "same_in_memory": memory.get(lib) == in_file(lib)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
