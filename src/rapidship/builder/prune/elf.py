"""ELF64 little-endian reading and the one rewrite the pruner needs: drop file bytes at the end of a
section while every other virtual address stays where it was.

Pure: bytes (or an mmap) in, records and patches out. Only what shared libraries of x86_64 and
aarch64 use is read; anything else is refused with `ElfError`, never guessed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
SHDR = struct.Struct("<IIQQQQIIQQ")
RELA = struct.Struct("<QQq")
SYM = struct.Struct("<IBBHQQ")

PT_LOAD, PT_NOTE, PT_PHDR = 1, 4, 6
PF_R = 4
SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_REL, SHT_DYNSYM, SHT_RELR = 2, 4, 8, 9, 11, 19
SHF_ALLOC = 0x2
SHN_UNDEF, SHN_LORESERVE = 0, 0xFF00
EM_X86_64, EM_AARCH64 = 62, 183
RELATIVE = {EM_X86_64: 8, EM_AARCH64: 1027}
NT_GNU_BUILD_ID = 3
# Granule of every file-offset shift: the largest page size Linux uses on aarch64 (64 KiB), so a
# pruned library loads on 4 KiB and 64 KiB kernels alike (glibc: p_offset = p_vaddr mod p_align).
GRANULE = 0x10000


class ElfError(ValueError):
    """The file is not an ELF layout the pruner can prove; it is left untouched."""


@dataclass(frozen=True)
class Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    align: int

    def pack(self) -> bytes:
        return PHDR.pack(self.type, self.flags, self.offset, self.vaddr, self.paddr, self.filesz,
                         self.memsz, self.align)


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int
    name_offset: int

    @property
    def alloc(self) -> bool:
        return bool(self.flags & SHF_ALLOC)

    @property
    def file_size(self) -> int:
        return 0 if self.type == SHT_NOBITS else self.size

    def pack(self) -> bytes:
        return SHDR.pack(self.name_offset, self.type, self.flags, self.addr, self.offset, self.size,
                         self.link, self.info, self.addralign, self.entsize)


@dataclass(frozen=True)
class Elf:
    machine: int
    phoff: int
    shoff: int
    phentsize: int
    shentsize: int
    segments: tuple[Segment, ...]
    sections: tuple[Section, ...]
    size: int

    def section(self, name: str) -> Section | None:
        found = [s for s in self.sections if s.name == name]
        if len(found) > 1:
            raise ElfError(f"{len(found)} sections named {name}")
        return found[0] if found else None

    def loads(self) -> list[Segment]:
        return [p for p in self.segments if p.type == PT_LOAD]

    def vaddr_to_offset(self, vaddr: int) -> int:
        for p in self.loads():
            if p.vaddr <= vaddr < p.vaddr + p.filesz:
                return p.offset + vaddr - p.vaddr
        raise ElfError(f"address {vaddr:#x} is in no loaded file range")


def is_elf(head: bytes) -> bool:
    return head[:4] == b"\x7fELF"


def parse(data) -> Elf:
    """Headers of an ELF64 LE shared object or executable (data: bytes, bytearray or mmap)."""
    if len(data) < EHDR.size or not is_elf(data[:4]):
        raise ElfError("not an ELF file")
    ident = bytes(data[:16])
    if ident[4] != 2 or ident[5] != 1:
        raise ElfError("only 64-bit little-endian ELF files are handled")
    (_, _etype, machine, _ver, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum, shentsize, shnum,
     shstrndx) = EHDR.unpack_from(data, 0)
    if machine not in RELATIVE:
        raise ElfError(f"machine {machine} is neither x86_64 nor aarch64")
    if phentsize != PHDR.size or shentsize != SHDR.size:
        raise ElfError("unexpected program or section header size")
    if phoff + phnum * PHDR.size > len(data) or shoff + shnum * SHDR.size > len(data) or shnum == 0:
        raise ElfError("headers lie outside the file")
    segments = tuple(Segment(*PHDR.unpack_from(data, phoff + i * PHDR.size)) for i in range(phnum))
    raw = [SHDR.unpack_from(data, shoff + i * SHDR.size) for i in range(shnum)]
    if shstrndx >= shnum:
        raise ElfError("section name table index out of range")
    strtab = raw[shstrndx]
    names = bytes(data[strtab[4]:strtab[4] + strtab[5]])
    sections = []
    for i, (name, stype, flags, addr, offset, size, link, info, align, entsize) in enumerate(raw):
        end = names.find(b"\0", name)
        label = names[name:end if end >= 0 else None].decode("ascii", "replace")
        if stype != SHT_NOBITS and offset + size > len(data):
            raise ElfError(f"section {label} lies outside the file")
        sections.append(Section(i, label, stype, flags, addr, offset, size, link, info, align, entsize, name))
    for p in segments:
        if p.type == PT_LOAD and p.offset + p.filesz > len(data):
            raise ElfError("a loaded segment lies outside the file")
    return Elf(machine, phoff, shoff, phentsize, shentsize, segments, tuple(sections), len(data))


@dataclass(frozen=True)
class Reloc:
    file_offset: int  # where this entry is stored (to patch its addend)
    offset: int       # r_offset: the address it writes
    type: int
    sym: int
    addend: int


def relocations(elf: Elf, data) -> list[Reloc]:
    """Every RELA entry of every allocated RELA section. REL tables are refused (not used on these
    machines, and their addends live in the patched bytes themselves)."""
    out = []
    for s in elf.sections:
        if s.type == SHT_REL and s.alloc:
            raise ElfError(f"REL relocations ({s.name}) are not handled")
        if s.type != SHT_RELA or not s.alloc:
            continue
        if s.entsize != RELA.size or s.size % RELA.size:
            raise ElfError(f"{s.name} has entries of {s.entsize} bytes")
        for i, (offset, info, addend) in enumerate(RELA.iter_unpack(data[s.offset:s.offset + s.size])):
            out.append(Reloc(s.offset + i * RELA.size, offset, info & 0xFFFFFFFF, info >> 32, addend))
    return out


def relr_addresses(elf: Elf, data) -> set[int]:
    """Addresses relocated by SHT_RELR tables (packed relative relocations: the addend is in place)."""
    out: set[int] = set()
    for s in elf.sections:
        if s.type != SHT_RELR:
            continue
        where = 0
        for (entry,) in struct.iter_unpack("<Q", data[s.offset:s.offset + s.size]):
            if entry & 1 == 0:
                out.add(entry)
                where = entry + 8
            else:
                bits = entry >> 1
                for bit in range(63):
                    if bits & (1 << bit):
                        out.add(where + 8 * bit)
                where += 8 * 63
    return out


def symbols(elf: Elf, data) -> list[tuple[int, int, int]]:
    """(file offset of the entry, st_value, st_shndx) of every defined symbol, .dynsym and .symtab."""
    out = []
    for s in elf.sections:
        if s.type not in (SHT_DYNSYM, SHT_SYMTAB) or s.entsize != SYM.size:
            continue
        for i, (_n, _info, _other, shndx, value, _size) in enumerate(SYM.iter_unpack(data[s.offset:s.offset + s.size])):
            if shndx != SHN_UNDEF and shndx < SHN_LORESERVE:
                out.append((s.offset + i * SYM.size, value, shndx))
    return out


def build_id_only(note: bytes) -> bool:
    """True when a PT_NOTE holds nothing but GNU build-id notes: the loader never reads those, so its
    program header can carry a new PT_LOAD instead (the .note section itself stays)."""
    pos = 0
    seen = False
    while pos + 12 <= len(note):
        namesz, descsz, ntype = struct.unpack_from("<III", note, pos)
        name = note[pos + 12:pos + 12 + namesz]
        if ntype != NT_GNU_BUILD_ID or name != b"GNU\0":
            return False
        seen = True
        pos += 12 + _align(namesz, 4) + _align(descsz, 4)
    return seen and pos == len(note)


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True)
class Shrink:
    """Plan for cutting file bytes [cut_start, cut_start + delta) out of one section's tail."""

    section: Section
    new_size: int       # the section's size after the rewrite
    cut_start: int      # old file offset of the first byte that goes
    delta: int          # bytes removed (a multiple of GRANULE)
    segments: tuple[Segment, ...]
    phoff: int
    shoff: int
    sections: tuple[Section, ...]
    how: str            # "segment end" or "segment split" (+ how the header slot was found)

    def new_offset(self, old: int) -> int:
        """Where an old file offset lands; bytes inside the cut have no new home."""
        if old < self.cut_start:
            return old
        if old >= self.cut_start + self.delta:
            return old - self.delta
        raise ElfError(f"offset {old:#x} lies in the removed range")


