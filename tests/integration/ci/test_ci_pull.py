"""`ci.pull`: a CI job fetches the candidate a daemonless build pushed, by digest, and gets the same
build record `invoke build` writes. Real engine, real registry on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess

import pytest

from rapidship.imagebuild.daemonless import StagedImage, pull_staged, write_staged
from rapidship.records import Workspace
from rapidship.errors import RapidshipError
from rapidship.config.matrix import load_matrix, run_id

from support.plain_registry import serve_registry

pytestmark = pytest.mark.docker
from support.commands import ROOT, invoke  # noqa: E402
CPU = load_matrix(ROOT / "variants.yaml").variants["cpu-debian12"]


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout.strip()


def test_pull_staged_fetches_the_pushed_digest(engine, loopback_registry, unique_name, tmp_path):
    variant = CPU.model_copy(update={"image": unique_name})
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "hello").write_text("staged\n")
    (ctx / "Dockerfile").write_text('FROM scratch\nCOPY hello /hello\nLABEL io.rapidship.lock.sha256="abc123" '
                                    'io.rapidship.source-date-epoch="1796000000"\n')
    candidate = f"{loopback_registry}/{unique_name}:{variant.tag('amd64')}-ci7"
    local = variant.local_ref("amd64", run_id())  # the engine's name: the release name and this run's identity
    engine.images.build(path=str(ctx), tag=candidate, rm=True)
    try:
        _docker("push", "--quiet", candidate)
        digest = _docker("image", "inspect", candidate, "--format", "{{index .RepoDigests 0}}").split("@")[1]
        _docker("rmi", candidate)  # this job's engine has never seen the image
        ws = Workspace(tmp_path / "build")
        write_staged(ws, StagedImage(variant=variant.id, arch="amd64", ref=candidate, digest=digest,
                                     builder="buildctl", seconds=12.5, log="build/cpu-debian12/build-amd64.log"))

        built = pull_staged(ws, "amd64", variant)
        pulled = built.extra["normalised"]["engine_id"]  # what the registry's manifest names as its config
        assert pulled.startswith("sha256:")
        assert built.ref == local and built.extra == {"staged": candidate, "digest": digest, "gpu_archs": "none",
                                                      "source_date_epoch": 1796000000,
                                                      "normalised": {"engine_id": pulled, "base": variant.bases.runtime,
                                                                     "base_layers_kept": 0, "layers_rewritten": 1}}
        # normalised as `build` normalises: another id than what the daemonless builder pushed, the epoch's times
        assert built.image_id != pulled
        created = _docker("image", "inspect", local, "--format", "{{.Created}}")
        assert created.startswith("2026-11-30T00:53:20")
        assert built.name == variant.ref("amd64")
        assert built.lock_sha256 == "abc123" and built.layers == 1 and built.seconds == 12.5
        assert built.size_bytes == 7 and built.zstd_bytes > 0
        assert _docker("image", "inspect", local, "--format", "{{.Id}}") == built.image_id

        # a digest the registry does not hold is refused, not silently replaced by the tag
        record = json.loads(ws.staged(variant.id, "amd64").read_text())
        record["digest"] = "sha256:" + "0" * 64
        ws.staged(variant.id, "amd64").write_text(json.dumps(record))
        with pytest.raises(RapidshipError, match="docker pull failed"):
            pull_staged(ws, "amd64", variant)
    finally:
        subprocess.run(["docker", "rmi", "--force", candidate, local], capture_output=True, check=False)


def test_pull_staged_normalises_over_the_base_its_run_made(engine, loopback_registry, unique_name, tmp_path):
    """A candidate built on this run's own base (`invoke base`, its record as written) keeps that
    base's layers byte for byte, as `build` keeps them, whatever the shared name holds."""
    invoke("base", "--os", "debian12")
    made = Workspace(ROOT / "build").base(CPU.bases.runtime, "amd64", run_id())
    record = json.loads(made.read_text())
    ws = Workspace(tmp_path / "build")
    ws.base(CPU.bases.runtime, "amd64", run_id()).parent.mkdir(parents=True)
    ws.base(CPU.bases.runtime, "amd64", run_id()).write_text(made.read_text())
    variant = CPU.model_copy(update={"image": unique_name})
    (tmp_path / "f").write_text("on the run's base\n")
    (tmp_path / "Dockerfile").write_text(f'FROM {record["ref"]}\nCOPY f /f\n'
                                         'LABEL io.rapidship.source-date-epoch="1796000000"\n')
    candidate = f"{loopback_registry}/{unique_name}:{variant.tag('amd64')}-ci10"
    engine.images.build(path=str(tmp_path), tag=candidate, rm=True)
    try:
        _docker("push", "--quiet", candidate)
        digest = _docker("image", "inspect", candidate, "--format", "{{index .RepoDigests 0}}").split("@")[1]
        _docker("rmi", candidate)
        write_staged(ws, StagedImage(variant=variant.id, arch="amd64", ref=candidate, digest=digest,
                                     builder="buildctl", seconds=1.0, log="-"))
        built = pull_staged(ws, "amd64", variant)
        assert built.extra["normalised"]["base"] == record["ref"] != CPU.bases.runtime
        base_layers = json.loads(_docker("image", "inspect", record["image_id"], "--format", "{{json .RootFS.Layers}}"))
        kept = len(base_layers)  # the base in layers by package (record["layers"])
        assert kept == len(record["layers"]) > 1
        assert built.extra["normalised"]["base_layers_kept"] == kept and built.extra["normalised"]["layers_rewritten"] == 1
        layers = json.loads(_docker("image", "inspect", built.image_id, "--format", "{{json .RootFS.Layers}}"))
        # every base layer byte for byte, in the order of least re-feed (imagebuild/layer_order.py)
        assert set(base_layers) < set(layers) and len(layers) == kept + 1
    finally:
        subprocess.run(["docker", "rmi", "--force", candidate, variant.local_ref("amd64", run_id())],
                       capture_output=True, check=False)


