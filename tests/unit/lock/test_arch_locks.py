"""A pip lock as one arch installs it: platform markers settled for the target, not the build machine."""

from __future__ import annotations

import pytest

from rapidship.errors import ConfigError
from rapidship.lock.pip import for_arch

LOCK = """# rapidship pip lock for env x: do not edit, run `invoke lock --env x`.
# spec-sha256: 00
cuda-bindings==12.9.7 ; (platform_machine == 'aarch64' or platform_machine == 'x86_64') and sys_platform == 'linux' \\
    --hash=sha256:aa
    # via cudf
intel-only==1.0 ; platform_machine == 'x86_64' \\
    --hash=sha256:bb
arm-only==2.0 ; platform_machine == 'aarch64' \\
    --hash=sha256:cc
numpy==2.4.6 ; python_full_version < '3.12' \\
    --hash=sha256:dd
windows-only==1.0 ; sys_platform == 'win32' \\
    --hash=sha256:ee
plain==1.0 \\
    --hash=sha256:ff
"""


def names(text: str) -> list[str]:
    return [line.split("==")[0] for line in text.splitlines() if line and not line[0].isspace() and line[0] != "#"]


def test_each_arch_gets_its_own_packages_and_python_markers_stay_for_pip():
    arm, intel = for_arch(LOCK, "arm64", "3.11"), for_arch(LOCK, "amd64", "3.11")
    assert names(arm) == ["cuda-bindings", "arm-only", "numpy", "plain"]
    assert names(intel) == ["cuda-bindings", "intel-only", "numpy", "plain"]
    assert "cuda-bindings==12.9.7 \\\n    --hash=sha256:aa\n    # via cudf" in arm  # marker gone, hashes kept
    assert "numpy==2.4.6 ; python_full_version < '3.12' \\" in arm
    assert arm.startswith("# rapidship pip lock") and arm.endswith("--hash=sha256:ff\n")


def test_a_marker_that_needs_the_patch_release_and_the_platform_is_refused():
    lock = "odd==1.0 ; platform_machine == 'aarch64' and python_full_version >= '3.11.4' \\\n    --hash=sha256:aa\n"
    with pytest.raises(ConfigError) as caught:
        for_arch(lock, "arm64", "3.11", "locks/x/requirements.txt")
    assert caught.value.where == "locks/x/requirements.txt: odd==1.0" and "patch release" in caught.value.problem
    assert for_arch(lock, "amd64", "3.11").strip() == ""  # for x86_64 it settles: not installed


def test_the_committed_locks_settle_for_both_arches():
    from support.commands import ROOT

    for env in ("rapids-pip", "dask-cpu"):
        text = (ROOT / "locks" / env / "requirements.txt").read_text()
        arm, intel = for_arch(text, "arm64", "3.11"), for_arch(text, "amd64", "3.11")
        assert "platform_machine" not in arm + intel and names(arm) == names(intel) == names(text)
