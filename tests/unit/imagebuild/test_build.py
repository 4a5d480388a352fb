"""Pure parts of base and build: names, plans and the docker argv (secrets never in it)."""

from __future__ import annotations

import os


import pytest

from rapidship.imagebuild.base import arch_alias, plan_base
from rapidship.imagebuild.buildkit import BuildSecrets, build_command, plan_build
from rapidship.errors import ConfigError
from rapidship.config.matrix import Arch, load_matrix
from rapidship.render.dockerfile import Rendered

from support.commands import ROOT  # noqa: E402
MATRIX = load_matrix(ROOT / "variants.yaml")
RENDERED = Rendered(variant="cpu-debian12", out_dir="build/cpu-debian12", dockerfile="build/cpu-debian12/Dockerfile",
                    dockerfile_sha256="0" * 64, lock_sha256="1" * 64)


def test_arch_alias_keeps_each_arch_under_its_own_name():
    ref = "harbor.example.internal/dockerhub/library/debian:bookworm-slim"
    assert arch_alias(ref, Arch.arm64) == ref + "-arm64"
    assert arch_alias("localhost:5000/x/y", Arch.amd64) == "localhost:5000/x/y:latest-amd64"
    assert arch_alias("h/x@sha256:" + "a" * 64, Arch.arm64) == "h/x:local-arm64"


def test_plan_base_names_the_image_variants_expect():
    plan = plan_base(MATRIX, "debian12", Arch.arm64, None)
    assert plan.ref == MATRIX.variants["cpu-debian12"].bases.runtime and plan.suite == "bookworm"
    assert plan.mirror == "http://deb.debian.org/debian"
    builder = plan_base(MATRIX, "debian12", Arch.amd64, "http://mirror.internal/debian", conda_builder=True)
    assert builder.ref.endswith("library/python:3.11-slim-bookworm") and "python3-venv" in builder.include
    with pytest.raises(ConfigError, match="RPM-family"):
        plan_base(MATRIX, "kylin10", Arch.amd64, None)
    with pytest.raises(ConfigError, match="no variant uses os"):
        plan_base(MATRIX, "alpine3", Arch.amd64, None)


def test_build_command_passes_secrets_by_file_only(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    token_url = "https://bot:t0p-s3cret@pypi.mirror.example/simple"
    secrets = BuildSecrets(ca_bundle=ca, pip_index=token_url)
    v = MATRIX.variants["cpu-debian12"]
    plan = plan_build(v, Arch.arm64, RENDERED, secrets, revision="abc123", epoch=1796000000,
                      base_args={"RUNTIME_BASE": "x:bookworm-slim-arm64"})
    argv = build_command(plan, "/usr/bin/docker", {"cacert": ca, "pip-index": tmp_path / "pip-index"})
    joined = " ".join(argv)
    assert "t0p-s3cret" not in joined and "pypi.mirror.example" not in joined
    assert f"id=cacert,src={ca}" in joined and f"id=pip-index,src={tmp_path / 'pip-index'}" in joined
    assert argv[argv.index("--platform") + 1] == "linux/arm64"
    # the engine's name carries the run's identity; the release name, which signatures use, does not
    run = os.environ["RAPIDSHIP_RUN_ID"]
    assert argv[argv.index("--tag") + 1] == f"rapidship/dask:26.10-cpu-debian12-py3.11-arm64-{run}"
    assert plan.name == "rapidship/dask:26.10-cpu-debian12-py3.11-arm64"
    assert "RUNTIME_BASE=x:bookworm-slim-arm64" in argv
    assert "org.opencontainers.image.revision=abc123" in argv
    assert argv[-1] == "build/cpu-debian12"
    # the release time is the source's, not the build clock's: one commit, one created label
    assert "org.opencontainers.image.created=2026-11-30T00:53:20+00:00" in argv
    assert "io.rapidship.source-date-epoch=1796000000" in argv


def test_plan_refuses_an_arch_the_variant_does_not_build():
    v = MATRIX.variants["cuda12-debian12"].model_copy(update={"arches": (Arch.amd64,)})
    with pytest.raises(ConfigError, match="not built for arm64"):
        plan_build(v, Arch.arm64, RENDERED, BuildSecrets(), epoch=1796000000)


def test_the_pip_builder_base_is_the_build_machines_arch_and_the_runtime_the_targets():
    from rapidship.imagebuild.base import host_arch
    from rapidship.imagebuild.buildkit import stage_arches

    here = Arch(host_arch())
    pip, conda = MATRIX.variants["cuda12-debian12"], MATRIX.variants["cuda12-ubuntu22"]
    assert stage_arches(pip, Arch.arm64) == {"BUILDER_BASE": here, "RUNTIME_BASE": Arch.arm64}
    assert stage_arches(conda, Arch.arm64) == {"BUILDER_BASE": Arch.arm64, "RUNTIME_BASE": Arch.arm64}


def test_missing_ca_bundle_flag_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError) as caught:
        BuildSecrets.from_flags(str(tmp_path / "nope.pem"), None, None)
    assert caught.value.where == "--ca-bundle"