def test_pull_staged_uses_the_ci_credentials(engine, unique_name, tmp_path, monkeypatch):
    """With htpasswd on the registry, the pull works only through RAPIDSHIP_REGISTRY_USER/PASSWORD,
    which reach docker in a private DOCKER_CONFIG, never on a command line or in an error."""
    host, proc = serve_registry(tmp_path, "robot$ci", "pull-s3cret")
    variant = CPU.model_copy(update={"image": unique_name})
    candidate = f"{host}/{unique_name}:{variant.tag('amd64')}-ci8"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "f").write_text("x")
    (ctx / "Dockerfile").write_text('FROM scratch\nCOPY f /f\nLABEL io.rapidship.source-date-epoch="1796000000"\n')
    engine.images.build(path=str(ctx), tag=candidate, rm=True)
    pusher = tmp_path / "pusher"
    pusher.mkdir()
    import base64

    token = base64.b64encode(b"robot$ci:pull-s3cret").decode()
    (pusher / "config.json").write_text(json.dumps({"auths": {host: {"auth": token}}}))
    try:
        subprocess.run(["docker", "--config", str(pusher), "push", "--quiet", candidate], check=True, capture_output=True)
        digest = _docker("image", "inspect", candidate, "--format", "{{index .RepoDigests 0}}").split("@")[1]
        _docker("rmi", candidate)
        out = Workspace(tmp_path / "build")
        write_staged(out, StagedImage(variant=variant.id, arch="amd64", ref=candidate, digest=digest,
                                      builder="buildctl", seconds=1.0, log="-"))
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty-docker-config"))
        monkeypatch.delenv("RAPIDSHIP_REGISTRY_USER", raising=False)
        with pytest.raises(RapidshipError, match="docker pull failed.*(unauthorized|no basic auth|authentication)") as refused:
            pull_staged(out, "amd64", variant)
        monkeypatch.setenv("RAPIDSHIP_REGISTRY_USER", "robot$ci")
        monkeypatch.setenv("RAPIDSHIP_REGISTRY_PASSWORD", "wrong")
        with pytest.raises(RapidshipError, match="unauthorized|authentication") as wrong:
            pull_staged(out, "amd64", variant)
        assert "wrong" not in str(wrong.value)
        monkeypatch.setenv("RAPIDSHIP_REGISTRY_PASSWORD", "pull-s3cret")
        built = pull_staged(out, "amd64", variant)
        assert built.extra["digest"] == digest and built.size_bytes == 1
        assert "pull-s3cret" not in str(refused.value) + json.dumps(built.extra)
    finally:
        subprocess.run(["docker", "rmi", "--force", candidate, variant.local_ref("amd64", run_id())], capture_output=True,
                       check=False)
        proc.terminate()
        proc.wait(timeout=10)


def test_a_candidate_without_its_epoch_is_refused(engine, loopback_registry, unique_name, tmp_path):
    """An image with no SOURCE_DATE_EPOCH label cannot be normalised to the release's time: refused."""
    variant = CPU.model_copy(update={"image": unique_name})
    (tmp_path / "Dockerfile").write_text("FROM scratch\nCOPY Dockerfile /d\n")
    candidate = f"{loopback_registry}/{unique_name}:{variant.tag('amd64')}-ci9"
    engine.images.build(path=str(tmp_path), tag=candidate, rm=True)
    try:
        _docker("push", "--quiet", candidate)
        digest = _docker("image", "inspect", candidate, "--format", "{{index .RepoDigests 0}}").split("@")[1]
        ws = Workspace(tmp_path / "build")
        write_staged(ws, StagedImage(variant=variant.id, arch="amd64", ref=candidate, digest=digest,
                                     builder="kaniko", seconds=1.0, log="-"))
        with pytest.raises(RapidshipError, match="no io.rapidship.source-date-epoch label") as err:
            pull_staged(ws, "amd64", variant)
        assert "invoke ci.build --variant cpu-debian12 --arch amd64" in err.value.fix
    finally:
        subprocess.run(["docker", "rmi", "--force", candidate, variant.local_ref("amd64", run_id())],
                       capture_output=True, check=False)


def test_pull_staged_without_a_record_names_the_fix(tmp_path):
    with pytest.raises(RapidshipError, match="staged-arm64.json: no staged build record") as err:
        pull_staged(Workspace(tmp_path), "arm64", CPU)
    assert "invoke ci.build --variant cpu-debian12 --arch arm64" in err.value.fix
