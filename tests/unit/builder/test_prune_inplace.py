"""Containers kept in a library's own data and reached by address (libcufft's form): runs of those
with code for no listed GPU become zero-filled memory, every other byte stays at its address. The
libraries are linked by the real gcc + ld and loaded by the real dynamic loader."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import ROOT
from support.fatbin_samples import (
    KIND_CUBIN,
    KIND_LTOIR,
    KIND_PTX,
    build_data_library,
    build_library,
    container,
    entry,
    fleet_container,
    gcc,
)

from rapidship.builder.prune import core, files, inplace
from rapidship.builder.prune import elf as E
from rapidship.builder.prune import fatbin as F

pytestmark = pytest.mark.skipif(gcc() is None and not os.environ.get("CI"), reason="needs gcc (CI installs it)")
KEEP = (80, 90)


def blackwell(i: int) -> bytes:
    return container(entry(KIND_CUBIN, 100, 48_000, seed=i))


# cuFFT's shape: one container per kernel and arch, the archs in runs; PTX and LTO-IR beside them
CONTAINERS = ([fleet_container(archs=(80, 90), size=20_000, seed=1)] + [blackwell(i) for i in range(40)] +
              [container(entry(KIND_PTX, 70, 30_000, seed=2)), container(entry(KIND_LTOIR, 50, 30_000, seed=3))] +
              [blackwell(100)] + [container(entry(KIND_CUBIN, 90, 20_000, seed=4))])
RUN = range(1, 41)            # 40 x 48 KB: one run worth a cut
SHORT = range(43, 44)         # one 48 KB container: less than a granule, kept as it is


def in_memory(lib: Path) -> list[bytes]:
    handle = ctypes.CDLL(str(lib))
    handle.container_of.restype = ctypes.c_void_p
    return [ctypes.string_at(handle.container_of(i), len(blob)) for i, blob in enumerate(CONTAINERS)]


def test_a_run_of_no_fleet_containers_reads_as_zeros_and_every_other_byte_stays(tmp_path):
    lib = build_data_library(tmp_path / "src", CONTAINERS)
    out = tmp_path / "out" / "libcufft-like.so"
    result = files.prune_file(lib, KEEP, dest=out)  # NVIDIA cuobjdump reads real libcufft only: the build runs it
    assert result["status"] == "pruned", result
    assert result["layout"].startswith("containers in place (1 run(s)")
    assert result["containers"] == len(CONTAINERS) and result["containers_zeroed"] == len(RUN)
    assert result["bytes_before"] - result["bytes_after"] >= 1 << 20
    assert inplace.prove(lib.read_bytes(), out.read_bytes(), KEEP) == []
    loaded = in_memory(out)           # the real loader: every address still maps
    for i, blob in enumerate(CONTAINERS):
        assert loaded[i] == (bytes(len(blob)) if i in RUN else blob), i
    assert result["arch_after"]["sm_100"] == sum(len(CONTAINERS[i]) - 16 for i in SHORT)
    assert {"ptx_70", "lto_50", "sm_80", "sm_90"} <= set(result["arch_after"])


def test_segments_and_sections_describe_the_zero_fill(tmp_path):
    lib = build_data_library(tmp_path / "src", CONTAINERS)
    data = lib.read_bytes()
    plan = inplace.plan_file(data, KEEP)
    (run,) = plan.runs
    out = tmp_path / "new.so"
    with open(out, "w+b") as f:
        inplace.write(data, plan, f)
    new = E.parse(out.read_bytes())
    head = next(p for p in new.loads() if p.vaddr < run.start < p.vaddr + p.memsz)
    # file bytes end on a granule (zeros from run.start up to it): the loader writes nothing
    assert run.start <= head.vaddr + head.filesz == run.tail - run.delta and head.memsz == run.tail - head.vaddr
    assert (head.vaddr + head.filesz) % E.GRANULE == 0
    assert any(p.vaddr == run.tail for p in new.loads())
    pieces = [s for s in new.sections if s.name == ".data"]
    assert [s.type for s in pieces] == [inplace.SHT_PROGBITS, E.SHT_NOBITS, inplace.SHT_PROGBITS]
    assert E.check_layout(new) == []


def test_prove_catches_a_kept_byte_changed_and_a_run_only_partly_zeroed(tmp_path):
    lib = build_data_library(tmp_path / "src", CONTAINERS)
    out = tmp_path / "out.so"
    assert files.prune_file(lib, KEEP, dest=out)["status"] == "pruned"
    old, new = lib.read_bytes(), bytearray(out.read_bytes())
    elf = E.parse(bytes(new))
    handle_at = [h for h in inplace.find(E.parse(old), old)]
    kept = handle_at[0]                         # the fleet container, before the run
    at = elf.vaddr_to_offset(kept.start + 100)
    changed = bytearray(new)
    changed[at] ^= 1
    assert any("changed" in p for p in inplace.prove(old, bytes(changed), KEEP))
    tail_piece = handle_at[RUN[-1]]             # the run's last container: file-backed zeros after the cut
    at = elf.vaddr_to_offset(tail_piece.end - 8)
    partly = bytearray(new)
    partly[at] = 1
    assert any("partly zeroed" in p for p in inplace.prove(old, bytes(partly), KEEP))


def test_a_non_zero_byte_between_containers_ends_a_run(tmp_path):
    # data that is not a container, between two halves of the run: two runs, the data kept between them
    lib = build_data_library(tmp_path / "src", CONTAINERS, gaps={20: b"\x01" * 16})
    out = tmp_path / "out.so"
    result = files.prune_file(lib, KEEP, dest=out)
    assert result["status"] == "pruned" and result["layout"].startswith("containers in place (2 run(s)"), result
    handle = ctypes.CDLL(str(out))
    handle.container_of.restype = ctypes.c_void_p
    assert ctypes.string_at(handle.container_of(20) + len(CONTAINERS[20]), 16) == b"\x01" * 16
    assert inplace.prove(lib.read_bytes(), out.read_bytes(), KEEP) == []


def test_a_run_ending_with_its_segments_file_bytes_is_cut(tmp_path):
    # the last container ends where the writable segment's file bytes end (an end address is exclusive)
    lib = build_data_library(tmp_path / "src", [fleet_container(archs=(80, 90), size=20_000, seed=1)] +
                             [blackwell(i) for i in range(8)])
    elf = E.parse(lib.read_bytes())
    last = inplace.find(elf, lib.read_bytes())[-1]
    assert any(p.vaddr + p.filesz == last.end for p in elf.loads())
    result = files.prune_file(lib, KEEP, dest=tmp_path / "out.so")
    assert result["status"] == "pruned" and result["containers_zeroed"] == 8, result


def test_a_listed_gpu_without_code_is_refused(tmp_path):
    lib = build_data_library(tmp_path / "src", CONTAINERS)
    result = files.prune_file(lib, (61, 90), dest=tmp_path / "out.so")
    assert result["status"] == "refused" and "no device code in this file runs on sm_61" in result["reason"]


def test_cuobjdump_must_list_what_was_zeroed(tmp_path):
    lib = build_data_library(tmp_path / "src", CONTAINERS)
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --list-elf ] && echo 'ELF file    1: x.1.sm_75.cubin'\nexit 0\n")
    fake.chmod(0o755)
    result = files.prune_file(lib, KEEP, dest=tmp_path / "out.so", cuobjdump=str(fake))
    assert result["status"] == "refused" and "cuobjdump lists other device code than zeroed" in result["reason"]


def test_cuobjdump_is_not_asked_for_the_lto_ir_it_never_lists(tmp_path):
    # a dropped container with LTO-IR for a later GPU beside its cubin: cuobjdump lists the cubin only
    store = [container(entry(KIND_CUBIN, 100, 40_000, seed=i), entry(KIND_LTOIR, 100, 9_000, seed=i))
             for i in range(40)]
    lib = build_data_library(tmp_path / "src", [CONTAINERS[0]] + store)
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --list-elf ] && for i in $(seq 40); do echo \"ELF file $i: x.$i.sm_100.cubin\"; done\n"
                    "exit 0\n")
    fake.chmod(0o755)
    result = files.prune_file(lib, KEEP, dest=tmp_path / "out.so", cuobjdump=str(fake))
    assert result["status"] == "pruned" and result["containers_zeroed"] == 40, result


def test_the_listing_elf_holds_the_dropped_containers_for_cuobjdump(tmp_path):
    lib = build_data_library(tmp_path / "src", CONTAINERS)
    data = lib.read_bytes()
    plan = inplace.plan_file(data, KEEP)
    blob = inplace.listing_elf(data, plan.dropped, E.EM_X86_64)
    elf = E.parse(blob)
    fat = elf.section(core.FATBIN)
    containers, _ = F.parse_section(blob, fat.offset, fat.size)
    assert [c.entries[0].label for c in containers] == ["sm_100"] * len(RUN)


def test_a_run_with_a_relocated_field_inside_is_not_cut(tmp_path):
    # a field the loader writes inside the run would mean it is not device code alone
    lib = build_data_library(tmp_path / "src", CONTAINERS)
    data = lib.read_bytes()
    elf = E.parse(data)
    run = inplace.plan_file(data, KEEP).runs[0]
    section = elf.sections[run.section.index]
    relocated = sorted({r.offset for r in E.relocations(elf, data)})
    assert inplace._sized(elf, relocated, run.start, run.end, section, run.count) == run
    inside = sorted(relocated + [run.start + 4096])
    assert inplace._sized(elf, inside, run.start, run.end, section, run.count) is None


def store_in_memory(lib: Path, blobs) -> list[bytes]:
    handle = ctypes.CDLL(str(lib))
    handle.store_of.restype = ctypes.c_void_p
    return [ctypes.string_at(handle.store_of(i), len(blob)) for i, blob in enumerate(blobs)]


# cuBLASLt's shape: kernels registered through wrappers in `.nv_fatbin`, and a kernel store of its own
# (`.cask_resource`, read-only, in a segment with code) with one container per kernel set, reached by
# address; in the real library every store container holds Blackwell cubins only.
STORE = [blackwell(200 + i) for i in range(30)] + [container(entry(KIND_CUBIN, 90, 20_000, seed=5))] + \
        [blackwell(300 + i) for i in range(30)]


def test_a_kernel_store_beside_the_fatbin_is_pruned_in_place_after_the_wrappers(tmp_path):
    lib = build_library(tmp_path / "src", [fleet_container(size=40_000, seed=i) for i in range(3)], layout="split",
                        store=tuple(STORE))
    segment = next(p for p in E.parse(lib.read_bytes()).loads()
                   if p.vaddr <= E.parse(lib.read_bytes()).section(".cask_resource").addr < p.vaddr + p.filesz)
    assert not segment.flags & 2  # read-only: the loader may not write into it
    out = tmp_path / "out" / "libcublasLt-like.so"
    result = files.prune_file(lib, KEEP, dest=out)
    assert result["status"] == "pruned", result
    first, data_pass = result["layout"].split("; .cask_resource: ")
    assert first.startswith("segment split") and data_pass.startswith("containers in place (2 run(s)")
    assert result["containers_zeroed"] == 60 and result["arch_after"].get("sm_100", 0) == 0
    assert result["arch_after"]["sm_90"] > 0  # the one store container the fleet runs stays
    assert result["bytes_before"] - result["bytes_after"] >= 2 << 20
    loaded = store_in_memory(out, STORE)  # the real loader maps every address of the store
    for i, blob in enumerate(STORE):
        assert loaded[i] == (blob if i == 30 else bytes(len(blob))), i
    assert store_in_memory(lib, STORE) == STORE


def test_a_table_moved_by_the_wrappers_pass_moves_again_mapped_once(tmp_path):
    # NVIDIA's aarch64 cuBLASLt: no build-id note, no free header bytes, .bss at the end. The wrappers'
    # pass moves the table past the file's end and maps it (PT_PHDR + its own LOAD); the store's pass
    # plans without that mapping, moves the table again and maps it anew: one PT_PHDR, one table LOAD.
    lib = build_library(tmp_path / "src", [fleet_container(size=40_000, seed=i) for i in range(3)], layout="split",
                        store=tuple(STORE), ldflags=("-Wl,--build-id=none", "-s"),
                        extra_c="static char zeros[1 << 16]; char *bss(void) { return zeros; }")
    assert not [p for p in E.parse(lib.read_bytes()).segments if p.type in (E.PT_NOTE, E.PT_PHDR)]
    out = tmp_path / "out" / "libcublasLt-like.so"
    result = files.prune_file(lib, KEEP, dest=out)
    assert result["status"] == "pruned" and result["layout"].count(E.TABLE_MOVED) == 2, result
    new = E.parse(out.read_bytes())
    assert [p.type for p in new.segments].count(E.PT_PHDR) == 1 and E.table_segments(new) is not None
    assert E.check_layout(new) == [] and new.segments[0].type == E.PT_PHDR
    assert [p.type for p in E.unmapped(new).segments].count(E.PT_PHDR) == 0
    loaded = store_in_memory(out, STORE)
    assert all(loaded[i] == (blob if i == 30 else bytes(len(blob))) for i, blob in enumerate(STORE))
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "loaded_tables.py"), str(out)],
                         capture_output=True, text=True)
    assert json.loads(run.stdout)[str(out)] == {"listed": 0, "said": [], "same_in_memory": True}, run.stderr[-300:]


def test_a_kernel_store_the_fleet_needs_whole_stays(tmp_path):
    store = [container(entry(KIND_CUBIN, 90, 48_000, seed=i)) for i in range(60)]
    lib = build_library(tmp_path / "src", [fleet_container(size=40_000, seed=1)], layout="split", store=tuple(store))
    out = tmp_path / "out.so"
    result = files.prune_file(lib, KEEP, dest=out)
    assert result["status"] == "pruned" and ".cask_resource" not in result["layout"], result  # the wrappers' pass only
    assert store_in_memory(out, store) == store
