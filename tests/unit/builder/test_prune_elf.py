"""The pruner on real shared libraries linked by gcc + ld, in both layouts CUDA libraries use.

Each pruned library is loaded by the real dynamic loader (ctypes dlopen): the wrapper pointers it
relocates must land on containers that hold exactly the kept entries. Each refusal path leaves the
file byte-identical and says why.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.commands import ROOT
from support.fatbin_samples import KIND_CUBIN, build_library, container, entry, fleet_container, gcc
from rapidship.builder.prune import core, files
from rapidship.builder.prune import elf as E
from rapidship.builder.prune import fatbin as F

pytestmark = pytest.mark.skipif(gcc() is None and not os.environ.get("CI"), reason="needs gcc (CI installs it)")
KEEP = (80, 90)
SUPPORT = ROOT / "tests" / "support"
CONTAINERS = [fleet_container(size=40_000, seed=i) for i in range(3)]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def expected_container(blob: bytes, keep=KEEP) -> bytes:
    (c,) = F.parse_section(blob, 0, len(blob))[0]
    return F.write_container(blob, 0, c, F.select(c, keep))


def loaded_containers(lib: Path) -> list[bytes]:
    """What the dynamic loader makes of the wrappers: each data pointer's container, read from memory."""
    handle = ctypes.CDLL(str(lib))
    handle.data_of.restype = ctypes.c_void_p
    out = []
    for i in range(handle.count()):
        ptr = handle.data_of(i)
        _magic, _v, hsize, payload = F.CONTAINER.unpack(ctypes.string_at(ptr, 16))
        out.append(ctypes.string_at(ptr, hsize + payload))
    return out


@pytest.mark.parametrize("layout,how", [("segment-end", "segment end"), ("split", "segment split")])
def test_pruned_library_is_smaller_proven_and_loads(tmp_path, layout, how):
    lib = build_library(tmp_path / "src", CONTAINERS, layout=layout)
    before = lib.stat().st_size
    out = tmp_path / "out" / f"lib-{layout}.so"
    entry_ = files.prune_file(lib, KEEP, dest=out)
    assert entry_["status"] == "pruned", entry_
    assert entry_["layout"].startswith(how)
    assert out.stat().st_size == entry_["bytes_after"] <= before - E.GRANULE
    with open(lib, "rb") as a, open(out, "rb") as b:
        old = mmap.mmap(a.fileno(), 0, access=mmap.ACCESS_READ)
        new = mmap.mmap(b.fileno(), 0, access=mmap.ACCESS_READ)
        assert core.prove(old, new, KEEP) == []
        assert E.check_layout(E.parse(new)) == []
    assert set(entry_["arch_after"]) == {"sm_80", "sm_90"}
    # binutils reads it, and the loader maps it with every wrapper on its pruned container
    subprocess.run(["readelf", "-lSW", str(out)], check=True, capture_output=True)
    assert loaded_containers(out) == [expected_container(c) for c in CONTAINERS]
    assert loaded_containers(lib) == CONTAINERS  # the original, for contrast


def test_split_layout_keeps_the_code_after_the_device_code_working(tmp_path):
    # Functions and their unwind tables sit after .nv_fatbin in NVIDIA's layout: a C++ exception
    # thrown and caught inside the pruned library proves .eh_frame_hdr still maps at its address.
    lib_dir = tmp_path / "src"
    build_library(lib_dir, CONTAINERS, layout="split")  # writes lib.c and fatbin.S, linked below with C++
    cpp = lib_dir / "throw.cc"
    cpp.write_text('extern "C" int throws(int x) { try { if (x) throw x; } catch (int v) { return v * 2; } return -1; }\n')
    obj = lib_dir / "libthrow.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(obj), str(lib_dir / "lib.c"), str(lib_dir / "fatbin.S"),
                    "-x", "c++", str(cpp)], check=True, capture_output=True)
    out = tmp_path / "libthrow-pruned.so"
    assert files.prune_file(obj, KEEP, dest=out)["status"] == "pruned"
    assert ctypes.CDLL(str(out)).throws(21) == 42


def _refused(lib: Path, keep=KEEP, **kw) -> dict:
    digest = sha(lib)
    result = files.prune_file(lib, keep, **kw)
    assert result["status"] == "refused", result
    assert sha(lib) == digest, "a refused file must stay byte-identical"
    return result


def test_refused_corrupt_fatbin(tmp_path):
    lib = build_library(tmp_path, [CONTAINERS[0], b"\x07" * 64, CONTAINERS[1]], layout="segment-end")
    assert "no fatbin container" in _refused(lib)["reason"]


