"""A hashed pip lock serves every arch that installs it only if each locked package has a wheel for
that arch: `invoke lock --check --wheels` asks the index (here a local folder of tiny wheels, uv
--find-links; no network) and names every package, version and platform tag that is missing."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from rapidship.errors import ConfigError
from rapidship.lock.pip import EnvSpec, check_wheels, locked_pins, wheel_gaps

pytestmark = pytest.mark.skipif(shutil.which("uv") is None and not os.environ.get("CI"),
                                reason="needs uv (the lock extra; scripts/setup and CI install it)")


def wheel(folder: Path, name: str, version: str, tag: str) -> None:
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": b"",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{dist}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()}
    record = "".join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
                     for p, d in files.items()) + f"{dist}/RECORD,,\n"
    files[f"{dist}/RECORD"] = record.encode()
    with zipfile.ZipFile(folder / f"{name}-{version}-{tag}.whl", "w") as z:
        for path, data in files.items():
            z.writestr(path, data)


LOCK = """# rapidship pip lock for env t: do not edit
# spec-sha256: 00
purelib==1.0 \\
    --hash=sha256:aa
    # via -r requirements.in
nativex==2.1 \\
    --hash=sha256:bb
nativey==0.3 \\
    --hash=sha256:cc
nativez==5.0 ; platform_machine == 'x86_64' \\
    --hash=sha256:dd
nativew==1.1 \\
    --hash=sha256:ee
"""


@pytest.fixture
def index(tmp_path) -> list[str]:
    folder = tmp_path / "wheels"
    folder.mkdir()
    wheel(folder, "purelib", "1.0", "py3-none-any")
    wheel(folder, "nativex", "2.1", "cp311-cp311-manylinux_2_28_x86_64")          # no aarch64 wheel
    for arch in ("x86_64", "aarch64"):
        wheel(folder, "nativey", "0.3", f"cp311-cp311-manylinux_2_28_{arch}")
    wheel(folder, "nativez", "5.0", "cp311-cp311-manylinux_2_28_x86_64")          # x86_64 only, by its marker
    wheel(folder, "nativew", "1.1", "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64")  # no aarch64 either
    return ["--no-index", "--find-links", str(folder)]


@pytest.fixture
def lock(tmp_path) -> Path:
    path = tmp_path / "locks" / "t" / "requirements.txt"
    path.parent.mkdir(parents=True)
    path.write_text(LOCK)
    return path


def test_the_pins_keep_their_markers():
    assert locked_pins(LOCK) == ["purelib==1.0", "nativex==2.1", "nativey==0.3",
                                 "nativez==5.0 ; platform_machine == 'x86_64'", "nativew==1.1"]


def test_every_missing_wheel_is_named_and_a_marker_excluded_one_is_not(index, lock):
    assert wheel_gaps(lock, "3.11", "amd64", index) == []
    assert wheel_gaps(lock, "3.11", "arm64", index) == [("nativex", "2.1", "manylinux_2_28_aarch64"),
                                                        ("nativew", "1.1", "manylinux_2_28_aarch64")]


def test_the_check_is_one_error_naming_the_lock_each_package_and_what_to_do(index, lock):
    spec = EnvSpec(name="t", flavour="pip", requirements=("purelib",), python="3.11")
    check_wheels(spec, ["amd64"], index, locks=lock.parents[1])
    with pytest.raises(ConfigError) as err:
        check_wheels(spec, ["amd64", "arm64"], index, locks=lock.parents[1])
    assert err.value.where == str(lock)
    assert "arm64: nativex 2.1 has no wheel for manylinux_2_28_aarch64" in err.value.problem
    assert "arm64: nativew 1.1 has no wheel for manylinux_2_28_aarch64" in err.value.problem
    assert "platform marker" in err.value.fix


def test_an_index_that_cannot_be_read_is_one_error_not_a_pass(lock, tmp_path):
    with pytest.raises(ConfigError) as err:
        wheel_gaps(lock, "3.11", "amd64", ["--no-index", "--find-links", str(tmp_path / "nowhere")])
    assert "could not resolve the lock" in err.value.problem
