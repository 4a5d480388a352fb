"""Build options of the conda path: --network and the conda-channels secret (pure argv checks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.commands import ROOT  # noqa: E402

from rapidship.imagebuild.buildkit import BuildSecrets, write_secret_files, build_command, plan_build  # noqa: E402
from rapidship.errors import ConfigError  # noqa: E402
from rapidship.config.matrix import Arch, load_matrix  # noqa: E402
from rapidship.render.dockerfile import Rendered  # noqa: E402

MIRROR = "https://robot:t0ken-xyz@mirror.example/conda/conda-forge"


def _plan(network):
    v = load_matrix(ROOT / "variants.yaml").get("cuda12-ubuntu22")
    rendered = Rendered(variant=v.id, out_dir="build/cuda12-ubuntu22", dockerfile="x", dockerfile_sha256="",
                        lock_sha256="")
    secrets = BuildSecrets(conda_channels=(MIRROR,))
    return plan_build(v, Arch.amd64, rendered, secrets, network=network, epoch=1796000000), secrets


def test_network_host_reaches_the_argv_and_mirrors_go_in_as_a_0600_secret_file(tmp_path):
    plan, secrets = _plan("host")
    files = write_secret_files(secrets, tmp_path)
    argv = build_command(plan, "docker", files)
    assert argv[argv.index("--network") + 1] == "host"
    assert f"id=conda-channels,src={tmp_path / 'conda-channels'}" in argv
    assert not any("t0ken" in a for a in argv)
    assert (tmp_path / "conda-channels").read_text() == MIRROR + "\n"
    assert (tmp_path / "conda-channels").stat().st_mode & 0o777 == 0o600


def test_without_network_the_engine_default_is_left_alone():
    plan, _ = _plan(None)
    assert "--network" not in build_command(plan, "docker", {"conda-channels": Path("/x")})


def test_an_unknown_network_is_refused():
    with pytest.raises(ConfigError, match="--network"):
        _plan("bridge2")


@pytest.mark.parametrize("flags,where", [(["--network", "bogus"], "--network: 'bogus' is not one of"),
                                         (["--variant", "cuda12-debian12", "--arch", "riscv64"],
                                          "--arch: 'riscv64' is not amd64 or arm64")])
def test_a_bad_build_flag_is_named_before_any_base_is_looked_for(flags, where):
    import subprocess

    run = subprocess.run(["invoke", "build", *flags], cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 2 and where in run.stderr and "base" not in run.stderr.split("fix:")[0]


def test_a_build_on_an_engine_without_its_default_bridge_names_the_network_flag(tmp_path):
    """The engine's words (dockerd --bridge none; such an engine cannot run in the suite: starting
    one deletes the host's docker0), then what to do about them."""
    from rapidship.imagebuild.buildkit import failed_build_fix

    tail = "#5 ERROR: network bridge not found\n------\nfailed to solve: network bridge not found\n"
    log = tmp_path / "build.log"
    fix = failed_build_fix(tail, _plan(None)[0], log)
    assert "--network host" in fix and "no default bridge" in fix and str(log) in fix
    assert failed_build_fix(tail, _plan("host")[0], log) == f"full log: {log}"    # the flag given: nothing to add
    assert failed_build_fix("ERROR: pip failed\n", _plan(None)[0], log) == f"full log: {log}"