def test_refused_when_other_code_points_into_the_device_code(tmp_path):
    lib = build_library(tmp_path, CONTAINERS, layout="segment-end",
                        extra_c="__attribute__((used)) const void *inner = fb0 + 80;")
    assert "points into .nv_fatbin" in _refused(lib)["reason"]


def test_with_no_header_slot_the_table_moves_to_the_file_end_and_the_loader_follows(tmp_path):
    # NVIDIA's aarch64 libraries: no build-id note, no free bytes after the program headers, no
    # PT_PHDR. The grown table goes past the last byte, mapped there by its own segment; the real
    # loader maps the library from it, and a C++ exception (the unwinder walks the table) still works.
    lib_dir = tmp_path / "src"
    lib = build_library(lib_dir, CONTAINERS, layout="split", ldflags=("-Wl,--build-id=none",))
    (lib_dir / "throw.cc").write_text('extern "C" int throws(int x) { try { if (x) throw x; } catch (int v) '
                                      '{ return v * 2; } return -1; }\n')
    both = lib_dir / "libboth.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-Wl,--build-id=none", "-o", str(both), str(lib_dir / "lib.c"),
                    str(lib_dir / "fatbin.S"), "-x", "c++", str(lib_dir / "throw.cc")], check=True, capture_output=True)
    for original in (lib, both):
        old_elf = E.parse(original.read_bytes())
        assert not [s for s in old_elf.segments if s.type in (E.PT_NOTE, E.PT_PHDR)]
        out = tmp_path / "out" / original.name
        result = files.prune_file(original, KEEP, dest=out)
        assert result["status"] == "pruned" and E.TABLE_MOVED in result["layout"], result
        data = out.read_bytes()
        new_elf = E.parse(data)
        assert new_elf.phoff >= new_elf.shoff and new_elf.phoff + len(new_elf.segments) * E.PHDR.size == len(data)
        # one more for the split, two that map the moved table (a PT_PHDR and a LOAD of it)
        assert len(new_elf.segments) == len(old_elf.segments) + 3 and E.check_layout(new_elf) == []
        assert E.table_segments(new_elf) is not None and E.unmapped(new_elf).phoff == new_elf.phoff
        assert core.prove(original.read_bytes(), data, KEEP) == []
        subprocess.run(["readelf", "-lSW", str(out)], check=True, capture_output=True)
    assert loaded_containers(tmp_path / "out" / lib.name) == [expected_container(c) for c in CONTAINERS]
    assert ctypes.CDLL(str(tmp_path / "out" / both.name)).throws(21) == 42


