"""Every fatbin container an env's ELF files hold, wherever it lies, and what of it no listed GPU runs.

The pruner rewrites the sections it can prove; the census counts all of them after it ran:
`.nv_fatbin`, NCCL's `__nv_relfatbin`, and containers found in any other loaded data section
(cuBLASLt's `.cask_resource`, cuSPARSE's `.rodata`, cuFFT's `.data`), so the record says how much
code for other GPUs is left, where, and why. Byte-identical copies (a wheel's soname "links",
vendored twins) are counted once, their other names listed. Stdlib only: it runs in the builder.
"""

from __future__ import annotations

import hashlib
import mmap
from collections import defaultdict
from pathlib import Path

from . import inplace
from . import elf as E
from . import fatbin as F

# Why code for other GPUs stays, by where it lies and what the pruner did with the file.
WHY_LEADING = "leading containers the library reaches by address keep their place and bytes (docs/prune.md)"
WHY_IN_PLACE = ("containers in the library's own data are dropped only whole, when no listed GPU uses any of "
                "their entries and they lie in a run worth a program header (64 KiB or more)")


def containers(data) -> dict[str, list[F.Container]]:
    """Section name -> the containers in it, for every section that holds any."""
    elf = E.parse(data)
    out = inplace.wrapped(elf, data)
    for held in inplace.find(elf, data):
        out.setdefault(held.section.name, []).append(held.container)
    return out


def for_no_listed_gpu(found: list[F.Container], keep: tuple[int, ...]) -> dict[str, int]:
    """Bytes by label of the entries no listed GPU loads: what the driver would not pick on any of
    them (cubins of other generations, PTX beside a cubin that runs, PTX newer than every listed
    GPU), and LTO-IR no listed GPU can link (nvJitLink, not the driver, reads LTO-IR)."""
    out: dict[str, int] = {}
    for c in found:
        used = {e.offset for e in F.needed(c, keep)}
        for e in c.entries:
            if e.offset not in used:
                out[e.label] = out.get(e.label, 0) + e.size
    return dict(sorted(out.items(), key=lambda kv: F._label_key(kv[0])))


def why(section: str, entry: dict | None) -> str:
    """Why code no listed GPU loads stays in this section of a file, from the file's prune entry."""
    if entry and entry.get("status") == "refused":
        return f"file left whole: {entry.get('reason', '')}"
    noted = [n for n in (entry or {}).get("notes", []) if n.startswith(f"containers in {section}") and "left whole" in n]
    if noted:
        return noted[0]
    if entry and entry.get("status") != "pruned":
        return entry.get("reason") or "not pruned"
    if section not in inplace.WRAPPED:
        return WHY_IN_PLACE
    if entry and str(entry.get("layout", "")).startswith("containers in place"):   # only the store was cut
        return "device code too small to shrink"
    return WHY_LEADING


def _groups(paths: list[Path]) -> list[list[Path]]:
    """Paths grouped by identical content (only equal sizes are hashed)."""
    by_size: dict[int, list[Path]] = defaultdict(list)
    for p in paths:
        by_size[p.stat().st_size].append(p)
    groups: list[list[Path]] = []
    for same in by_size.values():
        if len(same) == 1:
            groups.append(same)
            continue
        by_hash: dict[str, list[Path]] = defaultdict(list)
        for p in same:
            digest = hashlib.sha256()
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
            by_hash[digest.hexdigest()].append(p)
        groups.extend(by_hash.values())
    return groups


def census(files: list[tuple[Path, str]], keep: tuple[int, ...], entries: dict[str, dict] | None = None) -> dict:
    """files: (path, name the record shows); entries: the prune record's entries by that name.
    The record's `census` part: totals and, per distinct file with code no listed GPU runs, each
    section's bytes of it by label and why it stays."""
    names = {p: name for p, name in files}
    entries = entries or {}
    total = other = with_code = copies = 0
    arch: dict[str, int] = defaultdict(int)
    left = []
    for group in _groups([p for p, _ in files]):
        first = min(group, key=lambda p: names[p])
        if not first.stat().st_size:
            continue
        with open(first, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            try:
                found = containers(data)
            except E.ElfError:
                continue
        if not found:
            continue
        with_code += 1
        copies += len(group) - 1
        sections = {}
        for section, held in found.items():
            total += sum(c.size for c in held)
            gone = for_no_listed_gpu(held, keep)
            for label, n in gone.items():
                arch[label] += n
            if gone:
                other += sum(gone.values())
                sections[section] = {"bytes": sum(gone.values()), "by_arch": gone,
                                     "why": why(section, entries.get(names[first]))}
        if sections:
            left.append({"path": names[first], "copies": sorted(names[p] for p in group if p != first),
                         "bytes": sum(s["bytes"] for s in sections.values()), "sections": sections})
    left.sort(key=lambda f: -f["bytes"])
    return {"files_with_device_code": with_code, "copies_counted_once": copies, "container_bytes": total,
            "for_no_listed_gpu_bytes": other,
            "for_no_listed_gpu_by_arch": dict(sorted(arch.items(), key=lambda kv: F._label_key(kv[0]))),
            "left": left}