def plan_shrink(elf: Elf, data, section: Section, new_size: int) -> Shrink | None:
    """How to drop the file bytes of `section` past `new_size`, keeping every virtual address.

    The section's loaded segment either ends with it (the segment is shortened) or goes on after it
    (the segment is split in two around the hole; that needs one more program header). Every later
    file byte moves down by a multiple of GRANULE so each segment keeps p_offset = p_vaddr mod p_align.
    None when less than one granule would be saved.
    """
    bare = unmapped(elf)   # planned without an earlier pass's table mapping, which is added anew
    moved_before, elf = bare is not elf, bare
    old_end_off = section.offset + section.size
    keep_end_off = section.offset + new_size
    delta = (old_end_off - keep_end_off) // GRANULE * GRANULE
    if delta < GRANULE:
        return None
    hole_start, hole_end = section.addr + new_size, section.addr + section.size
    loads = elf.loads()
    owners = [p for p in loads if p.offset <= section.offset and old_end_off <= p.offset + p.filesz]
    if len(owners) != 1:
        raise ElfError(f"{section.name} is not inside exactly one loaded segment")
    seg = owners[0]
    if seg.offset - seg.vaddr != section.offset - section.addr:
        raise ElfError(f"{section.name} offset and address disagree with its segment")
    for other in elf.segments:  # nothing else may straddle the bytes that go
        if other is seg or other.filesz == 0:
            continue
        if other.offset < old_end_off and keep_end_off < other.offset + other.filesz:
            raise ElfError(f"a segment of type {other.type:#x} overlaps {section.name}")
    for s in elf.sections:
        if s is section or s.file_size == 0:
            continue
        if s.offset < old_end_off and keep_end_off < s.offset + s.file_size:
            raise ElfError(f"section {s.name} overlaps {section.name}")

    def moved(p: Segment) -> Segment:
        if p.offset >= old_end_off:
            return replace(p, offset=p.offset - delta, align=min(p.align, GRANULE) if p.type == PT_LOAD else p.align)
        return p

    seg_file_end = seg.vaddr + seg.filesz
    new_segments: list[Segment] = []
    if seg_file_end == hole_end and seg.memsz == seg.filesz:
        how = "segment end"
        for p in elf.segments:
            new_segments.append(replace(p, filesz=hole_start - p.vaddr, memsz=hole_start - p.vaddr) if p is seg
                                else moved(p))
    else:
        if _page_up(hole_start) > _page_down(hole_end):
            return None
        head = replace(seg, filesz=hole_start - seg.vaddr, memsz=hole_start - seg.vaddr)
        tail = Segment(PT_LOAD, seg.flags, old_end_off - delta, hole_end, hole_end,
                       seg.filesz - (hole_end - seg.vaddr), seg.memsz - (hole_end - seg.vaddr),
                       min(seg.align, GRANULE))
        slot, how = _header_slot(elf, data)
        for p in elf.segments:
            if p is slot:
                continue
            if p is seg:
                new_segments += [head, tail]
            else:
                new_segments.append(moved(p))
        if slot is None and how != TABLE_MOVED:
            phdr = [i for i, p in enumerate(new_segments) if p.type == PT_PHDR]
            for i in phdr:
                p = new_segments[i]
                new_segments[i] = replace(p, filesz=p.filesz + PHDR.size, memsz=p.memsz + PHDR.size)
        how = f"segment split ({how})"
    sections = tuple(
        replace(s, size=new_size) if s is section
        else replace(s, offset=s.offset - delta) if s.offset >= old_end_off and s.index != 0 else s
        for s in elf.sections)
    shoff = elf.shoff - delta if elf.shoff >= old_end_off else elf.shoff
    phoff = elf.phoff - delta if elf.phoff >= old_end_off else elf.phoff
    if how.endswith(f"({TABLE_MOVED})") or moved_before:  # the table goes after the last byte of the new file
        phoff = _align(elf.size - delta, 8)
        new_segments = list(map_table(tuple(new_segments), phoff))
    return Shrink(section, new_size, keep_end_off + (old_end_off - keep_end_off - delta), delta,
                  tuple(new_segments), phoff, shoff, sections, how)