def test_a_moved_table_is_where_the_loader_reads_it_even_beside_bss(tmp_path):
    # NVIDIA's aarch64 libcurand: stripped, a .bss after the last segment's file bytes, no slot for
    # one more header. The moved table lay inside the last segment's last page, which glibc maps and
    # then zero-fills past the file bytes: dl_iterate_phdr read zeros (no PT_GNU_EH_FRAME, so a C++
    # exception could not unwind), and `ld.so --list` failed an assertion (no PT_TLS seen). The table
    # is now mapped by its own read-only segment and named by a PT_PHDR.
    lib_dir = tmp_path / "src"
    build_library(lib_dir, CONTAINERS, layout="split", extra_c="static char zeros[1 << 16]; char *bss(void) { return zeros; }")
    (lib_dir / "throw.cc").write_text('extern "C" int throws(int x) { try { if (x) throw x; } catch (int v) '
                                      '{ return v * 2; } return -1; }\n')
    lib = lib_dir / "libbss.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-s", "-Wl,--build-id=none", "-o", str(lib), str(lib_dir / "lib.c"),
                    str(lib_dir / "fatbin.S"), "-x", "c++", str(lib_dir / "throw.cc")], check=True, capture_output=True)
    old_elf = E.parse(lib.read_bytes())
    assert old_elf.loads()[-1].memsz > old_elf.loads()[-1].filesz, "the sample must end in .bss"
    out = tmp_path / "out" / lib.name
    result = files.prune_file(lib, KEEP, dest=out)
    assert result["status"] == "pruned" and E.TABLE_MOVED in result["layout"], result
    new_elf = E.parse(out.read_bytes())
    assert E.table_problems(new_elf) == [] and E.check_layout(new_elf) == []
    assert new_elf.segments[0].type == E.PT_PHDR
    # the loader's view: dl_iterate_phdr hands out the file's table, `ld.so --list` (ldd) accepts the library
    run = subprocess.run([sys.executable, str(SUPPORT / "loaded_tables.py"), str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-500:]
    assert json.loads(run.stdout)[str(out)] == {"listed": 0, "said": [], "same_in_memory": True}
    # and a C++ exception thrown in it unwinds (it terminated the process when the table read as zeros)
    thrown = subprocess.run([sys.executable, "-c", f"import ctypes; print(ctypes.CDLL({str(out)!r}).throws(21))"],
                            capture_output=True, text=True)
    assert thrown.stdout.strip() == "42", thrown.stderr[-300:]
    # the layout written before, the table unmapped where it lies: every proof refuses it
    data = bytearray(out.read_bytes())
    bare = E.unmapped(new_elf).segments
    data[new_elf.phoff:new_elf.phoff + len(new_elf.segments) * E.PHDR.size] = \
        b"".join(p.pack() for p in bare) + bytes(2 * E.PHDR.size)
    data[56:58] = len(bare).to_bytes(2, "little")
    problems = core.prove(lib.read_bytes(), bytes(data), KEEP)
    assert any("reads it from memory there, where .bss leaves zeros" in p for p in problems), problems


def test_the_table_rule_names_each_way_the_loader_would_misread_it():
    text = E.Segment(E.PT_LOAD, 5, 0, 0, 0, 0x1000, 0x1000, 0x1000)
    data = E.Segment(E.PT_LOAD, 6, 0x2000, 0x2000, 0x2000, 0x100, 0x3000, 0x1000)
    def elf(*segments, phoff):
        return E.Elf(E.EM_X86_64, phoff, 0, E.PHDR.size, E.SHDR.size, segments, (), 0x10000)
    assert E.table_problems(elf(text, data, phoff=64)) == []            # as linkers write it
    assert E.table_problems(elf(text, data, phoff=0x8000)) == []        # past every mapped page: read from the file
    # the layout the pruner wrote before: past the file bytes, inside the last page, .bss after them
    assert "zero" in E.table_problems(elf(text, data, phoff=0x2200))[0]
    table = 4 * E.PHDR.size
    mapped = E.Segment(E.PT_LOAD, 4, 0x2200, 0x10200, 0x10200, table, table, 0x1000)
    phdr = E.Segment(E.PT_PHDR, 4, 0x2200, 0x10200, 0x10200, table, table, 8)
    assert E.table_problems(elf(phdr, text, data, mapped, phoff=0x2200)) == []
    wrong = E.Segment(E.PT_PHDR, 4, 0x2200, 0x10300, 0x10300, table, table, 8)
    assert "PT_PHDR" in E.table_problems(elf(wrong, text, data, mapped, phoff=0x2200))[0]


def test_refused_when_a_pt_phdr_pins_a_full_table(tmp_path):
    # A PT_PHDR says where the table is in memory: with no slot, the table cannot move, so the file stays whole.
    lib = build_library(tmp_path, CONTAINERS, layout="split", ldflags=("-Wl,--build-id=none",))
    data = bytearray(lib.read_bytes())
    elf = E.parse(bytes(data))
    stack = next(i for i, s in enumerate(elf.segments) if s.type == 0x6474E551)  # PT_GNU_STACK -> PT_PHDR
    data[elf.phoff + stack * E.PHDR.size:elf.phoff + stack * E.PHDR.size + 4] = E.PT_PHDR.to_bytes(4, "little")
    lib.write_bytes(bytes(data))
    assert "a PT_PHDR keeps the table where it is" in _refused(lib)["reason"]


def test_refused_when_a_listed_gpu_has_no_code_in_the_library(tmp_path):
    lib = build_library(tmp_path, CONTAINERS, layout="segment-end")
    assert "no device code in this file runs on sm_61" in _refused(lib, keep=(61, 90))["reason"]


def test_refused_when_cuobjdump_disagrees(tmp_path):
    lib = build_library(tmp_path / "src", CONTAINERS, layout="segment-end")
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --list-elf ] && echo 'ELF file    1: x.1.sm_75.cubin'\nexit 0\n")
    fake.chmod(0o755)
    result = _refused(lib, cuobjdump=str(fake))
    assert "cuobjdump lists other device code" in result["reason"]


def test_a_leading_container_used_by_address_keeps_its_place_and_bytes(tmp_path):
    # libcurand and libcusparse load their first container by address, not through a wrapper.
    lead = fleet_container(size=20_000, seed=9)
    lib = build_library(tmp_path / "src", CONTAINERS, layout="split", lead=lead)
    out = tmp_path / "lib-lead.so"
    result = files.prune_file(lib, KEEP, dest=out)
    assert result["status"] == "pruned" and "kept in place" in result["notes"][0]
    handle = ctypes.CDLL(str(out))
    handle.lead_of.restype = ctypes.c_void_p
    assert ctypes.string_at(handle.lead_of(), len(lead)) == lead
    assert loaded_containers(out) == [expected_container(c) for c in CONTAINERS]


