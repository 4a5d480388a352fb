"""A test copy of a library whose sm_90 cubins in one section are relabelled sm_80 (the entry
header's arch, bit 20 of its flags cleared): the driver then finds no code for an sm_90 GPU there.
The NCCL proof uses it to take away one of the two places a kernel can come from (the device-linked
module in .nv_fatbin, or __nv_relfatbin, which the runtime links when that module has no code).

  python3 bench/gpu/jobs/nccl_relabel.py IN OUT SECTION [SECTION ...]
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src" / "rapidship" / "builder"))
from prune import elf as E
from prune import fatbin as F


def main() -> int:
    src, dst, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    data = bytearray(src.read_bytes())
    elf = E.parse(bytes(data))
    for name in names:
        s = elf.section(name)
        containers, _ = F.parse_section(data, s.offset, s.size)
        count = 0
        for c in containers:
            for e in c.entries:
                if e.kind == F.KIND_CUBIN and e.arch == 90:
                    at = s.offset + e.offset
                    struct.pack_into("<I", data, at + 28, 80)
                    struct.pack_into("<Q", data, at + 40, e.flags & ~F.ARCH_SPECIFIC)
                    count += 1
        print(f"{name}: {count} sm_90 cubins relabelled sm_80")
    dst.write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