TABLE_MOVED = "program header table moved to the end of the file, mapped by its own segment"


def _header_slot(elf: Elf, data) -> tuple[Segment | None, str]:
    """Room for one more program header: free bytes after the table, a build-id-only PT_NOTE, or
    else the grown table written past the file's last byte (NVIDIA's aarch64 libraries have neither)
    and mapped there by two more headers (map_table). A PT_PHDR the linker wrote promises the table
    in memory at its address, so a file that has one cannot move it."""
    if not any(p.offset <= elf.phoff and elf.phoff < p.offset + p.filesz for p in elf.loads()):
        return None, TABLE_MOVED   # moved by an earlier pass: it moves again, to the new end
    end = elf.phoff + (len(elf.segments) + 1) * PHDR.size
    first_content = min((s.offset for s in elf.sections if s.file_size and s.index), default=elf.size)
    covered = any(p.offset <= elf.phoff and end <= p.offset + p.filesz for p in elf.loads())
    if end <= first_content and covered and not any(data[elf.phoff + len(elf.segments) * PHDR.size:end]):
        return None, "one more program header in free bytes"
    notes = [p for p in elf.segments if p.type == PT_NOTE]
    for p in notes:
        if build_id_only(bytes(data[p.offset:p.offset + p.filesz])):
            return p, "build-id PT_NOTE header reused"
    if any(p.type == PT_PHDR for p in elf.segments):
        raise ElfError("no room for one more program header (none free, no build-id-only PT_NOTE, "
                       "and a PT_PHDR keeps the table where it is)")
    return None, TABLE_MOVED


