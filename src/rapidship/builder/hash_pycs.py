"""Rewrite the timestamp .pyc files under the given folders as unchecked-hash ones (stdlib only).

Debian's py3compile (run when python3.X is installed) writes bytecode that is valid only while its
source keeps the mtime it had; rapidship's normaliser gives every file of a rebuilt layer one fixed
time, so that bytecode would be compiled again, and never saved (the image is read-only to its
user), at every start. An unchecked-hash .pyc is used whatever its source's time. Only .pyc files
already there, of this interpreter, are rewritten: the packages chose what to compile.

    python3.11 hash_pycs.py /usr/lib/python3.11 /usr/lib/python3/dist-packages
"""

from __future__ import annotations

import importlib.util
import py_compile
import sys
from pathlib import Path


def optimization(pyc: Path) -> int:
    """0, 1 or 2 from the name (`mod.cpython-311.opt-1.pyc`)."""
    parts = pyc.name.split(".")
    return int(parts[-2][4:]) if len(parts) > 3 and parts[-2].startswith("opt-") else 0


def rewrite(roots: list[str]) -> int:
    done = 0
    tag = sys.implementation.cache_tag
    for root in roots:
        for pyc in sorted(Path(root).rglob(f"__pycache__/*.{tag}*.pyc")):
            if int.from_bytes(pyc.read_bytes()[4:8], "little") != 0:
                continue  # already hash-based
            source = Path(importlib.util.source_from_cache(str(pyc)))
            if source.is_file():
                py_compile.compile(str(source), cfile=str(pyc), doraise=True, optimize=optimization(pyc),
                                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
                done += 1
    return done


if __name__ == "__main__":
    print(f"hash_pycs: {rewrite(sys.argv[1:])} timestamp .pyc files rewritten as unchecked-hash")
