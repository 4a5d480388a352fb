"""A conda channel made of wheels and Debian's python (bench/conda_channel.py), end to end on a small
set: three wheels made here plus Debian 12's python3.11 packages (apt-get download). The packages'
structure is read back, a spec is locked against the channel served on 127.0.0.1 with rapidship's
lock_conda, the lock is installed with the builder's install_lock and packed with conda-pack
--dest-prefix /opt/rapids, and the relocated python and the entry points run from /opt/rapids in a
chroot that holds glibc and nothing else (no /usr/lib/python3.11, no libssl, no libffi)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

from bench.conda_channel import index_channel, lock_against
from bench.conda_package import PLACEHOLDER, ChannelError
from bench.debian_python import DEBIAN_LIBS, download_debs, python_packages
from bench.wheel_packages import convert_wheels
from rapidship.builder.install_lock import main as install_main
from rapidship.builder.install_lock import read_lock
from support.channel_server import serve
from support.wheels import make_wheels

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("patchelf") or not shutil.which("apt-get"),
                                reason="needs root (chroot), patchelf and apt-get (scripts/setup installs them)")


@pytest.fixture(scope="module")
def debs(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("debs")
    download_debs(where)
    return where


@pytest.fixture(scope="module")
def channel(tmp_path_factory, debs) -> Path:
    root = tmp_path_factory.mktemp("channels")
    work = tmp_path_factory.mktemp("work")
    wheels = make_wheels(tmp_path_factory.mktemp("wheels"), work)
    python_packages(debs, root / "wheels", work)
    convert_wheels(wheels, root / "wheels", work)
    index_channel(root / "wheels")
    return root / "wheels"


def _read(package: Path, member_prefix: str) -> dict[str, bytes]:
    """The members of a .conda's pkg- or info- tarball, by path (a link's target for a link)."""
    with zipfile.ZipFile(package) as zf:
        name = next(n for n in zf.namelist() if n.startswith(member_prefix))
        raw = subprocess.run(["zstd", "-dc"], input=zf.read(name), capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else m.linkname.encode()) for m in tar.getmembers()}


def _one(channel: Path, pattern: str) -> Path:
    hits = list(channel.glob(pattern))
    assert len(hits) == 1, (pattern, hits)
    return hits[0]


def test_a_pure_wheel_is_a_noarch_python_package_with_its_entry_points(channel):
    pkg = _one(channel, "noarch/rtool-1.2.0-*.conda")
    info = _read(pkg, "info-")
    index = json.loads(info["info/index.json"])
    assert index["noarch"] == "python" and index["subdir"] == "noarch"
    # markers settled for linux + 3.11, the extra [speed] of rnative brings R.Data (canonical name)
    assert index["depends"] == ["rnative <2,>=1.0", "r-data 2.*", "python >=3.11,<3.12.0a0"]
    assert json.loads(info["info/link.json"])["noarch"] == {"type": "python", "entry_points": ["rtool = rtool:main"]}
    files = _read(pkg, "pkg-")
    paths = {p["_path"]: p for p in json.loads(info["info/paths.json"])["paths"]}
    assert set(paths) == set(files) == set(info["info/files"].decode().split())
    for path, entry in paths.items():
        assert entry["sha256"] == hashlib.sha256(files[path]).hexdigest() and entry["size_in_bytes"] == len(files[path])
    assert files["python-scripts/rtool-legacy"].startswith(f"#!{PLACEHOLDER}/bin/python3.11\n".encode())
    assert paths["python-scripts/rtool-legacy"]["file_mode"] == "text"
    assert paths["python-scripts/rtool-legacy"]["prefix_placeholder"] == PLACEHOLDER
    assert "share/rtool/notes.txt" in paths and "site-packages/rtool/__init__.py" in paths
    assert files["site-packages/rtool-1.2.0.dist-info/INSTALLER"] == b"conda\n"
    assert all("prefix_placeholder" not in e for p, e in paths.items() if p != "python-scripts/rtool-legacy")


def test_a_compiled_wheel_lies_under_the_prefix_for_linux_64(channel):
    pkg = _one(channel, "linux-64/rnative-1.4.0-*.conda")
    info = _read(pkg, "info-")
    index = json.loads(info["info/index.json"])
    assert (index["subdir"], index["arch"], index.get("noarch")) == ("linux-64", "x86_64", None)
    assert index["depends"] == ["python >=3.11,<3.12.0a0", "__glibc >=2.17"]
    paths = {p["_path"]: p for p in json.loads(info["info/paths.json"])["paths"]}
    assert "lib/python3.11/site-packages/rnative/_native.so" in paths
    assert paths["bin/rnative-answer"]["file_mode"] == "text"
    assert _read(pkg, "pkg-")["bin/rnative-answer"].startswith(f"#!{PLACEHOLDER}/bin/python3.11\n".encode())


def test_python_is_debian_s_relocated_with_its_libraries_as_packages(channel):
    info = _read(_one(channel, "linux-64/python-3.11.2-*.conda"), "info-")
    index = json.loads(info["info/index.json"])
    depends = dict(d.split(" ", 1) for d in index["depends"])
    assert {"openssl", "libffi", "libsqlite", "liblzma", "bzip2", "libzlib", "libexpat"} <= set(depends)
    assert depends["openssl"] == ">=" + json.loads(_read(_one(channel, "linux-64/openssl-*.conda"), "info-")["info/index.json"])["version"]
    paths = {p["_path"]: p for p in json.loads(info["info/paths.json"])["paths"]}
    assert paths["bin/python"]["path_type"] == "softlink"
    assert paths["bin/pydoc3.11"]["file_mode"] == "text"
    assert not any(p.startswith(("usr/", "etc/")) or "EXTERNALLY-MANAGED" in p or "/nis." in p for p in paths)
    files = _read(_one(channel, "linux-64/python-3.11.2-*.conda"), "pkg-")
    assert files["bin/python"] == b"python3.11"


def test_debian_python_without_its_openssl_package_is_refused(debs, tmp_path):
    libs = {k: v for k, v in DEBIAN_LIBS.items() if k != "openssl"}
    with pytest.raises(ChannelError, match=r"python: lib/python3.11/lib-dynload/_hashlib\.cpython-311-x86_64-linux-gnu\.so "
                                         r"needs libcrypto\.so\.3, which no package provides"):
        python_packages(debs, tmp_path / "ch", tmp_path / "work", libs=libs)


def test_the_same_wheel_makes_the_same_package_bytes(tmp_path):
    wheels = make_wheels(tmp_path / "wheels", tmp_path)
    digests = []
    for n in (1, 2):
        made = convert_wheels(wheels, tmp_path / f"ch{n}", tmp_path / f"w{n}")
        digests.append([hashlib.sha256(p.read_bytes()).hexdigest() for p in made])
    assert digests[0] == digests[1]


def test_a_spec_locks_installs_and_the_relocated_python_runs_in_a_bare_root(channel, tmp_path):
    lock = lock_against(channel, ["rtool"], tmp_path / "project")
    header, records = read_lock(lock.read_text())
    by_name = {r["name"]: r for r in records}
    assert {"rtool", "rnative", "r-data", "python", "openssl", "libffi"} <= set(by_name)
    assert by_name["python"]["version"] == "3.11.2" and by_name["rtool"]["noarch"] == "python"

    root = Path(tempfile.mkdtemp(prefix="rs-root-"))   # short: the packages' placeholder is longer
    try:
        prefix = root / "build-prefix"   # the builder's prefix; conda-pack moves the env to /opt/rapids
        with serve(channel.parent) as (port, _):
            (tmp_path / "channels").write_text(f"http://127.0.0.1:{port}/{channel.name}\n")
            assert install_main(["--lock", str(lock), "--prefix", str(prefix), "--channels-secret",
                                 str(tmp_path / "channels"), "--cache", str(tmp_path / "cache")]) == 0
        # entry points, from link.json (noarch) and from the compiled package's own bin/
        for tool, want in (("rtool", f"rtool main {prefix}"), ("rtool-legacy", f"rtool-legacy {prefix}"),
                           ("rnative-answer", "answer 42")):
            out = subprocess.run([str(prefix / "bin" / tool)], capture_output=True, text=True, check=True).stdout
            assert out.strip() == want
        # packed as the builder packs it, unpacked in a root that holds glibc alone
        subprocess.run(["conda-pack", "--prefix", str(prefix), "--dest-prefix", "/opt/rapids", "--compress-level", "0",
                        "--output", str(tmp_path / "env.tar"), "--quiet"], check=True)
        (root / "opt/rapids").mkdir(parents=True)
        with tarfile.open(tmp_path / "env.tar") as tar:
            tar.extractall(root / "opt/rapids")
        for lib in ("lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/libm.so.6", "lib64/ld-linux-x86-64.so.2"):
            (root / lib).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(Path("/") / lib, root / lib)
        shutil.rmtree(prefix)
        (root / "proc").mkdir()

        def in_root(*argv: str) -> subprocess.CompletedProcess:
            return subprocess.run(["unshare", "--mount", "--pid", "--fork", f"--mount-proc={root}/proc", "chroot",
                                   str(root), *argv], capture_output=True, text=True)

        code = ("import sys, ssl, sqlite3, ctypes, lzma, bz2, zlib, json, readline, uuid, rtool, rnative, r_data;"
                "import site; assert site.getsitepackages() == ['/opt/rapids/lib/python3.11/site-packages'];"
                "print(sys.prefix, ssl.OPENSSL_VERSION.split()[0], rnative.answer(), r_data.VALUE);"
                "print(*sys.path, sep='\\n')")
        proc = in_root("/opt/rapids/bin/python", "-I", "-c", code)
        assert proc.returncode == 0, proc.stderr
        first, *path = proc.stdout.split("\n")
        assert first == "/opt/rapids OpenSSL 42 data"
        assert [p for p in path if p] and all(p.startswith("/opt/rapids/lib/") for p in path if p)
        assert "/opt/rapids/lib/python3.11/site-packages" in path
        for tool, want in (("rtool", "rtool main /opt/rapids"), ("rtool-legacy", "rtool-legacy /opt/rapids"),
                           ("rnative-answer", "answer 42"), ("pydoc3.11", "pydoc")):
            proc = in_root(f"/opt/rapids/bin/{tool}")
            assert proc.returncode == 0 and want in proc.stdout, (tool, proc.stdout, proc.stderr)
        # the same interpreter without its library: the root really lacks one of its own
        (root / "opt/rapids/lib/libssl.so.3").unlink()
        proc = in_root("/opt/rapids/bin/python", "-I", "-c", "import ssl")
        assert proc.returncode != 0 and "libssl.so.3" in proc.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)
