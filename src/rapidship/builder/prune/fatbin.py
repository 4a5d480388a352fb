"""CUDA fatbin containers: read them, choose the device code a GPU fleet runs, write them smaller.

A `.nv_fatbin` section is a run of containers (16-byte header `<IHHQ`: magic, version, header
size, payload size), each a run of entries (`<HHIQ`: kind, version, header size, padded payload
size; the SM number at byte 28, flags at byte 40). Kind 1 is PTX, kind 2 a cubin (SASS), kind 8
LTO-IR (NVVM IR that nvJitLink links at run time, as cuFFT does for its callbacks; only read where a
caller allows it, `lto=True`, and then kept like PTX: it serves that arch and every later one).

Which code runs where (CUDA's rules): a cubin for sm_XY runs on a GPU of the same major with minor
>= Y; an arch-specific cubin (sm_90a, flag bit 20) only on exactly that GPU; PTX is compiled by the
driver for its own or any later GPU, and only used when no cubin runs. For every listed GPU the
pruner keeps what the driver would pick there, so on the fleet nothing changes; all else goes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .cuda_rule import code_runs_on

MAGIC = 0xBA55ED50
CONTAINER = struct.Struct("<IHHQ")
ENTRY = struct.Struct("<HHIQ")
KIND_PTX, KIND_CUBIN, KIND_LTOIR = 1, 2, 8
ARCH_SPECIFIC = 1 << 20   # sm_90a, sm_100a: runs only on that exact architecture (cuobjdump agrees)
ENTRY_MIN_HEADER = 48     # enough for the SM number (28) and the flags (40)

# CUDA compute capabilities, as major*10 + minor (also the `gpu_archs` of variants.yaml).
KNOWN_ARCHS = frozenset({50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110,
                         120, 121})


class FatbinError(ValueError):
    """The section does not parse as fatbin containers: the file is left untouched."""


@dataclass(frozen=True)
class Entry:
    offset: int   # within the section
    size: int     # header + padded payload
    kind: int
    arch: int
    flags: int

    @property
    def specific(self) -> bool:
        return bool(self.flags & ARCH_SPECIFIC)

    @property
    def label(self) -> str:
        base = f"sm_{self.arch}{'a' if self.specific else ''}"
        if self.kind == KIND_LTOIR:
            return f"lto_{self.arch}"
        return base if self.kind == KIND_CUBIN else f"ptx_{self.arch}"


@dataclass(frozen=True)
class Container:
    offset: int        # within the section
    header_size: int
    size: int          # header + payload
    entries: tuple[Entry, ...]


def parse_section(data, base: int = 0, length: int | None = None) -> tuple[list[Container], int]:
    """Containers of one section (data[base:base+length]); returns them and the count of zero padding
    bytes between them. Any non-zero byte outside a container is an error."""
    end = base + (len(data) - base if length is None else length)
    pos, padding, out = base, 0, []
    while pos < end:
        if end - pos < CONTAINER.size or CONTAINER.unpack_from(data, pos)[0] != MAGIC:
            skip = _zero_run(data, pos, end)
            if skip == 0:
                raise FatbinError(f"no fatbin container at section offset {pos - base:#x}")
            pos += skip
            padding += skip
            continue
        out.append(_container(data, pos, end, base))
        pos += out[-1].size
    return out, padding


def _zero_run(data, pos: int, end: int) -> int:
    """Length of the run of zero bytes at pos, up to the next 8-byte boundary or the end."""
    stop = min(end, (pos // 8 + 1) * 8)
    run = bytes(data[pos:stop])
    return len(run) if not any(run) else 0


def _container(data, pos: int, end: int, base: int, lto: bool = False) -> Container:
    _magic, _version, header_size, payload = CONTAINER.unpack_from(data, pos)
    if header_size < CONTAINER.size or pos + header_size + payload > end:
        raise FatbinError(f"container at {pos - base:#x} runs past the section")
    entries, cursor, stop = [], pos + header_size, pos + header_size + payload
    while cursor < stop:
        if stop - cursor < ENTRY_MIN_HEADER:
            raise FatbinError(f"truncated entry header at {cursor - base:#x}")
        kind, _ver, ehsize, padded = ENTRY.unpack_from(data, cursor)
        if ehsize < ENTRY_MIN_HEADER or cursor + ehsize + padded > stop:
            raise FatbinError(f"entry at {cursor - base:#x} runs past its container")
        if kind not in (KIND_PTX, KIND_CUBIN) and not (lto and kind == KIND_LTOIR):
            raise FatbinError(f"entry at {cursor - base:#x} has unknown kind {kind}")
        arch = struct.unpack_from("<I", data, cursor + 28)[0]
        flags = struct.unpack_from("<Q", data, cursor + 40)[0]
        entries.append(Entry(cursor - base, ehsize + padded, kind, arch, flags))
        cursor += ehsize + padded
    return Container(pos - base, header_size, header_size + payload, tuple(entries))


def runs_on(entry: Entry, gpu: int) -> bool:
    """CUDA's compatibility rule (cuda_rule.py) for one entry on a GPU of compute capability `gpu` (e.g. 89);
    LTO-IR follows PTX's rule (nvJitLink compiles it for its own arch or any later one)."""
    return code_runs_on(entry.arch, gpu, ptx=entry.kind in (KIND_PTX, KIND_LTOIR), specific=entry.specific)


