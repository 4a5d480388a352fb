"""Device code kept in a library's own data, loaded by its code by address: pruned where it lies.

libcufft keeps 24,453 one-entry containers in `.ldata` (x86_64) or `.data` (aarch64), one per
kernel and architecture, with no wrapper and no relocation per container: its own code picks the
container for the GPU. They cannot move, so only whole containers that nothing on a listed GPU can
run (cubins of other generations; PTX and LTO-IR serve every later GPU and always stay) are
dropped, and only where they lie in runs worth a program header: each run becomes zero-filled
memory that takes no file bytes, as .bss does.

The run's loaded segment is split around it: the piece before keeps its file bytes and its memory
size reaches over the run (the loader zero-fills it), the piece after maps the following bytes at
their old addresses. Every address keeps its bytes except the dropped containers', which read as
zeros. The section holding a run is described by its first piece plus, appended to the section
table, a NOBITS piece per run and a PROGBITS piece after it (no section index changes, so symbols
and links stay valid). `prove(old, new, keep)` checks exactly that from the two files alone.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from dataclasses import dataclass, replace

from . import elf as E
from . import fatbin as F
from .core import FATBIN, RELFATBIN, Refused

SHT_PROGBITS = 1
SHF_EXECINSTR = 0x4
MIN_RUN = E.GRANULE   # a run saves whole granules; each costs one program header (56 bytes, one mmap)
EHDR_PHOFF, EHDR_SHOFF, EHDR_PHNUM, EHDR_SHNUM = 32, 40, 56, 60
_MAGIC = struct.pack("<I", F.MAGIC)
WRAPPED = (FATBIN, RELFATBIN)   # sections of containers the wrappers register


@dataclass(frozen=True)
class Held:
    """A container found in a data section."""
    section: E.Section
    container: F.Container

    @property
    def start(self) -> int:
        return self.section.addr + self.container.offset

    @property
    def end(self) -> int:
        return self.start + self.container.size


@dataclass(frozen=True)
class Run:
    start: int     # address of the first dropped byte
    end: int       # address after the last
    tail: int      # granule boundary (<= end) where file bytes are mapped again
    delta: int     # file bytes removed (a multiple of GRANULE)
    section: E.Section
    count: int     # containers in it


@dataclass
class Plan:
    runs: list[Run]
    segments: tuple[E.Segment, ...]
    sections: tuple[E.Section, ...]
    phoff: int
    cuts: list[tuple[int, int]]    # old file offsets [start, end) that go
    zeros: list[tuple[int, int]]   # old file offsets [start, end) written as zeros
    old_table: tuple[int, int]     # the old section header table [start, end): zeroed, it moves
    containers: int
    without_fleet_code: int
    dropped: list[Held]
    arch_before: dict[str, int]
    arch_after: dict[str, int]
    layout: str
    notes: list[str]


def find(elf: E.Elf, data) -> list[Held]:
    """Fatbin containers that lie in loaded, non-code sections other than those the wrappers register
    (`.nv_fatbin`, NCCL's `__nv_relfatbin`: the wrappers' pass reads them), in address order. Each
    must parse whole (known kinds, sizes inside the section); an 8-byte aligned magic that does not
    is data and is left alone."""
    out = []
    for s in elf.sections:
        if s.type != SHT_PROGBITS or not s.alloc or s.flags & SHF_EXECINSTR or s.name in WRAPPED:
            continue
        pos, end = s.offset, s.offset + s.size
        while (pos := data.find(_MAGIC, pos, end)) >= 0:
            if (s.addr + pos - s.offset) % 8:
                pos += 1
                continue
            try:
                c = F._container(data, pos, end, s.offset, lto=True)
            except F.FatbinError:
                pos += 4
                continue
            out.append(Held(s, c))
            pos += c.size
    return out


def _runs(held: list[Held], data, keep: tuple[int, ...]) -> list[tuple[int, int, E.Section, int]]:
    """Maximal runs of containers no listed GPU can use, with only zero bytes between them."""
    runs, current = [], None
    for h in held:
        drop = not F.serves(h.container, keep)
        if current and drop and h.section.index == current[2].index and not any(
                data[h.section.offset + current[1] - h.section.addr:h.section.offset + h.container.offset]):
            current[1], current[3] = h.end, current[3] + 1
            continue
        if current:
            runs.append(tuple(current))
        current = [h.start, h.end, h.section, 1] if drop else None
    if current:
        runs.append(tuple(current))
    return runs


def plan_file(data, keep: tuple[int, ...], held: list[Held] | None = None,
              served: tuple[int, ...] = ()) -> Plan | None:
    """The in-place rewrite, or None when the file has no such containers or no run worth cutting
    (`held`: what `find` already returned for this file; `served`: listed GPUs the file's
    `.nv_fatbin` already has code for, when these containers are a second store beside it)."""
    elf = E.unmapped(E.parse(data))   # an earlier pass's table mapping is planned anew
    held = find(elf, data) if held is None else held
    if not held:
        return None
    for gpu in (g for g in keep if g not in served):
        if not any(F.chosen_for(h.container, gpu) for h in held):   # LTO-IR is not loaded by the driver
            raise Refused(f"no device code in this file runs on sm_{gpu}: the library was not built for that "
                             f"GPU, and pruning it would hide that (left whole)")
    notes: list[str] = []
    written = sorted({r.offset for r in E.relocations(elf, data)} | E.relr_addresses(elf, data))
    runs = [r for r in (_sized(elf, written, *r) for r in _runs(held, data, keep)) if r]
    free, pinned = _header_room(elf, data)
    in_place = len(runs) <= free or pinned
    if pinned and len(runs) > free:  # a PT_PHDR keeps the table where it is: as many runs as fit
        notes.append(f"{len(runs) - free} smaller run(s) kept: no room for more program headers")
        runs = sorted(sorted(runs, key=lambda r: -r.delta)[:free], key=lambda r: r.start)
    if not runs:
        return None
    how = "more program headers in free bytes" if in_place else E.TABLE_MOVED
    cuts = [(_end_off(elf, r.tail) - r.delta, _end_off(elf, r.tail)) for r in runs]
    zeros = [(_off(elf, r.start), cuts[i][0]) for i, r in enumerate(runs)] + \
            [(_end_off(elf, r.tail), _end_off(elf, r.end)) for r in runs]
    shift = _shifter(cuts)
    segments = tuple(_moved(p, shift) for p in _segments(elf, runs))
    if in_place:   # the grown table stays where it is; a PT_PHDR grows with it
        phoff = elf.phoff
        segments = tuple(replace(p, filesz=p.filesz + len(runs) * E.PHDR.size, memsz=p.memsz + len(runs) * E.PHDR.size)
                         if p.type == E.PT_PHDR else p for p in segments)
    else:
        phoff = _align8(elf.size - sum(r.delta for r in runs))
        segments = E.map_table(segments, phoff)
    sections = _sections(elf, runs, shift)
    dropped = [h for h in held if any(r.start <= h.start and h.end <= r.end for r in runs)]
    containers = [h.container for h in held]
    gone = {id(h) for h in dropped}
    kept = [h.container for h in held if id(h) not in gone]
    layout = f"containers in place ({len(runs)} run(s) of no-fleet containers zero-filled; {how})"
    notes.append(f"{len(held)} containers in {', '.join(sorted({h.section.name for h in held}))} keep their "
                 f"addresses; {len(dropped)} hold code for no listed GPU and now read as zeros")
    return Plan(runs, segments, sections, phoff, cuts, zeros,
                (elf.shoff, elf.shoff + len(elf.sections) * E.SHDR.size), len(held),
                sum(not F.serves(c, keep) for c in containers), dropped, F.arch_bytes(containers),
                F.arch_bytes(kept), layout, notes)


def _sized(elf: E.Elf, written: list[int], start: int, end: int, section: E.Section, count: int) -> Run | None:
    """The run as a cut: its pages, and only when it is worth a program header and nothing else
    (another segment or section, a field the loader relocates) shares its bytes."""
    tail = end // E.GRANULE * E.GRANULE
    delta = (tail - start) // E.GRANULE * E.GRANULE
    if delta < MIN_RUN:
        return None
    at = bisect.bisect_left(written, start)
    if at < len(written) and written[at] < end:
        return None  # a relocated field inside: not device code alone
    owners = [p for p in elf.loads() if p.vaddr <= start and end <= p.vaddr + p.filesz]
    if len(owners) != 1:
        return None
    for p in elf.segments:
        if p is not owners[0] and p.memsz and p.vaddr < end and start < p.vaddr + p.memsz:
            return None
    for s in elf.sections:
        if s.index != section.index and s.alloc and s.size and s.addr < end and start < s.addr + s.size:
            return None
    return Run(start, end, tail, delta, section, count)


def _moved(p: E.Segment, shift) -> E.Segment:
    """A segment whose file bytes moved down keeps p_offset = p_vaddr mod p_align on 64 KiB pages."""
    new = shift(p.offset)
    if new == p.offset:
        return p
    return replace(p, offset=new, align=min(p.align, E.GRANULE) if p.type == E.PT_LOAD else p.align)


def _off(elf: E.Elf, addr: int) -> int:
    return elf.vaddr_to_offset(addr)


def _end_off(elf: E.Elf, end: int) -> int:
    """The file offset of an end address (a run may end where its segment's file bytes end)."""
    return elf.vaddr_to_offset(end - 1) + 1


def _shifter(cuts: list[tuple[int, int]]):
    def shift(old: int) -> int:
        return old - sum(b - a for a, b in cuts if b <= old)
    return shift


def _segments(elf: E.Elf, runs: list[Run]) -> tuple[E.Segment, ...]:
    """Each owning LOAD becomes pieces: every piece but the last has its memory reach the next piece."""
    out = []
    for p in elf.segments:
        mine = [r for r in runs if p.type == E.PT_LOAD and p.vaddr <= r.start and r.end <= p.vaddr + p.filesz]
        if not mine:
            out.append(p)
            continue
        vaddr, offset = p.vaddr, p.offset
        for r in mine:
            # The file bytes end on a granule (the run's first bytes are zeros in the file up to
            # there): the loader maps anonymous zeros after them and writes nothing, so a read-only
            # or executable segment (cuBLASLt's kernel store) splits as a writable one does.
            out.append(replace(p, offset=offset, vaddr=vaddr, paddr=vaddr, filesz=r.tail - r.delta - vaddr,
                               memsz=r.tail - vaddr, align=min(p.align, E.GRANULE)))
            vaddr, offset = r.tail, offset + (r.tail - vaddr)
        out.append(replace(p, offset=offset, vaddr=vaddr, paddr=vaddr, filesz=p.vaddr + p.filesz - vaddr,
                           memsz=p.vaddr + p.memsz - vaddr, align=min(p.align, E.GRANULE)))
    return tuple(out)


def _sections(elf: E.Elf, runs: list[Run], shift) -> tuple[E.Section, ...]:
    """Old headers with shifted offsets; a section holding runs keeps its first piece under its own
    index and gets its other pieces appended (NOBITS over each zero-fill, PROGBITS after it)."""
    out, extra = [], []
    for s in elf.sections:
        mine = [r for r in runs if r.section.index == s.index]
        moved = replace(s, offset=shift(s.offset)) if s.index and s.file_size else s
        if not mine:
            out.append(moved)
            continue
        out.append(replace(moved, size=mine[0].start - s.addr))
        for i, r in enumerate(mine):
            piece_end = mine[i + 1].start if i + 1 < len(mine) else s.addr + s.size
            extra.append(replace(s, index=len(elf.sections) + len(extra), type=E.SHT_NOBITS, addr=r.start,
                                 offset=shift(_end_off(elf, r.tail)), size=r.tail - r.start))
            extra.append(replace(s, index=len(elf.sections) + len(extra), addr=r.tail,
                                 offset=shift(_end_off(elf, r.tail)), size=piece_end - r.tail))
    return tuple(out + extra)


def _header_room(elf: E.Elf, data) -> tuple[int, bool]:
    """How many more program headers fit after the table, and whether a PT_PHDR pins it there
    (without one the grown table may move past the file's last byte, elf.TABLE_MOVED)."""
    first_content = min((s.offset for s in elf.sections if s.file_size and s.index), default=elf.size)
    table_end = elf.phoff + len(elf.segments) * E.PHDR.size
    first_load = elf.loads()[0] if elf.loads() else None
    limit = min(first_content, first_load.offset + first_load.filesz if first_load else 0)
    free = 0
    while table_end + (free + 1) * E.PHDR.size <= limit and not any(
            data[table_end:table_end + (free + 1) * E.PHDR.size]):
        free += 1
    return free, any(p.type == E.PT_PHDR for p in elf.segments)


def _align8(n: int) -> int:
    return (n + 7) // 8 * 8


def write(data, plan: Plan, out) -> int:
    """Stream the new file into `out` (seekable binary); returns its size."""
    view = memoryview(data)
    zeros = sorted(plan.zeros + [plan.old_table])
    pos = 0
    for start, end in plan.cuts + [(len(data), len(data))]:
        _copy(view, pos, start, zeros, out)
        pos = end
    size = out.tell()
    phdrs = b"".join(p.pack() for p in plan.segments)
    tables_at = max(size, plan.phoff + len(phdrs)) if plan.phoff >= size else size
    shoff = _align8(tables_at)
    out.seek(plan.phoff)
    out.write(phdrs)
    out.seek(shoff)
    out.write(b"".join(s.pack() for s in plan.sections))
    end = out.tell()
    out.seek(EHDR_PHOFF)
    out.write(struct.pack("<QQ", plan.phoff, shoff))
    out.seek(EHDR_PHNUM)
    out.write(struct.pack("<H", len(plan.segments)))
    out.seek(EHDR_SHNUM)
    out.write(struct.pack("<H", len(plan.sections)))
    out.seek(end)
    return end


def _copy(view, start: int, end: int, zeros: list[tuple[int, int]], out) -> None:
    pos = start
    for a, b in zeros:
        a, b = max(a, pos), min(b, end)
        if a >= b:
            continue
        out.write(view[pos:a])
        out.write(bytes(b - a))
        pos = b
    out.write(view[pos:end])


def image(elf: E.Elf, data, start: int, end: int) -> bytes:
    """The bytes a loader puts at [start, end): file bytes, or zeros past a segment's file size."""
    out = bytearray()
    pos = start
    for p in elf.loads():
        if pos >= end:
            break
        if not p.vaddr <= pos < p.vaddr + p.memsz:
            continue
        stop = min(end, p.vaddr + p.memsz)
        file_stop = min(stop, p.vaddr + p.filesz)
        if pos < file_stop:
            out += data[p.offset + pos - p.vaddr:p.offset + file_stop - p.vaddr]
        out += bytes(stop - max(pos, file_stop))
        pos = stop
    if pos < end:
        raise E.ElfError(f"address {pos:#x} is not loaded")
    return bytes(out)


def _memory_map(elf: E.Elf) -> list[tuple[int, int, int]]:
    """Loaded address ranges with their flags, adjacent ranges of equal flags merged (a moved program
    header table's own mapping aside: check_layout proves it)."""
    out: list[list[int]] = []
    for p in E.unmapped(elf).loads():
        if out and out[-1][1] == p.vaddr and out[-1][2] == p.flags:
            out[-1][1] = p.vaddr + p.memsz
        else:
            out.append([p.vaddr, p.vaddr + p.memsz, p.flags])
    return [tuple(r) for r in out]


def prove(old, new, keep: tuple[int, ...]) -> list[str]:
    """Problems found comparing the rewritten file with the original (empty: proven): it loads,
    maps the same addresses with the same permissions, and every loaded byte is the original's,
    except runs of containers with code for no listed GPU, which read as zeros in full."""
    try:
        a, b = E.parse(old), E.parse(new)
    except E.ElfError as err:
        return [f"rewritten file does not parse: {err}"]
    problems = E.check_layout(b)
    if _memory_map(a) != _memory_map(b):
        return problems + ["the loaded address ranges or their permissions changed"]
    held = find(a, old)
    fleet = [h.container for h in held] + wrapped(a, old).get(FATBIN, [])  # a store beside .nv_fatbin: either serves
    if any(not any(F.chosen_for(c, g) for c in fleet) for g in keep):
        problems.append("a listed GPU has no device code left")
    runs = [(s, e) for s, e, _sec, _n in _runs(held, old, keep)]
    zeroed = 0
    for start, end, _flags in _memory_map(a):
        cuts = sorted({start, end} | {x for s, e in runs if start <= s and e <= end for x in (s, e)})
        for lo, hi in itertools.pairwise(cuts):
            in_run = (lo, hi) in runs
            for at in range(lo, hi, 1 << 24):
                top = min(hi, at + (1 << 24))
                before, after = image(a, old, at, top), image(b, new, at, top)
                if before == after or _headers_only(a, b, at, before, after):
                    continue
                if in_run and not any(after):
                    zeroed += top - at
                    continue
                problems.append(f"loaded bytes at {at:#x}..{top:#x} changed" +
                                (" (a run of no-fleet containers only partly zeroed)" if in_run else ""))
                return problems
    if zeroed == 0:
        problems.append("nothing was zeroed")
    problems += _sections_match(a, old, b, new)
    return problems


def wrapped(elf: E.Elf, data) -> dict[str, list[F.Container]]:
    """The containers of each loaded section the wrappers register that parses whole (one that does
    not is refused by the wrappers' pass, which says why)."""
    out = {}
    for name in WRAPPED:
        section = elf.section(name)
        if section is None or not section.size or section.type == E.SHT_NOBITS or not section.alloc:
            continue
        try:
            found = F.parse_section(data, section.offset, section.size)[0]
        except F.FatbinError:
            continue
        if found:
            out[name] = found
    return out


def _headers_only(a: E.Elf, b: E.Elf, at: int, before: bytes, after: bytes) -> bool:
    """The bytes differ only where the rewrite must change them: the ELF header's table fields and a
    program header table grown where it lies (both in the first page, which the loader maps too)."""
    first = next((p for p in a.loads() if p.offset == 0), None)
    if first is None or not at <= first.vaddr < at + len(before):
        return False
    fields = [(32, 48), (56, 58), (60, 62)]
    if b.phoff == a.phoff:
        fields.append((a.phoff, a.phoff + len(b.segments) * E.PHDR.size))
    x, y = bytearray(before), bytearray(after)
    for lo, hi in fields:
        lo, hi = lo + first.vaddr - at, hi + first.vaddr - at
        x[lo:hi] = y[lo:hi] = bytes(hi - lo)
    return x == y


def _sections_match(a: E.Elf, old, b: E.Elf, new) -> list[str]:
    """The original headers keep name, type, flags and address; non-loaded sections keep their bytes;
    appended pieces continue a section they split; every file-backed loaded piece maps at its address."""
    problems = []
    n = len(a.sections)
    if len(b.sections) < n:
        return ["sections were lost"]
    for sa, sb in zip(a.sections, b.sections):
        if (sa.name, sa.type, sa.flags, sa.addr) != (sb.name, sb.type, sb.flags, sb.addr):
            problems.append(f"section {sa.name} changed its name, type, flags or address")
        elif not sa.alloc and sa.file_size and (sa.size != sb.size or
                                                old[sa.offset:sa.offset + sa.size] != new[sb.offset:sb.offset + sb.size]):
            problems.append(f"section {sa.name} changed")
    for sb in b.sections[n:]:
        parent = [sa for sa in a.sections if sa.alloc and sa.addr <= sb.addr and sb.addr + sb.size <= sa.addr + sa.size]
        if not parent or (sb.name, sb.flags) != (parent[0].name, parent[0].flags):
            problems.append(f"appended section at {sb.addr:#x} continues no original section")
    for sb in b.sections:
        if sb.alloc and sb.file_size:
            try:
                if b.vaddr_to_offset(sb.addr) != sb.offset:
                    problems.append(f"section {sb.name} at {sb.addr:#x} would not be loaded at its address")
            except E.ElfError:
                problems.append(f"section {sb.name} at {sb.addr:#x} lies in no loaded segment")
    return problems


def listing_elf(data, dropped: list[Held], machine: int) -> bytes:
    """A minimal ELF whose `.nv_fatbin` holds the dropped containers, so that NVIDIA's cuobjdump (which
    reads only that section) can list what the pruner says they hold."""
    payload = bytearray()
    for h in dropped:
        payload += b"\0" * (-len(payload) % 16)
        start = h.section.offset + h.container.offset
        payload += data[start:start + h.container.size]
    names = b"\0.nv_fatbin\0.shstrtab\0"
    body, strings = E.EHDR.size, E.EHDR.size + len(payload)
    shoff = _align8(strings + len(names))
    headers = [bytes(E.SHDR.size),
               E.SHDR.pack(1, SHT_PROGBITS, E.SHF_ALLOC, 0x10000, body, len(payload), 0, 0, 16, 0),
               E.SHDR.pack(12, 3, 0, 0, strings, len(names), 0, 0, 1, 0)]
    head = E.EHDR.pack(b"\x7fELF\x02\x01\x01" + bytes(9), 3, machine, 1, 0, 0, shoff, 0, E.EHDR.size,
                       E.PHDR.size, 0, E.SHDR.size, len(headers), 2)
    out = head + bytes(payload) + names
    return out + bytes(shoff - len(out)) + b"".join(headers)
