"""One ELF file's device code, pruned to a GPU fleet and proven; pure (bytes in, plan and bytes out).

`plan_file(data, keep)` reads `.nv_fatbin`, keeps per container what each listed GPU runs, packs
the containers tightly at the section start, re-points every `.nvFatBinSegment` wrapper (its
relocation addend and its stored value) at its container's new place and plans the file-byte cut
(elf.plan_shrink). `write(data, plan, out)` streams the new file. `prove(old, new, keep)` checks
the result from the two files alone: the ELF parses and loads (segment rules), every section other
than the device code is byte-identical, each wrapper points at a container that holds exactly the
entries the fleet runs, byte for byte. A file that cannot be proven is never written.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from . import elf as E
from . import fatbin as F

FATBIN = ".nv_fatbin"
# NCCL's relocatable fatbins (one per -rdc object, registered by their own wrappers): the CUDA
# runtime links them when the device-linked module in .nv_fatbin has no code for the GPU. Pruned
# in a second pass, by the same rules, as a section of its own.
RELFATBIN = "__nv_relfatbin"
WRAPPERS = ".nvFatBinSegment"
WRAPPER = struct.Struct("<IIQQ")   # magic, version, data pointer, prelinked-fatbins pointer
WRAPPER_MAGIC = 0x466243B1


class Refused(ValueError):
    """Why a file with device code is left as it is."""


class NoWrappers(Refused):
    """No `.nvFatBinSegment`: the library loads its device code itself (inplace.py may prune it)."""


@dataclass(frozen=True)
class Wrapper:
    file_offset: int      # of the wrapper's data-pointer field
    address: int          # of the same field
    target: int           # container address it points at
    reloc: E.Reloc | None  # RELA entry that writes the field (None: a RELR address)


@dataclass(frozen=True)
class Layout:
    elf: E.Elf
    section: E.Section
    containers: list[F.Container]
    wrappers: list[Wrapper]


@dataclass
class Plan:
    keep: tuple[int, ...]
    section: E.Section
    new_section: bytes
    shrink: E.Shrink
    patches: dict[int, bytes]               # old file offset -> new bytes
    arch_before: dict[str, int]
    arch_after: dict[str, int]
    containers: int
    thinned_to_one: int = 0                 # containers with nothing for the fleet (emptied)
    notes: list[str] = field(default_factory=list)

    @property
    def saved(self) -> int:
        return self.shrink.delta

    @property
    def layout(self) -> str:
        return self.shrink.how


def read_layout(data, name: str = FATBIN) -> Layout | None:
    """The file's device code in section `name` and the wrappers that register it; None when it has none."""
    elf = E.parse(data)
    section = elf.section(name)
    if section is None or section.size == 0:
        return None
    if section.type == E.SHT_NOBITS or not section.alloc:
        raise Refused(f"{name} is not loaded file content")
    try:
        containers, _padding = F.parse_section(data, section.offset, section.size)
    except F.FatbinError as err:
        raise Refused(f"{name}: {err}") from None
    wrappers = _wrappers(elf, data, section, containers)
    return Layout(elf, section, containers, wrappers)