def test_files_without_device_code_are_left_alone(tmp_path):
    plain = tmp_path / "libplain.so"
    src = tmp_path / "p.c"
    src.write_text("int f(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(plain), str(src)], check=True)
    result = files.prune_file(plain, KEEP)
    assert result["status"] == "unchanged" and result["reason"] == "no device code"


def test_in_place_rewrite_keeps_the_mode_and_breaks_hard_links(tmp_path):
    lib = build_library(tmp_path / "src", CONTAINERS, layout="segment-end")
    lib.chmod(0o750)
    cache_copy = tmp_path / "pkgs-cache.so"
    os.link(lib, cache_copy)  # conda envs hard-link files from their package cache
    digest = sha(cache_copy)
    assert files.prune_file(lib, KEEP)["status"] == "pruned"
    assert stat.S_IMODE(lib.stat().st_mode) == 0o750
    assert sha(cache_copy) == digest and lib.stat().st_ino != cache_copy.stat().st_ino


def test_tree_record_counts_and_sums(tmp_path):
    root = tmp_path / "env"
    build_library(root / "a", CONTAINERS, layout="segment-end")
    build_library(root / "b", CONTAINERS[:2], layout="split")
    (root / "notes.txt").write_text("not an ELF file")
    rec = files.prune_paths([root], KEEP, jobs=2)
    t = rec["totals"]
    assert rec["keep"] == [80, 90] and rec["schema_version"] == files.SCHEMA_VERSION
    assert t["pruned"] == 2 and t["refused"] == 0 and t["with_device_code"] == 2
    assert t["saved_bytes"] == t["bytes_before"] - t["bytes_after"] > 2 * E.GRANULE
    assert {f["path"] for f in rec["files"]} == {"a/libsample.so", "b/libsample.so"}
    assert set(t["arch_after"]) == {"sm_80", "sm_90"} and "sm_120" in t["arch_before"]
    json.dumps(rec)  # the record is JSON as it stands


def _wheel(tmp_path: Path, lib: Path) -> Path:
    import base64

    members = {"pkg/lib/libsample.so": lib.read_bytes(), "pkg/__init__.py": b"x = 1\n",
               "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n"}
    lines = []
    for name, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}")
    lines.append("pkg-1.0.dist-info/RECORD,,")
    wheel = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
        z.writestr("pkg-1.0.dist-info/RECORD", "\n".join(lines) + "\n")
    return wheel