def serves(container: Container, keep: tuple[int, ...]) -> bool:
    """Does anything in the container run on a listed GPU (cubin, PTX or LTO-IR)?"""
    return any(runs_on(e, gpu) for e in container.entries for gpu in keep)


def chosen_for(container: Container, gpu: int) -> tuple[Entry, ...]:
    """What the driver loads on `gpu`: the closest cubin that runs there (all entries of that arch),
    else the newest PTX it can compile. Empty when nothing in the container runs there."""
    cubins = [e for e in container.entries if e.kind == KIND_CUBIN and runs_on(e, gpu)]
    if cubins:
        best = max(e.arch for e in cubins)
        return tuple(e for e in cubins if e.arch == best)
    ptx = [e for e in container.entries if e.kind == KIND_PTX and runs_on(e, gpu)]
    if ptx:
        best = max(e.arch for e in ptx)
        return tuple(e for e in ptx if e.arch == best)
    return ()


def select(container: Container, keep: tuple[int, ...]) -> tuple[Entry, ...]:
    """Entries to keep, in their original order. A container with nothing for any listed GPU (a
    Blackwell-only kernel set in cuBLASLt, say) keeps none: its header alone stays, registered as
    before. On an H200 cuBLASLt's GEMMs (fp32, fp16, bf16; lazy and eager module loading) were
    bit-identical with such containers emptied (docs/measurements/gpu-forms-2026-12-02)."""
    wanted = {e.offset for gpu in keep for e in chosen_for(container, gpu)}
    return tuple(e for e in container.entries if e.offset in wanted)


def needed(container: Container, keep: tuple[int, ...]) -> tuple[Entry, ...]:
    """Entries some listed GPU uses, in their original order: what the driver picks (select) and
    LTO-IR a listed GPU can link (nvJitLink, not the driver, reads LTO-IR: cuSPARSE's SpMMOp)."""
    chosen = {e.offset for e in select(container, keep)}
    return tuple(e for e in container.entries
                 if (any(runs_on(e, gpu) for gpu in keep) if e.kind == KIND_LTOIR else e.offset in chosen))


def write_container(data, base: int, container: Container, kept: tuple[Entry, ...]) -> bytes:
    """The container with only `kept` entries: original header bytes with the payload size fixed,
    then the kept entries byte for byte."""
    start = base + container.offset
    header = bytearray(data[start:start + container.header_size])
    payload = sum(e.size for e in kept)
    struct.pack_into("<Q", header, 8, payload)
    return bytes(header) + b"".join(bytes(data[base + e.offset:base + e.offset + e.size]) for e in kept)


def arch_bytes(containers: list[Container]) -> dict[str, int]:
    """Bytes of device code by label (sm_80, sm_90a, ptx_120, ...)."""
    out: dict[str, int] = {}
    for c in containers:
        for e in c.entries:
            out[e.label] = out.get(e.label, 0) + e.size
    return dict(sorted(out.items(), key=lambda kv: (_label_key(kv[0]))))


def _label_key(label: str) -> tuple[int, str]:
    digits = "".join(ch for ch in label.split("_", 1)[1] if ch.isdigit())
    return int(digits or 0), label


def parse_keep(text: str) -> tuple[int, ...]:
    """'80,90' -> (80, 90); ValueError with the reason for anything else."""
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise ValueError("no architectures given")
    archs = []
    for item in items:
        item = item.removeprefix("sm_")
        if not item.isdigit() or int(item) not in KNOWN_ARCHS:
            raise ValueError(f"{item!r} is not a CUDA compute capability like 80 or 90 (known: "
                             f"{', '.join(str(a) for a in sorted(KNOWN_ARCHS))})")
        archs.append(int(item))
    if len(set(archs)) != len(archs):
        raise ValueError("an architecture is listed twice")
    return tuple(sorted(archs))