def _wrappers(elf: E.Elf, data, section: E.Section, containers: list[F.Container]) -> list[Wrapper]:
    seg = elf.section(WRAPPERS)
    if seg is None or seg.size % WRAPPER.size:
        raise NoWrappers(f"no {WRAPPERS} of 24-byte wrappers beside {section.name}")
    lo, hi = section.addr, section.addr + section.size
    starts = {section.addr + c.offset for c in containers}
    relocs = E.relocations(elf, data)
    relative = E.RELATIVE[elf.machine]
    by_address = {r.offset: r for r in relocs}
    relr = E.relr_addresses(elf, data)
    out = []
    for i in range(seg.size // WRAPPER.size):
        at = seg.offset + i * WRAPPER.size
        magic, version, stored, prelinked = WRAPPER.unpack_from(data, at)
        # version 2: a device-linked module (its last field lists the prelinked fatbins it was
        # linked from, filled in at run time; checked below not to point into the device code)
        if magic != WRAPPER_MAGIC or version not in (1, 2):
            raise Refused(f"wrapper {i} has magic {magic:#x} version {version}: not a fatbin wrapper")
        address = seg.addr + i * WRAPPER.size + 8
        if prelinked and lo <= prelinked < hi or address + 8 in by_address and lo <= by_address[address + 8].addend < hi:
            raise Refused(f"wrapper {i} lists prelinked fatbins inside {section.name}")
        reloc = by_address.get(address)
        if reloc is not None:
            if reloc.type != relative:
                raise Refused(f"wrapper {i} is relocated by type {reloc.type}, not a relative relocation")
            target = reloc.addend
            if stored not in (0, target):
                raise Refused(f"wrapper {i} stores {stored:#x} but is relocated to {target:#x}")
        elif address in relr:
            target = stored
        else:
            raise Refused(f"wrapper {i} has no relocation: cannot move what it points at")
        if not lo <= target < hi:
            # it registers a container elsewhere (NCCL's relocatable fatbins in __nv_relfatbin):
            # that container keeps its address and bytes, so its wrapper stays as it is (proven:
            # the wrapper section may differ only in the fields of the wrappers re-pointed)
            continue
        if target not in starts:
            raise Refused(f"wrapper {i} points at {target:#x}, not at a container start")
        out.append(Wrapper(at + 8, address, target, reloc))
    # Nothing else may point into the device code: other relocations, symbols, relocated bytes.
    wrapper_fields = {w.address for w in out}
    for r in relocs:
        if lo <= r.offset < hi:
            raise Refused(f"a relocation writes into {section.name} at {r.offset:#x}")
        if r.offset not in wrapper_fields and r.type == relative and lo <= r.addend < hi:
            raise Refused(f"a relocation at {r.offset:#x} points into {section.name}: only wrappers may")
    for addr in relr:
        if lo <= addr < hi:
            raise Refused(f"a packed relocation writes into {section.name} at {addr:#x}")
    for _at, value, shndx in E.symbols(elf, data):
        if lo < value < hi and value not in starts:
            raise Refused(f"a symbol points inside {section.name} at {value:#x}")
        if shndx == section.index and value not in starts and value != hi and value != lo:
            raise Refused(f"a symbol of {section.name} is at {value:#x}")
    return out


def plan_file(data, keep: tuple[int, ...], name: str = FATBIN) -> Plan | None:
    """The rewrite of one file's section `name`, or None when it has no device code there or
    nothing worth a granule."""
    layout = read_layout(data, name)
    if layout is None:
        return None
    elf, section, containers = layout.elf, layout.section, layout.containers
    for gpu in keep:
        if not any(F.chosen_for(c, gpu) for c in containers):
            raise Refused(f"no device code in this file runs on sm_{gpu}: the library was not built for that "
                          f"GPU, and pruning it would hide that (left whole)")
    base = section.offset
    align = 16 if all((section.addr + c.offset) % 16 == 0 for c in containers) else 8
    fixed = fixed_prefix(layout)
    out = bytearray(data[base:base + (containers[fixed - 1].offset + containers[fixed - 1].size if fixed else 0)])
    moved: dict[int, int] = {section.addr + c.offset: section.addr + c.offset for c in containers[:fixed]}
    kept_all: list[F.Container] = list(containers[:fixed])
    thinned = 0
    for c in containers[fixed:]:
        kept = F.select(c, keep)
        if not any(F.chosen_for(c, g) for g in keep):
            thinned += 1
        out += b"\0" * (-len(out) % align)
        moved[section.addr + c.offset] = section.addr + len(out)
        out += F.write_container(data, base, c, kept)
        kept_all.append(F.Container(c.offset, c.header_size, 0, kept))
    if len(out) >= section.size:
        return None
    try:
        shrink = E.plan_shrink(elf, data, section, len(out))
    except E.ElfError as err:  # the file parsed; its layout is what cannot be rewritten
        raise Refused(str(err)) from None
    if shrink is None:
        return None
    patches: dict[int, bytes] = {}
    for w in layout.wrappers:
        new = moved[w.target]
        patches[w.file_offset] = struct.pack("<Q", new)
        if w.reloc is not None:
            patches[w.reloc.file_offset + 16] = struct.pack("<q", new)
    for at, value, shndx in E.symbols(elf, data):  # debug symbols naming a container move with it
        if value in moved and shndx == section.index:
            patches[at + 8] = struct.pack("<Q", moved[value])
    for at in patches:
        if section.offset <= at < section.offset + section.size:
            raise Refused("a patch would land inside the device code")
    plan = Plan(keep, section, bytes(out), shrink, patches, F.arch_bytes(containers), F.arch_bytes(kept_all),
                len(containers), thinned)
    if fixed:
        plan.notes.append(f"{fixed} leading container(s) kept in place: code refers to one directly, not "
                          f"through a wrapper")
    return plan


def fixed_prefix(layout: Layout) -> int:
    """How many leading containers must keep their address and bytes: up to the last one that no
    wrapper registers (code loads those by address, so they cannot move or change)."""
    registered = {w.target for w in layout.wrappers}
    base = layout.section.addr
    unregistered = [i for i, c in enumerate(layout.containers) if base + c.offset not in registered]
    return unregistered[-1] + 1 if unregistered else 0


def write(data, plan: Plan, out) -> int:
    """Stream the new file into the binary file object `out` (seekable); returns its size."""
    s, shrink = plan.section, plan.shrink
    view = memoryview(data)
    out.write(view[:s.offset])
    out.write(plan.new_section)
    out.write(b"\0" * (shrink.cut_start - s.offset - len(plan.new_section)))
    out.write(view[shrink.cut_start + shrink.delta:])
    size = out.tell()
    for old, blob in plan.patches.items():
        out.seek(shrink.new_offset(old))
        out.write(blob)
    for at, blob in E.header_bytes(shrink).items():
        out.seek(at)  # past the end when the program header table moved there
        out.write(blob)
        size = max(size, at + len(blob))
    out.seek(size)
    return size


def prove(old, new, keep: tuple[int, ...], name: str = FATBIN) -> list[str]:
    """Problems found comparing the rewritten file with the original (empty: proven)."""
    try:
        a = read_layout(old, name)
        b = read_layout(new, name)
    except (E.ElfError, Refused) as err:
        return [f"rewritten file does not parse: {err}"]
    if a is None or b is None:
        return ["device code section missing"]
    problems = E.check_layout(b.elf)
    fat_a, fat_b = a.section, b.section
    if len(a.elf.sections) != len(b.elf.sections):
        return problems + ["section count changed"]
    owned = _owned_fields(a)
    for sa, sb in zip(a.elf.sections, b.elf.sections):
        if (sa.name, sa.type, sa.flags, sa.addr) != (sb.name, sb.type, sb.flags, sb.addr):
            problems.append(f"section {sa.name} changed its name, type, flags or address")
            continue
        if sa.alloc and sb.file_size:
            try:
                if b.elf.vaddr_to_offset(sb.addr) != sb.offset:
                    problems.append(f"section {sb.name} would not be loaded at its address")
            except E.ElfError:
                problems.append(f"section {sb.name} lies in no loaded segment")
        if sa.index == fat_a.index or sa.file_size == 0:
            continue
        if sa.size != sb.size:
            problems.append(f"section {sa.name} changed size")
            continue
        before = bytes(old[sa.offset:sa.offset + sa.size])
        after = bytes(new[sb.offset:sb.offset + sb.size])
        if before == after:
            continue
        if not _only_owned_fields_differ(sa, before, after, owned):
            problems.append(f"section {sa.name} changed beyond the wrapper pointers")
    if len(a.wrappers) != len(b.wrappers) or len(a.containers) != len(b.containers):
        return problems + ["wrapper or container count changed"]
    index_a = {fat_a.addr + c.offset: i for i, c in enumerate(a.containers)}
    index_b = {fat_b.addr + c.offset: i for i, c in enumerate(b.containers)}
    for i, (wa, wb) in enumerate(zip(a.wrappers, b.wrappers)):
        if index_a[wa.target] != index_b.get(wb.target):
            problems.append(f"wrapper {i} points at another container than before")
    fixed = fixed_prefix(a)
    for i, (ca, cb) in enumerate(zip(a.containers, b.containers)):
        if i < fixed:
            if ca.offset != cb.offset or _entry_bytes(old, fat_a, ca) != _entry_bytes(new, fat_b, cb):
                problems.append(f"container {i}, used by address, moved or changed")
            continue
        want = [_entry_bytes(old, fat_a, e) for e in F.select(ca, keep)]
        have = [_entry_bytes(new, fat_b, e) for e in cb.entries]
        if want != have:
            problems.append(f"container {i} does not hold exactly the kept entries")
        for gpu in keep:
            if [_entry_bytes(old, fat_a, e) for e in F.chosen_for(ca, gpu)] != \
               [_entry_bytes(new, fat_b, e) for e in F.chosen_for(cb, gpu)]:
                problems.append(f"container {i} would load other code on sm_{gpu}")
    return problems


def _entry_bytes(data, section: E.Section, entry: F.Entry | F.Container) -> bytes:
    start = section.offset + entry.offset
    return bytes(data[start:start + entry.size])


def _owned_fields(layout: Layout) -> set[int]:
    """Old file offsets of the 8-byte fields the rewrite may change: each wrapper's data pointer
    and the addend of the relocation that writes it."""
    owned = {w.file_offset for w in layout.wrappers}
    owned.update(w.reloc.file_offset + 16 for w in layout.wrappers if w.reloc)
    return owned


def _only_owned_fields_differ(section: E.Section, before: bytes, after: bytes, owned: set[int]) -> bool:
    """The section as the rewrite left it equals the original with only the owned fields (and, in
    .symtab, symbol values) taken from the new file."""
    fields = set(range(section.offset + 8, section.offset + section.size, E.SYM.size)) \
        if section.type == E.SHT_SYMTAB else owned
    expected = bytearray(before)
    for at in fields:
        pos = at - section.offset
        if 0 <= pos <= len(before) - 8:
            expected[pos:pos + 8] = after[pos:pos + 8]
    return expected == after
