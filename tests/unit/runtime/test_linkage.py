"""The in-image linkage check on a tree of real libraries linked by gcc + ld: each way a NEEDED
name resolves (or does not), and a file for another machine. Fails on each bad tree, passes the good one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rapidship.runtime import linkage
from support.fatbin_samples import gcc

pytestmark = pytest.mark.skipif(gcc() is None and not os.environ.get("CI"), reason="needs gcc (CI installs it)")


def so(out: Path, name: str, needs: tuple[str, ...] = (), flags: tuple[str, ...] = ()) -> Path:
    """A shared object `name` whose NEEDED entries are `needs` (each linked from a stub made beside it)."""
    out.mkdir(parents=True, exist_ok=True)
    src = out / f"{name}.c"
    src.write_text(f"int f_{abs(hash(name))}(void) {{ return 1; }}\n")
    stubs = []
    for lib in needs:
        stub_dir = out / "stubs"
        stub_dir.mkdir(exist_ok=True)
        (stub_dir / "s.c").write_text("int s(void) { return 0; }\n")
        subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{lib}", "-o", str(stub_dir / lib), str(stub_dir / "s.c")],
                       check=True, capture_output=True)
        stubs.append(str(stub_dir / lib))
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out / name), str(src), "-Wl,--no-as-needed", *stubs, *flags],
                   check=True, capture_output=True)
    shutil.rmtree(out / "stubs", ignore_errors=True)
    src.unlink()
    return out / name


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    lib = root / "usr" / "lib" / "x86_64-linux-gnu"
    env = root / "opt" / "rapids" / "lib"
    so(lib, "libc.so.6")  # a stand-in: every object gcc links needs libc
    so(lib, "libbase.so.1")
    so(env, "libdep.so")
    so(env, "libuser.so", needs=("libdep.so", "libbase.so.1"), flags=("-Wl,-rpath,$ORIGIN", "-Wl,--enable-new-dtags"))
    so(root / "opt" / "rapids" / "pkg", "libpreloaded.so")
    so(env, "libwheel.so", needs=("libpreloaded.so", "libcuda.so.1"))
    return root


def test_a_sound_tree_passes_and_says_how_each_name_resolves(tree):
    report = linkage.check(str(tree), "x86_64")
    assert linkage.ok(report), report
    assert report["elf_files"] == 6 and report["needed"] >= 4
    assert list(report["elsewhere"]) == ["libpreloaded.so"] and list(report["allowed"]) == ["libcuda.so.1"]
    assert report["elsewhere"]["libpreloaded.so"]["first"] == ["/opt/rapids/lib/libwheel.so"]


def test_a_missing_library_fails_naming_it_and_who_needs_it(tree, capsys):
    (tree / "opt" / "rapids" / "lib" / "libdep.so").unlink()
    report = linkage.check(str(tree), "x86_64")
    assert not linkage.ok(report) and report["missing"] == {"libdep.so": {"count": 1, "first": ["/opt/rapids/lib/libuser.so"]}}
    assert linkage.main(["--root", str(tree), "--machine", "x86_64"]) == 1
    assert "MISSING: libdep.so (needed by 1, e.g. /opt/rapids/lib/libuser.so)" in capsys.readouterr().out


def test_the_driver_libraries_are_allowed_only_when_named(tree):
    report = linkage.check(str(tree), "x86_64", allowed=())
    assert list(report["missing"]) == ["libcuda.so.1"]


def test_a_file_for_another_machine_fails(tree):
    # an x86-64 tree judged as arm64: every file is for the wrong machine (a cross-install gone wrong)
    report = linkage.check(str(tree), "aarch64")
    assert not linkage.ok(report) and len(report["wrong_machine"]) == 6
    # one aarch64 file (e_machine patched) among x86-64 ones
    odd = tree / "opt" / "rapids" / "lib" / "libdep.so"
    data = bytearray(odd.read_bytes())
    data[18:20] = (183).to_bytes(2, "little")
    odd.write_bytes(bytes(data))
    assert linkage.check(str(tree), "x86_64")["wrong_machine"] == ["/opt/rapids/lib/libdep.so"]


def test_non_elf_and_truncated_files_are_not_judged(tree):
    (tree / "opt" / "rapids" / "lib" / "README").write_text("not ELF\n")
    (tree / "opt" / "rapids" / "lib" / "cut.so").write_bytes(b"\x7fELF\x02\x01" + b"\0" * 10)
    assert linkage.check(str(tree), "x86_64")["elf_files"] == 6
