"""Device-code samples for the pruner's tests: fatbin containers made byte by byte (the layout of
src/rapidship/builder/prune/fatbin.py) and shared libraries that carry them, linked by the real gcc + ld.

The libraries register their containers the way nvcc output does: a `.nvFatBinSegment` array of
24-byte wrappers whose data pointers the dynamic loader relocates. `data_of(i)` returns wrapper i's
pointer after loading, so a test can dlopen a pruned library and read what the loader really sees.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from pathlib import Path

MAGIC = 0xBA55ED50
KIND_PTX, KIND_CUBIN, KIND_LTOIR = 1, 2, 8
SPECIFIC = 1 << 20
ENTRY_HEADER = 64


def entry(kind: int, arch: int, payload_bytes: int, flags: int = 0x2011, seed: int = 0) -> bytes:
    """One fatbin entry: a 64-byte header (kind, version, header size, padded size; payload size at
    20, arch at 28, flags at 40) and a payload of random bytes padded to 8."""
    rng = random.Random(f"{kind}-{arch}-{payload_bytes}-{flags}-{seed}")
    payload = rng.randbytes(payload_bytes)
    payload += b"\0" * (-len(payload) % 8)
    header = bytearray(ENTRY_HEADER)
    struct.pack_into("<HHIQ", header, 0, kind, 0x0101, ENTRY_HEADER, len(payload))
    struct.pack_into("<I", header, 20, payload_bytes)
    struct.pack_into("<I", header, 28, arch)
    struct.pack_into("<Q", header, 40, flags)
    return bytes(header) + payload


def container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body


def fleet_container(archs=(70, 80, 86, 90, 100, 120), size: int = 40_000, seed: int = 0, ptx: int | None = 120) -> bytes:
    """A container like most in RAPIDS and CUDA libraries: a cubin per arch plus newest PTX."""
    parts = [entry(KIND_CUBIN, a, size, seed=seed) for a in archs]
    if ptx:
        parts.append(entry(KIND_PTX, ptx, size // 2, seed=seed))
    return container(*parts)


def gcc() -> str | None:
    return shutil.which("gcc")


def build_library(out: Path, containers: list[bytes], *, layout: str, extra_c: str = "",
                  ldflags: tuple[str, ...] = (), lead: bytes | None = None,
                  relfatbin: tuple[bytes, ...] = (), linked: tuple[int, ...] = (),
                  store: tuple[bytes, ...] = ()) -> Path:
    """Link a shared library holding `containers` in `.nv_fatbin`.

    layout "segment-end": `.nv_fatbin` writable and last in the RW segment (no C runtime, no .bss),
    like the RAPIDS libraries lld links. layout "split": `.nv_fatbin` read-only among .rodata with
    .eh_frame after it in the same segment, like NVIDIA's CUDA libraries. `lead`: a first container
    no wrapper registers, reached by code through a PC-relative address (`lead_of()`), as in
    libcurand and libcusparse. `relfatbin`: more containers in a `__nv_relfatbin` section before
    `.nv_fatbin`, each with its own wrapper after the others (NCCL's relocatable fatbins).
    `linked`: indices of `containers` whose wrapper is version 2 (a device-linked module) with its
    prelinked-list field pointing at a zeroed array, as NCCL's are. `store`: more containers in a
    read-only `.cask_resource` after `.nv_fatbin`, no wrapper, reached by code through PC-relative
    addresses (`store_of(i)`): cuBLASLt's own kernel store.
    """
    out.mkdir(parents=True, exist_ok=True)
    flags = '"aw"' if layout == "segment-end" else '"a"'
    asm = [f".section .nv_fatbin,{flags}"]
    if lead is not None:
        (out / "lead.bin").write_bytes(lead)
        asm += [".balign 8", ".globl fb_lead", ".hidden fb_lead", "fb_lead:", f'.incbin "{out / "lead.bin"}"']
    for i, blob in enumerate(containers):
        (out / f"c{i}.bin").write_bytes(blob)
        asm += [".balign 8", f".globl fb{i}", f".hidden fb{i}", f"fb{i}:", f'.incbin "{out / f"c{i}.bin"}"']
    if relfatbin:
        asm += ['.section __nv_relfatbin,"a"']
        for j, blob in enumerate(relfatbin):
            (out / f"r{j}.bin").write_bytes(blob)
            asm += [".balign 8", f".globl rb{j}", f".hidden rb{j}", f"rb{j}:", f'.incbin "{out / f"r{j}.bin"}"']
    if store:
        asm += ['.section .cask_resource,"a"']
        for k, blob in enumerate(store):
            (out / f"s{k}.bin").write_bytes(blob)
            asm += [".balign 8", f".globl sb{k}", f".hidden sb{k}", f"sb{k}:", f'.incbin "{out / f"s{k}.bin"}"']
    (out / "fatbin.S").write_text("\n".join(asm) + "\n")
    # hidden, like nvcc's fatbin symbols: the wrappers get relative relocations, not symbolic ones
    externs = "\n".join([f'__attribute__((visibility("hidden"))) extern const char fb{i}[];'
                          for i in range(len(containers))] +
                         [f'__attribute__((visibility("hidden"))) extern const char rb{j}[];'
                          for j in range(len(relfatbin))] + ["static const void *prelinked_list[4];"])
    rows = ",\n".join([f"  {{0x466243b1u, {2 if i in linked else 1}u, fb{i}, {'prelinked_list' if i in linked else '0'}}}"
                        for i in range(len(containers))] +
                       [f"  {{0x466243b1u, 1u, rb{j}, 0}}" for j in range(len(relfatbin))])
    lead_c = ("__attribute__((visibility(\"hidden\"))) extern const char fb_lead[];\n"
              "const void *lead_of(void) { return fb_lead; }") if lead is not None else ""
    store_c = "\n".join([f'__attribute__((visibility("hidden"))) extern const char sb{k}[];' for k in range(len(store))] + [
        "const void *store_of(int i) {", "  switch (i) {" + " ".join(f"case {k}: return sb{k};" for k in range(len(store))) + " }",
        "  return 0;", "}"]) if store else ""
    source = f"""{externs}
struct wrapper {{ unsigned magic, version; const void *data; const void *prelinked; }};
__attribute__((section(".nvFatBinSegment"), used)) struct wrapper wrappers[] = {{
{rows}
}};
const void *data_of(int i) {{ return wrappers[i].data; }}
int count(void) {{ return {len(containers) + len(relfatbin)}; }}
{lead_c}
{store_c}
{extra_c}
"""
    src = out / "lib.c"
    src.write_text(source)
    lib = out / "libsample.so"
    cmd = [gcc() or "gcc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src), str(out / "fatbin.S")]
    if layout == "segment-end":
        cmd += ["-nostdlib"]
    subprocess.run(cmd + list(ldflags), check=True, capture_output=True, text=True)
    return lib


def build_data_library(out: Path, containers: list[bytes], gaps: dict[int, bytes] | None = None) -> Path:
    """Link a shared library that keeps `containers` in its writable `.data`, with no wrapper and no
    relocation: code reaches container i by a PC-relative address (`container_of(i)`), as libcufft's
    does. `gaps[i]`: bytes placed after container i (zero padding, or data that is not a container)."""
    out.mkdir(parents=True, exist_ok=True)
    asm = [".section .data"]
    for i, blob in enumerate(containers):
        (out / f"d{i}.bin").write_bytes(blob)
        asm += [".balign 16", f".globl dc{i}", f".hidden dc{i}", f"dc{i}:", f'.incbin "{out / f"d{i}.bin"}"']
        if gaps and i in gaps:
            (out / f"g{i}.bin").write_bytes(gaps[i])
            asm += [f'.incbin "{out / f"g{i}.bin"}"']
    (out / "data.S").write_text("\n".join(asm) + "\n")
    externs = "\n".join(f'__attribute__((visibility("hidden"))) extern const char dc{i}[];' for i in range(len(containers)))
    source = f"""{externs}
const void *container_of(int i) {{
  switch (i) {{ {" ".join(f"case {i}: return dc{i};" for i in range(len(containers)))} }}
  return 0;
}}
int count(void) {{ return {len(containers)}; }}
"""
    (out / "lib.c").write_text(source)
    lib = out / "libdata.so"
    subprocess.run([gcc() or "gcc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(out / "lib.c"), str(out / "data.S")],
                   check=True, capture_output=True, text=True)
    return lib
