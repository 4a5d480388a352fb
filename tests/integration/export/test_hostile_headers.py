"""A courier's tar headers: a disc whose archive starts with a pax header declaring gigabytes (its
records: zeros, ~50 kB once compressed), or that carries thousands of empty members.

The real signed disc (conftest), its archive replaced and the volume resealed. `invoke import` and
`invoke export-verify` run under a 1 GiB address-space cap and refuse the disc with one sentence
(no MemoryError traceback); install.sh refuses it too, and no process of it grows past its own
memory cap (the largest resident set among its processes is measured). Thousands of empty members
cost install.sh a bounded number of shells: it stops at the most a docker save of the disc's
images can hold.
"""

from __future__ import annotations

import io
import os
import resource
import subprocess
import sys
import tarfile

import pytest

from support.archives import Zeros, extended_header
from support.commands import ROOT
from support.signed_discs import ARCHES, error_of, forge, forge_stream, from_args, install

pytestmark = pytest.mark.docker
DECLARED = 3 << 29  # 1.5 GiB of pax records
CAP = 1 << 30


def capped(env: dict, *args: str) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))

    return subprocess.run(["invoke", *args], cwd=ROOT, env=env, capture_output=True, text=True, preexec_fn=limit)


def install_peak(disc, dirs, *flags: str) -> tuple[subprocess.CompletedProcess, int]:
    """install.sh, and the largest resident set (bytes) any of its processes reached."""
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\n' + p.stdout); "
             "sys.stderr.write(p.stderr); sys.exit(p.returncode)")
    proc = subprocess.run([sys.executable, "-c", probe, "sh", str(dirs[0] / "install.sh"), *flags, *map(str, dirs)],
                          capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(disc.work)))
    peak, _, rest = proc.stdout.partition("\n")
    return subprocess.CompletedProcess(proc.args, proc.returncode, rest, proc.stderr), int(peak) * 1024


@pytest.fixture(scope="module")
def huge_pax(signed, tmp_path_factory):
    archive = signed.saved.read_bytes()
    return forge_stream(signed, Zeros(extended_header(tarfile.XHDTYPE, DECLARED), DECLARED, archive),
                        tmp_path_factory.mktemp("huge-pax"))


def test_a_huge_pax_header_is_refused_by_import_and_export_verify_under_a_memory_cap(signed, absent, huge_pax):
    assert sum(p.stat().st_size for p in huge_pax[0].glob("images.tar.zst.*")) < 1 << 20  # 1.5 GiB declared
    for task in ("import", "export-verify"):
        proc = capped(signed.env, task, *from_args(huge_pax), "--key", str(signed.pub), "--work", str(signed.work))
        message = error_of(proc)
        assert proc.returncode == 1 and "MemoryError" not in proc.stderr, proc.stderr
        assert (f"member 0 has an extended header of {DECLARED:,} bytes, more than the 1,048,576 any tar writer "
                "needs") in message and "nothing was loaded" in message, message
    assert signed.nothing_loaded()


def test_install_sh_refuses_a_huge_pax_header_within_its_memory_cap(signed, absent, huge_pax):
    proc, peak = install_peak(signed, huge_pax, "--key", str(signed.pub))
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "the archive is not a readable tar (tar: " in last, proc.stderr
    assert "nothing was loaded" in last and "loading into docker" not in proc.stderr
    assert peak < 600 << 20, f"a process of install.sh reached {peak:,} bytes"
    assert signed.nothing_loaded()


def with_members(archive: bytes, extra: int) -> bytes:
    """`archive` with `extra` empty regular files appended (each costs a reader one header)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(archive)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src:
            dst.addfile(member, src.extractfile(member) if member.isreg() else None)
        for n in range(extra):
            dst.addfile(tarfile.TarInfo(f"empty/{n}"))
    return out.getvalue()


def test_install_sh_stops_at_the_most_members_the_images_can_have(signed, absent, tmp_path):
    import json

    from rapidship.export.write import ImageRecord, members_max

    doc = json.loads((signed.dirs[0] / "MANIFEST.json").read_text())
    most = members_max([ImageRecord(**i) for i in doc["images"]])
    dirs = forge(signed, with_members(signed.saved.read_bytes(), 3000), tmp_path)
    proc = install(signed, dirs, "--key", str(signed.pub))
    assert proc.returncode == 1
    assert (f"the archive holds more than the {most} members {len(ARCHES)} image(s) can: made or changed by "
            "something other than invoke export, refused, nothing was loaded") in proc.stderr, proc.stderr
    assert signed.nothing_loaded()
    ok_dirs = forge(signed, with_members(signed.saved.read_bytes(), 10), tmp_path / "few")
    proc = install(signed, ok_dirs, "--key", str(signed.pub))
    assert proc.returncode == 0, proc.stderr  # a few extra members (empty or not) are read as before


BOMB = 4 << 30  # zeros after the archive's end: a frame of ~130 kB


def test_zeros_after_the_archive_end_are_refused_at_the_recorded_size(signed, absent, tmp_path):
    """A zstd bomb: the genuine archive, then a second frame of 4 GiB of zeros, MANIFEST.json still
    recording the archive's own size. import and export-verify stop reading at that size plus one
    byte (as install.sh does) and refuse, instead of decompressing to the end and saying verified."""
    from support.signed_discs import forge_packed

    archive = signed.saved.read_bytes()
    packed = subprocess.run(["zstd", "-q", "-c"], input=archive, capture_output=True, check=True).stdout
    zeros = subprocess.run(f"head -c {BOMB} /dev/zero | zstd -q -c", shell=True, capture_output=True, check=True).stdout
    dirs = forge_packed(signed, packed + zeros, len(archive), tmp_path)
    for task in ("export-verify", "import"):
        proc = subprocess.run(["invoke", task, *from_args(dirs), "--key", str(signed.pub), "--work", str(signed.work)],
                              cwd=ROOT, env=signed.env, capture_output=True, text=True)
        message = error_of(proc)
        assert proc.returncode == 1 and (f"the parts decompress to more than the {len(archive):,} bytes the export "
                                         "recorded") in message, message
    assert signed.nothing_loaded()