def test_a_wheel_comes_back_as_a_wheel_with_a_correct_record(tmp_path):
    import base64

    lib = build_library(tmp_path / "src", CONTAINERS, layout="split")
    wheel = _wheel(tmp_path, lib)
    rec = files.prune_paths([wheel], KEEP, out=tmp_path / "out")
    pruned = tmp_path / "out" / wheel.name
    assert rec["totals"]["pruned"] == 1 and rec["wheels"][0]["pruned_members"] == ["pkg/lib/libsample.so"]
    assert pruned.stat().st_size < wheel.stat().st_size
    with zipfile.ZipFile(pruned) as z, zipfile.ZipFile(wheel) as orig:
        assert z.namelist() == orig.namelist()
        assert z.read("pkg/__init__.py") == orig.read("pkg/__init__.py")
        record = z.read("pkg-1.0.dist-info/RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.split(",")
            if not digest:
                continue
            data = z.read(name)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert int(size) == len(data)
        assert len(z.read("pkg/lib/libsample.so")) < len(orig.read("pkg/lib/libsample.so"))


def test_small_device_code_is_not_worth_a_rewrite(tmp_path):
    lib = build_library(tmp_path, [container(entry(KIND_CUBIN, 80, 512), entry(KIND_CUBIN, 90, 512))],
                        layout="segment-end")
    result = files.prune_file(lib, (90,))
    assert result["status"] == "unchanged" and "too small" in result["reason"]


@pytest.mark.parametrize("section,at", [(".text", 4), (".rela.dyn", 4), (".nvFatBinSegment", 20)])
def test_prove_catches_a_byte_changed_outside_the_fields_the_rewrite_owns(tmp_path, section, at):
    import io

    lib = build_library(tmp_path, CONTAINERS, layout="split")
    data = lib.read_bytes()
    plan = core.plan_file(data, KEEP)
    out = io.BytesIO()
    core.write(data, plan, out)
    new = bytearray(out.getvalue())
    assert core.prove(data, bytes(new), KEEP) == []
    s = E.parse(new).section(section)
    new[s.offset + at] ^= 1  # not a wrapper data pointer nor a relocation addend (byte 20: a wrapper's 4th field)
    assert f"section {section} changed beyond the wrapper pointers" in core.prove(data, bytes(new), KEEP)


def test_a_wheel_with_nothing_to_prune_comes_back_byte_identical(tmp_path):
    """The aarch64 libnvjpeg 12.4 wheel (its only library refused) came back 140 bytes larger: re-zipped."""
    lib = build_library(tmp_path / "src", CONTAINERS, layout="split")
    wheel = _wheel(tmp_path, lib)
    rec = files.prune_paths([wheel], (10,), out=tmp_path / "out")     # sm_10: nothing in it is kept or dropped
    assert rec["wheels"][0]["pruned_members"] == []
    assert (tmp_path / "out" / wheel.name).read_bytes() == wheel.read_bytes()


@pytest.mark.parametrize("layout", ["segment-end", "split"])
def test_nccl_style_relocatable_fatbins_are_pruned_in_a_second_pass_and_linked_modules_repointed(tmp_path, layout):
    # libnccl: some wrappers register containers in __nv_relfatbin (the runtime links those when
    # the device-linked module has no code for the GPU), two are version 2 (device-linked modules
    # whose last field lists prelinked fatbins): both sections are pruned, each in its own pass
    outside = (fleet_container(size=30_000, seed=7),)
    lib = build_library(tmp_path / "src", CONTAINERS, layout=layout, relfatbin=outside, linked=(1,))
    out = tmp_path / "out" / "libnccl-like.so"
    result = files.prune_file(lib, KEEP, dest=out)
    assert result["status"] == "pruned", result
    assert f"; {core.RELFATBIN}: segment split" in result["layout"]
    assert result["containers"] == len(CONTAINERS) + len(outside)
    # pass by pass: .nv_fatbin first, then __nv_relfatbin on that result, each proven
    first = core.plan_file(lib.read_bytes(), KEEP)
    middle = tmp_path / "middle.so"
    with open(middle, "w+b") as f:
        core.write(lib.read_bytes(), first, f)
    assert core.prove(lib.read_bytes(), middle.read_bytes(), KEEP) == []
    assert core.prove(middle.read_bytes(), out.read_bytes(), KEEP, core.RELFATBIN) == []
    loaded = loaded_containers(out)
    assert loaded[:3] == [expected_container(c) for c in CONTAINERS]  # re-pointed, pruned
    assert loaded[3:] == [expected_container(c) for c in outside]     # and the relocatable ones


def test_a_refused_second_pass_leaves_the_first_standing_with_a_note(tmp_path):
    outside = (fleet_container(size=30_000, seed=7),)
    lib = build_library(tmp_path / "src", CONTAINERS, layout="split", relfatbin=outside,
                        extra_c='__attribute__((visibility("hidden"))) extern const char rb0[];\n'
                                'const void *into_relfat = rb0 + 64;')  # something else points inside
    result = files.prune_file(lib, KEEP, dest=tmp_path / "out.so")
    assert result["status"] == "pruned" and core.RELFATBIN not in result["layout"]
    assert any(n.startswith(f"{core.RELFATBIN} left whole: a relocation") for n in result["notes"]), result["notes"]
    assert loaded_containers(tmp_path / "out.so")[3:] == list(outside)


def test_a_wrapper_pointing_inside_the_device_code_but_not_at_a_container_is_still_refused(tmp_path):
    lib = build_library(tmp_path, CONTAINERS, layout="split", extra_c="")
    data = bytearray(lib.read_bytes())
    elf = E.parse(bytes(data))
    seg = elf.section(core.WRAPPERS)
    relocs = {r.offset: r for r in E.relocations(elf, bytes(data))}
    reloc = relocs[seg.addr + 8]  # wrapper 0's data pointer
    fat = elf.section(core.FATBIN)
    rela = next(s for s in elf.sections if s.name == ".rela.dyn")
    index = next(i for i, r in enumerate(E.RELA.iter_unpack(bytes(data[rela.offset:rela.offset + rela.size])))
                 if r[0] == reloc.offset)
    at = rela.offset + index * E.RELA.size + 16
    data[at:at + 8] = (fat.addr + 64).to_bytes(8, "little")  # 64 bytes into the first container
    data[seg.offset + 8:seg.offset + 16] = (fat.addr + 64).to_bytes(8, "little")
    lib.write_bytes(bytes(data))
    assert "not at a container start" in _refused(lib)["reason"]
