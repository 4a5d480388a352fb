"""The daemonless builders' argv (rootless BuildKit, kaniko): pure, so checked exactly here.
Neither buildkitd nor kaniko can run on this project's CI machines (docs/ci.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rapidship.imagebuild.buildkit import BuildPlan, BuildSecrets, build_command, plan_build
from rapidship.imagebuild.daemonless import CacheRefs, buildctl_command, cache_refs, candidate_ref, kaniko_command
from rapidship.errors import ConfigError
from rapidship.config.matrix import Arch, load_matrix
from rapidship.render.dockerfile import Rendered

from support.commands import ROOT  # noqa: E402
CPU = load_matrix(ROOT / "variants.yaml").variants["cpu-debian12"]
RENDERED = Rendered(variant=CPU.id, out_dir="build/cpu-debian12", dockerfile="build/cpu-debian12/Dockerfile",
                    dockerfile_sha256="0" * 64, lock_sha256="1" * 64, files=())


def _plan(tmp_path: Path, with_secrets: bool = True) -> tuple[BuildPlan, dict[str, Path]]:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nprivate\n-----END CERTIFICATE-----\n")
    secrets = BuildSecrets(ca_bundle=ca, pip_index="https://robot:s3cret-token@pypi.mirror/simple") if with_secrets \
        else BuildSecrets()
    plan = plan_build(CPU, Arch.arm64, RENDERED, secrets, revision="abc1234", epoch=1796000000)
    files = {"cacert": ca, "pip-index": tmp_path / "pip-index"} if with_secrets else {}
    return plan, files


PROTECTED = {"CI_COMMIT_REF_PROTECTED": "true"}


def test_buildctl_argv_mirrors_the_docker_build(tmp_path):
    plan, files = _plan(tmp_path)
    push = candidate_ref(CPU, Arch.arm64, "harbor.example.internal/rapidship-staging", "ci42")
    refs = cache_refs(CPU, Arch.arm64, {**PROTECTED, "RAPIDSHIP_CACHE_REPO": "harbor.example.internal/rapidship-cache"})
    cache = refs.export
    cmd = buildctl_command(plan, files, push, refs, tmp_path / "meta.json")
    assert cmd[:2] == ["buildctl-daemonless.sh", "build"]
    joined = " ".join(cmd)
    # same platform, target, labels and secret ids as the docker CLI path
    assert "--opt platform=linux/arm64" in joined and "--opt target=runtime" in joined
    assert "--opt label:org.opencontainers.image.revision=abc1234" in joined
    assert f"--secret id=cacert,src={files['cacert']}" in joined
    assert f"--secret id=pip-index,src={files['pip-index']}" in joined
    docker = build_command(plan, "docker", files)
    assert [a for a in docker if a.startswith("id=")] == [a for a in cmd if a.startswith("id=")]
    # the cache lives in Harbor, as a plain OCI image manifest Harbor accepts
    assert push == "harbor.example.internal/rapidship-staging/rapidship/dask:26.10-cpu-debian12-py3.11-arm64-ci42"
    assert cache == "harbor.example.internal/rapidship-cache/rapidship/dask:cache-cpu-debian12-arm64"
    assert cmd[cmd.index("--import-cache") + 1] == f"type=registry,ref={cache}"
    assert cmd[cmd.index("--export-cache") + 1] == f"type=registry,ref={cache},mode=max,image-manifest=true,oci-mediatypes=true"
    assert cmd[cmd.index("--output") + 1] == f"type=image,name={push},push=true"
    assert cmd[-2:] == ["--metadata-file", str(tmp_path / "meta.json")]
    # secret values never appear in the argv (it lands in the job log)
    assert "private" not in joined and "s3cret-token" not in joined


def test_build_args_and_network_carry_over(tmp_path):
    from dataclasses import replace

    plan, files = _plan(tmp_path, with_secrets=False)
    plan = replace(plan, base_args={"RUNTIME_BASE": "harbor.example.internal/dockerhub/library/debian:bookworm-slim"},
                   network="host")
    cmd = buildctl_command(plan, files, "r/x:y", CacheRefs(), tmp_path / "m.json")
    assert "build-arg:RUNTIME_BASE=harbor.example.internal/dockerhub/library/debian:bookworm-slim" in cmd
    assert cmd[cmd.index("--allow") + 1] == "network.host" and "force-network-mode=host" in cmd
    with pytest.raises(ConfigError, match="own container's network"):
        kaniko_command(plan, "r/x:y", CacheRefs(), tmp_path / "d")
    kaniko = kaniko_command(replace(plan, network=None), "r/x:y", CacheRefs(), tmp_path / "d")
    assert "--build-arg=RUNTIME_BASE=harbor.example.internal/dockerhub/library/debian:bookworm-slim" in kaniko


def test_buildctl_without_cache_or_secrets(tmp_path):
    plan, files = _plan(tmp_path, with_secrets=False)
    cmd = buildctl_command(plan, files, "127.0.0.1:5000/x:y", CacheRefs(), tmp_path / "m.json")
    assert "--import-cache" not in cmd and "--export-cache" not in cmd and "--secret" not in cmd
    assert cache_refs(CPU, Arch.amd64, PROTECTED) == CacheRefs()


def test_kaniko_refuses_builds_that_need_secrets(tmp_path):
    plan, _ = _plan(tmp_path)
    with pytest.raises(ConfigError, match="kaniko does not keep secrets"):
        kaniko_command(plan, "harbor.example.internal/s/x:y", CacheRefs(), tmp_path / "digest")


def test_kaniko_argv_without_secrets(tmp_path):
    plan, _ = _plan(tmp_path, with_secrets=False)
    cache = cache_refs(CPU, Arch.arm64, {**PROTECTED, "RAPIDSHIP_CACHE_REPO": "harbor.example.internal/rapidship-cache"})
    cmd = kaniko_command(plan, "harbor.example.internal/s/x:y", cache, tmp_path / "digest")
    assert cmd[0] == "/kaniko/executor"
    assert "--custom-platform=linux/arm64" in cmd and "--target=runtime" in cmd
    assert "--destination=harbor.example.internal/s/x:y" in cmd
    assert "--cache=true" in cmd and "--cache-repo=harbor.example.internal/rapidship-cache/rapidship/dask" in cmd
    assert f"--digest-file={tmp_path / 'digest'}" in cmd


def test_candidate_ref_needs_its_variables():
    with pytest.raises(ConfigError, match="RAPIDSHIP_REGISTRY"):
        candidate_ref(CPU, Arch.amd64, "", "ci1")


def test_registry_auth_covers_every_registry_and_only_with_both_values():
    from rapidship.imagebuild.daemonless import registry_auth
    import base64

    refs = ["harbor.example.internal/staging/x:y", "harbor.example.internal/cache/x:c", "127.0.0.1:5000/x:y"]
    config = registry_auth(refs, "robot$ci", "pa:ss")
    assert set(config["auths"]) == {"harbor.example.internal", "127.0.0.1:5000"}
    assert base64.b64decode(config["auths"]["127.0.0.1:5000"]["auth"]).decode() == "robot$ci:pa:ss"
    assert registry_auth(refs, "robot$ci", None) is None and registry_auth(refs, "", "x") is None


def test_merge_requests_read_the_release_cache_and_write_only_their_own(tmp_path):
    """A protected ref's build reads and writes the shared cache; a merge request's reads it and writes
    a cache of its own in another project (its robot cannot write the shared one), or none."""
    repos = {"RAPIDSHIP_CACHE_REPO": "harbor.example.internal/buildcache",
             "RAPIDSHIP_MR_CACHE_REPO": "harbor.example.internal/buildcache-mr"}
    shared = "harbor.example.internal/buildcache/rapidship/dask:cache-cpu-debian12-amd64"
    assert cache_refs(CPU, Arch.amd64, {**repos, **PROTECTED}) == CacheRefs((shared,), shared)
    mr = cache_refs(CPU, Arch.amd64, {**repos, "CI_COMMIT_REF_PROTECTED": "false", "CI_MERGE_REQUEST_IID": "17"})
    own = "harbor.example.internal/buildcache-mr/rapidship/dask:cache-cpu-debian12-amd64-mr17"
    assert mr == CacheRefs((shared, own), own)
    branch = cache_refs(CPU, Arch.amd64, {**repos, "CI_COMMIT_REF_SLUG": "feature-x"})
    assert branch.export == "harbor.example.internal/buildcache-mr/rapidship/dask:cache-cpu-debian12-amd64-ref-feature-x"
    read_only = cache_refs(CPU, Arch.amd64, {"RAPIDSHIP_CACHE_REPO": repos["RAPIDSHIP_CACHE_REPO"]})
    assert read_only == CacheRefs((shared,), None)
    plan, files = _plan(tmp_path, with_secrets=False)
    cmd = buildctl_command(plan, files, "r/x:y", mr, tmp_path / "m.json")
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--import-cache"] == [f"type=registry,ref={shared}",
                                                                               f"type=registry,ref={own}"]
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--export-cache"] == [
        f"type=registry,ref={own},mode=max,image-manifest=true,oci-mediatypes=true"]
    assert "--export-cache" not in buildctl_command(plan, files, "r/x:y", read_only, tmp_path / "m.json")
    assert "--cache-repo=harbor.example.internal/buildcache-mr/rapidship/dask" in kaniko_command(
        plan, "r/x:y", mr, tmp_path / "d")