def map_table(segments: tuple[Segment, ...], phoff: int) -> tuple[Segment, ...]:
    """The segments plus two that put a table written past the file's content into memory: a
    PT_PHDR (first, as the gABI asks) and a read-only LOAD of the table alone, above every other
    address. glibc reads the table from memory after mapping (dl_iterate_phdr, so the C++ unwinder;
    `ld.so --list`); unmapped, it read the zeros .bss leaves in the last segment's page."""
    size = (len(segments) + 2) * PHDR.size
    loads = [i for i, p in enumerate(segments) if p.type == PT_LOAD]
    top = max(segments[i].vaddr + segments[i].memsz for i in loads)
    table = Segment(PT_LOAD, PF_R, phoff, _page_up(top) + phoff % GRANULE, _page_up(top) + phoff % GRANULE,
                    size, size, GRANULE)
    last = loads[-1] + 1
    return (replace(table, type=PT_PHDR, align=8), *segments[:last], table, *segments[last:])


def table_segments(elf: Elf) -> tuple[int, int] | None:
    """Indices of the PT_PHDR and the LOAD map_table added, when the table is mapped that way."""
    size = len(elf.segments) * PHDR.size
    phdr = [i for i, p in enumerate(elf.segments) if p.type == PT_PHDR and p.offset == elf.phoff]
    load = [i for i, p in enumerate(elf.segments)
            if p.type == PT_LOAD and p.offset == elf.phoff and p.filesz == p.memsz == size]
    return (phdr[0], load[0]) if phdr and load else None