def test_a_missing_arm64_base_is_one_error_naming_the_command_that_makes_it(monkeypatch, tmp_path):
    from rapidship.imagebuild import buildkit
    from rapidship.records import Workspace

    ws = Workspace(tmp_path)  # no base record of any run: the names variants.yaml gives decide

    found = {"harbor.example.internal/dockerhub/library/debian:bookworm-slim": Arch.amd64}
    monkeypatch.setattr(buildkit, "resolve_local_base", lambda ref, arch: ref if found.get(ref) == arch else None)
    monkeypatch.setattr(buildkit, "host_arch", lambda: "amd64")
    v = MATRIX.variants["cuda12-debian12"]
    assert buildkit.local_base_args(v, Arch.amd64, ws) == {}
    with pytest.raises(ConfigError) as caught:
        buildkit.local_base_args(v, Arch.arm64, ws)  # the builder base (amd64) is there, the runtime's is not
    err = caught.value
    assert err.where == "base image" and "bookworm-slim (arm64) is not in the engine" in err.problem
    assert err.fix.endswith("invoke base --os debian12 --arch arm64")


class _Proc:
    def __init__(self, lines: list[str], code: int) -> None:
        self.stdout, self.code = iter(lines), code

    def wait(self) -> int:
        return self.code


@pytest.mark.parametrize("first", ["flake", "other"])
def test_buildkit_s_flightcontrol_timeout_runs_the_build_once_more_and_nothing_else_does(first, tmp_path, monkeypatch):
    """Engine 20.10's BuildKit can fail a step of many in flight on one source (moby/buildkit#1822):
    the build runs once more, and says so in its log; any other failure stops at once."""
    from rapidship.engine import ENGINE
    from rapidship.errors import RapidshipError
    from rapidship.imagebuild import buildkit

    said = {"flake": f"#9 ERROR: executor failed running [x]: {buildkit.BUILDKIT_FLAKE}\n",
            "other": "#9 ERROR: executor failed running [x]: exit code: 1\n"}
    runs = [_Proc(["#9 [env-3 1/1] RUN x\n", said[first]], 1), _Proc(["#9 [env-3 1/1] RUN x\n", said[first]], 1),
            _Proc(["#9 [env-3 1/1] RUN x\n", said["other"]], 1), _Proc(["#9 [env-3 1/1] RUN x\n", said["other"]], 1)]
    monkeypatch.setattr(ENGINE, "buildkit_cli", lambda: "docker")
    monkeypatch.setattr(ENGINE, "build_process", lambda cmd, env: runs.pop(0))
    plan = buildkit.BuildPlan(variant="v", arch="amd64", ref="r", name="r", context=str(tmp_path), labels={},
                              secret_ids=())
    log = tmp_path / "build.log"
    with pytest.raises(RapidshipError, match="docker build failed"):
        buildkit.build(plan, buildkit.BuildSecrets(), None, log)
    again = log.read_text().count("running the build once more")
    # a flake: at most BUILDKIT_RUNS runs in all (here the third fails otherwise); other failures: one
    assert again == (2 if first == "flake" else 0) and len(runs) == (1 if first == "flake" else 3)
