"""The wheel-made conda channel's translations (bench/wheel_packages.py): Requires-Dist -> conda
depends, PEP 440 specifiers -> match specs py-rattler parses, wheel tags -> subdirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.conda_package import ChannelError
from bench.wheel_packages import conda_depends, conda_specifier, oldest_glibc, wheel_info


@pytest.mark.parametrize(("pep440", "conda"), [
    (">=1.0,<2", "<2,>=1.0"),
    ("==26.10.*", "26.10.*"),
    ("~=3.1.2", ">=3.1.2,3.1.*"),
    ("!=3.2.0,!=3.2.1,>=1.6.0", "!=3.2.0,!=3.2.1,>=1.6.0"),
    ("===1.0", "==1.0"),
    ("", ""),
])
def test_specifiers_become_match_specs_rattler_reads(pep440, conda):
    import rattler

    assert conda_specifier(pep440) == conda
    if conda:
        rattler.MatchSpec(f"pkg {conda}")  # raises on a spec conda would not read


def test_markers_are_settled_for_linux_python_311_and_extras_pull_their_requirements():
    requires = ["rnative[speed]>=1.0,<2", "colorama; platform_system == 'Windows'",
                "tomli>=1.1; python_version < '3.11'", "exceptiongroup; python_version >= '3.12'",
                "importlib-metadata>=4; python_version < '3.12'", "Jinja2~=3.1.2; extra == 'docs'",
                "nvidia_nccl_cu12; platform_machine == 'x86_64'"]
    extras = {"rnative": ["R.Data ==2.*; extra == 'speed'", "numpy"]}
    assert conda_depends(requires, "x86_64", extras) == [
        "rnative <2,>=1.0", "importlib-metadata >=4", "nvidia-nccl-cu12", "r-data 2.*"]
    assert "nvidia-nccl-cu12" not in conda_depends(requires, "aarch64", extras)


def test_wheel_tags_choose_the_subdir_and_the_glibc_floor(tmp_path):
    def info(name):
        (tmp_path / name).write_bytes(b"")
        return wheel_info(tmp_path / name)

    assert info("a-1.0-py3-none-any.whl").subdir == "noarch"
    both = info("dask_cuda-26.10.0-py3-none-manylinux_2_28_aarch64.manylinux_2_28_x86_64.whl")
    assert (both.name, both.subdir, both.glibc) == ("dask-cuda", "linux-64", "2.28")
    assert oldest_glibc({"manylinux2014_x86_64", "manylinux_2_28_x86_64"}) == "2.17"
    with pytest.raises(ChannelError, match="no Linux x86_64 platform tag"):
        info("b-1.0-cp311-cp311-win_amd64.whl")
    with pytest.raises(ChannelError, match="not a wheel file name"):
        wheel_info(Path("c-1.0.tar.gz"))