def unmapped(elf: Elf) -> Elf:
    """The file as a later rewrite plans it: without the two headers map_table added (it adds them again)."""
    found = table_segments(elf)
    return elf if found is None else replace(elf, segments=tuple(p for i, p in enumerate(elf.segments) if i not in found))


def table_problems(elf: Elf) -> list[str]:
    """How the loader would misread the program header table in memory (empty: it reads it right).
    glibc reads it at PT_PHDR's address, else in the first segment whose mapped pages hold all of it
    (4 KiB or 64 KiB pages), else from the file. Those pages hold the file's bytes up to the
    segment's file size and zeros after it where the segment has .bss."""
    start, end = elf.phoff, elf.phoff + len(elf.segments) * PHDR.size
    phdr = next((p for p in elf.segments if p.type == PT_PHDR), None)
    if phdr is not None:
        if phdr.offset != start or phdr.filesz < end - start or not any(
                p.offset <= start and end <= p.offset + p.filesz and phdr.vaddr == p.vaddr + start - p.offset
                for p in elf.loads()):
            return [f"the PT_PHDR does not map the program header table at file offset {start:#x}"]
        return []
    for page in (0x1000, GRANULE):
        for p in elf.loads():
            lo, hi = p.offset // page * page, -(-(p.offset + p.filesz) // page) * page
            if lo <= start and end <= hi:   # glibc takes the table from this segment's memory
                if p.memsz > p.filesz and end > p.offset + p.filesz:
                    return [f"the program header table at file offset {start:#x} lies in the last page of the "
                            f"LOAD at {p.vaddr:#x} past its file bytes: with {page // 1024} KiB pages the "
                            "loader reads it from memory there, where .bss leaves zeros"]
                break
    return []


def _page_up(addr: int) -> int:
    return (addr + GRANULE - 1) // GRANULE * GRANULE


def _page_down(addr: int) -> int:
    return addr // GRANULE * GRANULE


def header_bytes(plan: Shrink) -> dict[int, bytes]:
    """New program and section header tables, keyed by their NEW file offsets, plus the two ELF
    header fields that change (e_phnum at 56, e_shoff at 40, e_phoff at 32)."""
    return {
        32: struct.pack("<QQ", plan.phoff, plan.shoff),
        56: struct.pack("<H", len(plan.segments)),
        plan.phoff: b"".join(p.pack() for p in plan.segments),
        plan.shoff: b"".join(s.pack() for s in plan.sections),
    }


def check_layout(elf: Elf) -> list[str]:
    """What a loader would reject or misread: LOAD segments out of order, overlapping pages, offsets
    that break p_offset = p_vaddr mod p_align, content past the end of the file, a program header
    table it reads wrong in memory. Empty list = sound."""
    problems = []
    loads = elf.loads()
    for p in loads:
        if p.align > 1 and (p.offset - p.vaddr) % p.align:
            problems.append(f"LOAD at {p.vaddr:#x}: offset {p.offset:#x} not congruent to its address mod {p.align:#x}")
        if p.filesz > p.memsz:
            problems.append(f"LOAD at {p.vaddr:#x}: file size above memory size")
        if p.offset + p.filesz > elf.size:
            problems.append(f"LOAD at {p.vaddr:#x} ends past the end of the file")
    for a, b in zip(loads, loads[1:]):
        page = max(0x1000, min(a.align, b.align, GRANULE))  # the page size these segments were laid out for
        if b.vaddr < a.vaddr:
            problems.append(f"LOAD at {b.vaddr:#x} listed after {a.vaddr:#x}")
        elif b.vaddr // page * page < -(-(a.vaddr + a.memsz) // page) * page and b.offset - b.vaddr != a.offset - a.vaddr:
            problems.append(f"LOAD at {a.vaddr:#x} and {b.vaddr:#x} share a page but map different file bytes")
    return problems + table_problems(elf)
