"""Signed discs end to end: real images, a real registry, the real `invoke push` and `invoke sign`,
then export, and import / install.sh against the public key, through the real engine.

Two tiny single-layer images (amd64 and arm64 of one variant, random bytes so zstd cannot shrink
them) are loaded into the engine from docker-archives made here: a FROM-scratch image as the engine
would build it, but with no build cache holding its layer (BuildKit's cache keeps a built layer in
the engine's layer store, and `docker load` then takes that one instead of the archive's, which
would hide what a swapped layer does). They are pushed to a loopback registry (TLS + htpasswd) by
`invoke push` and signed by `invoke sign` with a key made by `invoke keys.generate`; the records
sign reads are written here, naming the images' real ids.
The export spans two volumes. Then every refusal an operator can meet: no key, another key, an
archive holding another image (an attacker re-exporting with the old signatures), a swapped layer,
a swapped signature; each is named, exits as documented and loads nothing.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from support.commands import ROOT
from support.tiny_matrix import VARIANTS_YAML
from rapidship.export.write import ISO_RESERVE, METADATA_RESERVE

pytestmark = pytest.mark.docker
VARIANT, LOCK, PASSWORD = "cpu-debian12", "5e" * 32, "disc-signing-test"
ARCHES = ("amd64", "arm64")
MEDIA = ISO_RESERVE + METADATA_RESERVE + 420_000  # ~300 kB of data per volume after the signatures: 2 volumes

LABELS = {"io.rapidship.variant": VARIANT, "io.rapidship.lock.sha256": LOCK}


def layer_tar(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def load_image(ref: str, arch: str, payload: bytes) -> str:
    """`docker load` of a one-layer image (FROM scratch + COPY payload.bin, the labels export
    verification reads); returns the engine's image id."""
    import hashlib

    layer = layer_tar({"payload.bin": payload})
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": arch, "os": "linux", "created": "2026-12-01T00:00:00Z",
                         "config": {"Labels": LABELS, "Cmd": ["/payload.bin"]},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                         "history": [{"created": "2026-12-01T00:00:00Z", "created_by": "COPY payload.bin /"}]}).encode()
    hex_id = hashlib.sha256(config).hexdigest()
    archive = layer_tar({f"{hex_id}.json": config, f"{diff_id[7:]}/layer.tar": layer, "manifest.json": json.dumps(
        [{"Config": f"{hex_id}.json", "RepoTags": [ref], "Layers": [f"{diff_id[7:]}/layer.tar"]}]).encode()})
    subprocess.run(["docker", "load"], input=archive, check=True, capture_output=True)
    assert image_id(ref) == "sha256:" + hex_id
    return "sha256:" + hex_id


def run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["invoke", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def image_id(ref: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def write_records(build: Path, refs: dict[str, str], ids: dict[str, str]) -> None:
    """What render, build, gates and scan leave behind for these images: the records sign reads."""
    from support.gated_records import write_gated

    write_gated(build, VARIANT, {arch: (refs[arch], ids[arch]) for arch in ARCHES}, lock=LOCK)


@pytest.fixture(scope="module")
def signed(engine, registry, tmp_path_factory):
    """Make, push, sign and export the two images; the images' saved bytes to put them back."""
    work = tmp_path_factory.mktemp("signed")
    name = f"rapidship-test-{uuid.uuid4().hex[:10]}/tiny"
    (work / "variants.yaml").write_text(VARIANTS_YAML.format(image=name))
    refs = {arch: f"{name}:26.10-cpu-debian12-py3.11-{arch}" for arch in ARCHES}
    ids = {arch: load_image(refs[arch], arch, os.urandom(160_000)) for arch in ARCHES}
    saved = work / "images.tar"
    subprocess.run(["docker", "save", "-o", str(saved), *refs.values()], check=True)
    docker_config = work / "docker-config"
    docker_config.mkdir()
    env = dict(os.environ, RAPIDSHIP_REGISTRY_USER=registry.user, RAPIDSHIP_REGISTRY_PASSWORD=registry.password,
               RAPIDSHIP_REGISTRY_CA=str(registry.ca), RAPIDSHIP_RETRY_ATTEMPTS="2", RAPIDSHIP_RETRY_BASE_DELAY="0.05",
               DOCKER_CONFIG=str(docker_config), RAPIDSHIP_SIGNING_PASSWORD=PASSWORD, TMPDIR=str(work))
    keys, other = work / "keys", work / "other-keys"
    fingerprint = json.loads(ok(run(env, "keys.generate", "--out", str(keys))).stdout)["fingerprint"]
    other_fingerprint = json.loads(ok(run(env, "keys.generate", "--out", str(other))).stdout)["fingerprint"]
    build = work / "build"
    write_records(build, refs, ids)
    variants = str(work / "variants.yaml")
    ok(run(env, "push", "--variant", VARIANT, "--registry", f"{registry.host}/staging", "--build-dir", str(build),
           "--variants-file", variants))
    ok(run(env, "sign", "--variant", VARIANT, "--key", str(keys / "cosign.key"), "--build-dir", str(build)))
    sign_record = json.loads((build / VARIANT / "sign.json").read_text())
    out = work / "export"
    record = json.loads(ok(run(env, "export", "--variant", VARIANT, "--variants-file", variants, "--build-dir",
                               str(build), "--media", str(MEDIA), "--out", str(out), "--keep-dirs")).stdout)
    yield {"refs": refs, "ids": ids, "env": env, "pub": keys / "cosign.pub", "other": other / "cosign.pub",
           "fingerprint": fingerprint, "other_fingerprint": other_fingerprint, "build": build, "saved": saved,
           "sign": sign_record, "out": out, "record": record, "work": work,
           "dirs": [out / f"volume-{v['number']:02d}" for v in record["volumes"]],
           "isos": [out / v["iso"] for v in record["volumes"]], "extra_ids": []}
    subprocess.run(["docker", "rmi", "-f", *ids.values(), *record_extra(work)], capture_output=True)


def record_extra(work: Path) -> list[str]:
    path = work / "extra-ids"
    return path.read_text().split() if path.exists() else []


def remember(signed, iid: str) -> None:
    with open(signed["work"] / "extra-ids", "a") as fh:
        fh.write(iid + "\n")


@pytest.fixture
def present(signed):
    """Both images in the engine under their refs (a test before may have removed them)."""
    if any(image_id(signed["refs"][a]) != signed["ids"][a] for a in ARCHES):
        subprocess.run(["docker", "load", "-i", str(signed["saved"])], check=True, capture_output=True)
    return signed


@pytest.fixture
def absent(signed):
    """Neither image (nor any image a test made) in the engine, so a load or its absence shows."""
    subprocess.run(["docker", "rmi", "-f", *signed["ids"].values(), *record_extra(signed["work"])], capture_output=True)
    assert nothing_loaded(signed)
    return signed


def nothing_loaded(signed) -> bool:
    return all(image_id(x) is None for x in [*signed["refs"].values(), *signed["ids"].values(), *record_extra(signed["work"])])


def from_args(sources) -> list[str]:
    return [a for s in sources for a in ("--from", str(s))]


def install(signed, dirs, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(dirs[0] / "install.sh"), *flags, *map(str, dirs)], capture_output=True, text=True,
                          env=dict(os.environ, TMPDIR=str(signed["work"])))


def error_of(proc: subprocess.CompletedProcess) -> str:
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr[proc.stderr.index("error:"):]


def copy_dirs(dirs: list[Path], to: Path) -> list[Path]:
    return [Path(shutil.copytree(d, to / d.name)) for d in dirs]


def reseal(volume: Path) -> None:
    """An attacker's last step after changing files: MANIFEST.json's file list and SHA256SUMS again."""
    import hashlib

    from rapidship.export.write import manifest_text, sums_text

    doc = json.loads((volume / "MANIFEST.json").read_text())
    for name in doc["files"]:
        data = (volume / name).read_bytes()
        doc["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    text = manifest_text(doc)
    (volume / "MANIFEST.json").write_text(text)
    (volume / "SHA256SUMS").write_text(sums_text({n: m["sha256"] for n, m in doc["files"].items()}
                                                 | {"MANIFEST.json": hashlib.sha256(text.encode()).hexdigest()}))


def forge(signed, archive: bytes, to: Path) -> list[Path]:
    """A one-volume disc of `archive` carrying the genuine disc's MANIFEST images, signatures and
    key fingerprint, with MANIFEST.json, install.sh and SHA256SUMS made consistent again."""
    import hashlib

    from rapidship.export.write import (INSTALL_BODY, ExportRecord, ImageRecord, Media, PartRecord, install_script,
                                        part_name)

    volume = copy_dirs(signed["dirs"][:1], to)[0]
    for old in volume.glob("images.tar.zst.*"):
        old.unlink()
    packed = subprocess.run(["zstd", "-q", "-c"], input=archive, capture_output=True, check=True).stdout
    (volume / part_name(0)).write_bytes(packed)
    digest = hashlib.sha256(packed).hexdigest()
    doc = json.loads((volume / "MANIFEST.json").read_text())
    part = PartRecord(part_name(0), 0, 1, 0, len(packed), digest)
    doc.update(volume_count=1, parts=[vars(part)], archive=doc["archive"] | {"bytes": len(packed), "sha256": digest,
                                                                             "tar_bytes": len(archive)})
    doc["files"] = {n: m for n, m in doc["files"].items() if not n.startswith("images.tar.zst.")} | {part.name: {}}
    record = ExportRecord(export_id=doc["export_id"], created=doc["created"], tool_version=doc["tool_version"],
                          media=Media(**doc["media"]), images=[ImageRecord(**i) for i in doc["images"]],
                          signing_key_fingerprint=doc["signing_key_fingerprint"], parts=[part])
    (volume / "install.sh").write_text(install_script(record, INSTALL_BODY.read_text()))
    (volume / "MANIFEST.json").write_text(json.dumps(doc, indent=2) + "\n")
    reseal(volume)
    return [volume]


def saved_tar(*refs: str) -> bytes:
    return subprocess.run(["docker", "save", *refs], capture_output=True, check=True).stdout


def swap_layer(archive: bytes, ref: str, replacement: bytes) -> bytes:
    """The docker-archive with the first layer of `ref` replaced (config and manifest.json untouched)."""
    source = tarfile.open(fileobj=io.BytesIO(archive))
    entry = next(e for e in json.loads(source.extractfile("manifest.json").read()) if ref in e["RepoTags"])
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for m in source:
            data = source.extractfile(m).read() if m.isfile() else None
            if m.name == entry["Layers"][0]:
                data, m.size = replacement, len(replacement)
            tar.addfile(m, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def other_image(signed, tag: str) -> str:
    """Another image made like the signed ones (same labels, other bytes), tagged `tag`; its id."""
    iid = load_image(tag, "amd64", os.urandom(160_000))
    remember(signed, iid)
    return iid


# ---- export ------------------------------------------------------------------------------------

def test_the_disc_carries_every_signature_and_the_keys_fingerprint(signed):
    record, sign_record = signed["record"], signed["sign"]
    assert record["volume_count"] == 2 and record["signing_key_fingerprint"] == signed["fingerprint"]
    assert sign_record["key_fingerprint"] == signed["fingerprint"]
    by_id = {i["image_id"]: i for i in record["images"]}
    for arch in ARCHES:
        image = by_id[signed["ids"][arch]]
        assert image["signed_digest"] == sign_record["arches"][arch]["digest"] and not image["unsigned"]
    for volume in signed["dirs"]:  # every volume carries them, covered by its SHA256SUMS
        doc = json.loads((volume / "MANIFEST.json").read_text())
        assert doc["signing_key_fingerprint"] == signed["fingerprint"]
        for image in doc["images"]:
            folder = volume / "signatures" / image["signed_digest"].replace(":", "-")
            assert {p.name for p in folder.iterdir()} >= {"manifest.json", "sig.json", "att.json", "payload.json",
                                                          "payload.sig", "blobs"}
            kept = signed["build"] / VARIANT / "signed" / folder.name
            assert (folder / "sig.json").read_bytes() == (kept / "sig.json").read_bytes()
            assert json.loads((folder / "manifest.json").read_bytes())["config"]["digest"] == image["image_id"]
            payload = json.loads((folder / "payload.json").read_text())
            assert payload["critical"]["image"]["docker-manifest-digest"] == image["signed_digest"]
        check = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=volume, capture_output=True, text=True)
        assert check.returncode == 0 and "signatures/" in check.stdout, check.stdout


def test_an_unsigned_image_is_refused_unless_unsigned_is_passed(signed, present, tmp_path):
    env, ref = signed["env"], f"rapidship-test-{uuid.uuid4().hex[:8]}:unsigned"
    other_image(signed, ref)
    proc = run(env, "export", "--image", ref, "--build-dir", str(signed["build"]), "--out", str(tmp_path / "a"))
    message = error_of(proc)
    assert proc.returncode == 2 and f"no signature for {ref}" in message and "--unsigned" in message
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())
    proc = ok(run(env, "export", "--image", ref, "--image", signed["refs"]["amd64"], "--unsigned", "--build-dir",
                  str(signed["build"]), "--out", str(tmp_path / "b"), "--keep-dirs"))
    assert "WARNING: --unsigned" in proc.stderr and ref in proc.stderr
    images = {i["ref"]: i for i in json.loads(proc.stdout)["images"]}
    assert images[ref]["unsigned"] and not images[ref]["signed_digest"]
    assert images[signed["refs"]["amd64"]]["signed_digest"]  # the signed one keeps its signature
    proc = run(env, "import", "--from", str(tmp_path / "b"), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1 and f"image {ref} " in message and "exported unsigned" in message


# ---- invoke import -------------------------------------------------------------------------------

def test_import_with_the_key_verifies_then_loads_identical_images(signed, absent):
    proc = ok(run(signed["env"], "import", *from_args(signed["isos"]), "--key", str(signed["pub"])))
    report = json.loads(proc.stdout)
    assert report["verified_with"] == signed["fingerprint"] and report["verification"] == "signatures"
    assert {x["ref"]: x["image_id"] for x in report["loaded"]} == {signed["refs"][a]: signed["ids"][a] for a in ARCHES}
    assert all(image_id(signed["refs"][a]) == signed["ids"][a] for a in ARCHES)
    assert "verified 2 image(s)" in proc.stderr


def test_import_without_a_key_is_refused_before_reading_anything(signed, absent):
    proc = run(signed["env"], "import", *from_args(signed["isos"]))
    message = error_of(proc)
    assert proc.returncode == 2 and "--key: no public key" in message and "--key cosign.pub" in message
    assert "--no-verify" in message and nothing_loaded(signed)


def test_no_verify_loads_and_says_what_it_skipped(signed, absent):
    proc = ok(run(signed["env"], "import", *from_args(signed["dirs"]), "--no-verify"))
    report = json.loads(proc.stdout)
    assert report["verification"] == "skipped" and report["verified_with"] == ""
    assert "WARNING: --no-verify" in proc.stderr and "NOT checked" in proc.stderr
    assert signed["fingerprint"] in proc.stderr.replace("\n", "")
    assert all(image_id(signed["refs"][a]) == signed["ids"][a] for a in ARCHES)


def test_another_key_is_refused_naming_both_fingerprints(signed, absent):
    proc = run(signed["env"], "import", *from_args(signed["isos"]), "--key", str(signed["other"]))
    message = error_of(proc)
    assert proc.returncode == 1
    assert signed["fingerprint"] in message and signed["other_fingerprint"] in message and "nothing was loaded" in message
    assert nothing_loaded(signed)


@pytest.fixture
def swapped_image(signed, present, tmp_path):
    """An attacker's re-export: the archive holds another image under the amd64 ref, while
    MANIFEST.json, the signatures and the fingerprint are the genuine ones (SHA256SUMS all match)."""
    from rapidship.export.write import export, image_record, parse_media
    from rapidship.records import Workspace

    amd64 = signed["refs"]["amd64"]
    evil = other_image(signed, f"rapidship-test-{uuid.uuid4().hex[:8]}:evil")
    subprocess.run(["docker", "tag", evil, amd64], check=True)
    info = json.loads(subprocess.run(["docker", "image", "inspect", amd64], capture_output=True, text=True).stdout)[0]
    lie = image_record(info | {"Id": signed["ids"]["amd64"]}, amd64, VARIANT)  # the record says: the signed image
    record = export([lie], parse_media(MEDIA), tmp_path / "evil", keep_dirs=True, ws=Workspace(signed["build"]))
    assert record.images[0].signed_digest == signed["sign"]["arches"]["amd64"]["digest"]
    return [tmp_path / "evil" / f"volume-{v.number:02d}" for v in record.volumes], evil


def test_an_archive_holding_another_image_is_refused_naming_it(signed, swapped_image, absent):
    dirs, evil = swapped_image
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1
    assert f"image {signed['refs']['amd64']} ({evil[:19]}) in the archive is not a signed image" in message
    assert f"({signed['ids']['amd64'][:19]}) is listed in MANIFEST.json but the archive does not hold it" in message
    assert "nothing was loaded" in message and nothing_loaded(signed) and image_id(evil) is None


def test_a_swapped_layer_is_refused_naming_the_image_and_layer(signed, present, absent, tmp_path):
    amd64 = signed["refs"]["amd64"]
    subprocess.run(["docker", "load", "-i", str(signed["saved"])], check=True, capture_output=True)
    archive = saved_tar(*signed["refs"].values())
    subprocess.run(["docker", "rmi", "-f", *signed["ids"].values()], capture_output=True)
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        data = b"#!/bin/sh\necho not what was signed\n"
        info = tarfile.TarInfo("payload.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    dirs = forge(signed, swap_layer(archive, amd64, layer.getvalue()), tmp_path)
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1
    assert f"image {amd64} ({signed['ids']['amd64'][:19]}): layer 1 of 1" in message and "was swapped" in message
    assert signed["refs"]["arm64"] not in message and nothing_loaded(signed)


def test_a_swapped_signature_is_refused(signed, absent, tmp_path):
    dirs = copy_dirs(signed["dirs"], tmp_path)
    amd64, arm64 = (next(i for i in signed["record"]["images"] if i["image_id"] == signed["ids"][a]) for a in ARCHES)
    for volume in dirs:  # arm64's signature object passed off as amd64's, on every volume
        sigs = volume / "signatures"
        target = sigs / amd64["signed_digest"].replace(":", "-")
        shutil.copy(sigs / arm64["signed_digest"].replace(":", "-") / "sig.json", target / "sig.json")
        reseal(volume)
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1 and f"image {amd64['ref']} ({amd64['image_id'][:19]})" in message
    assert "names another digest" in message and arm64["ref"] not in message and nothing_loaded(signed)


def test_export_verify_takes_the_key_the_same_way(signed):
    report = json.loads(ok(run(signed["env"], "export-verify", "--from", str(signed["out"]), "--key",
                               str(signed["pub"]))).stdout)
    assert report["verified_with"] == signed["fingerprint"]
    assert {x["image_id"] for x in report["verified"]} == set(signed["ids"].values())
    proc = run(signed["env"], "export-verify", "--from", str(signed["out"]))
    assert proc.returncode == 2 and "--key" in error_of(proc)
    proc = run(signed["env"], "export-verify", "--from", str(signed["out"]), "--key", str(signed["other"]))
    assert proc.returncode == 1 and signed["other_fingerprint"] in error_of(proc)


# ---- install.sh ----------------------------------------------------------------------------------

def test_install_sh_verifies_with_the_key_then_loads(signed, absent):
    proc = install(signed, list(reversed(signed["dirs"])), "--key", str(signed["pub"]))
    assert proc.returncode == 0, proc.stderr
    for arch in ARCHES:
        assert f"loaded {signed['refs'][arch]} {signed['ids'][arch]}" in proc.stdout
        assert f"signature ok: {signed['refs'][arch]} {signed['ids'][arch]}" in proc.stderr
        assert image_id(signed["refs"][arch]) == signed["ids"][arch]
    assert f"verified 2 image(s) with key {signed['fingerprint']}" in proc.stderr


def test_install_sh_without_a_key_refuses_and_no_verify_says_what_it_skipped(signed, absent):
    proc = install(signed, signed["dirs"])
    assert proc.returncode == 2 and "--key cosign.pub" in proc.stderr and "--no-verify" in proc.stderr
    assert "loading into docker" not in proc.stderr and nothing_loaded(signed)
    proc = install(signed, signed["dirs"], "--no-verify")
    assert proc.returncode == 0, proc.stderr
    assert "WARNING: --no-verify" in proc.stderr and "signature NOT checked" in proc.stderr
    assert signed["fingerprint"] in proc.stderr
    assert all(image_id(signed["refs"][a]) == signed["ids"][a] for a in ARCHES)


def test_install_sh_refuses_another_key_naming_both_fingerprints(signed, absent):
    proc = install(signed, signed["dirs"], "--key", str(signed["other"]))
    assert proc.returncode == 1
    assert signed["fingerprint"] in proc.stderr and signed["other_fingerprint"] in proc.stderr
    assert "loading into docker" not in proc.stderr and nothing_loaded(signed)


def test_install_sh_refuses_an_archive_holding_another_image(signed, swapped_image, absent):
    dirs, evil = swapped_image
    proc = install(signed, dirs, "--key", str(signed["pub"]))
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert f"image {signed['refs']['amd64']} ({evil})" in last and "is not a signed image" in last
    assert "loading into docker" not in proc.stderr and nothing_loaded(signed) and image_id(evil) is None


def test_install_sh_refuses_a_swapped_payload_signature(signed, absent, tmp_path):
    dirs = copy_dirs(signed["dirs"], tmp_path)
    amd64, arm64 = (next(i for i in signed["record"]["images"] if i["image_id"] == signed["ids"][a]) for a in ARCHES)
    for volume in dirs:
        sigs = volume / "signatures"
        shutil.copy(sigs / arm64["signed_digest"].replace(":", "-") / "payload.sig",
                    sigs / amd64["signed_digest"].replace(":", "-") / "payload.sig")
        reseal(volume)
    proc = install(signed, dirs, "--key", str(signed["pub"]))
    assert proc.returncode == 1
    assert f"image {amd64['ref']} ({amd64['image_id']}): its signature does not verify" in proc.stderr
    assert "loading into docker" not in proc.stderr and nothing_loaded(signed)
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))  # Python refuses it too
    assert proc.returncode == 1 and "payload.json or payload.sig differ" in error_of(proc)


def test_install_sh_lets_docker_load_refuse_a_swapped_layer(signed, present, absent, tmp_path):
    """install.sh checks configs, not layers: docker load compares each layer with the signed
    config's diff_ids and creates no image from a swapped one."""
    subprocess.run(["docker", "load", "-i", str(signed["saved"])], check=True, capture_output=True)
    archive = saved_tar(signed["refs"]["amd64"])
    subprocess.run(["docker", "rmi", "-f", *signed["ids"].values()], capture_output=True)
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("payload.bin")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    dirs = forge(signed, swap_layer(archive, signed["refs"]["amd64"], layer.getvalue()), tmp_path)
    proc = install(signed, dirs, "--key", str(signed["pub"]))
    assert proc.returncode == 1 and "docker load failed" in proc.stderr, proc.stderr
    assert image_id(signed["refs"]["amd64"]) is None and image_id(signed["ids"]["amd64"]) is None


def add_members(archive: bytes, members: dict[str, bytes]) -> bytes:
    """The docker-archive with `members` added (or replacing those of the same name)."""
    source = tarfile.open(fileobj=io.BytesIO(archive))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for m in source:
            if m.name not in members:
                tar.addfile(m, source.extractfile(m) if m.isfile() else None)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def unsigned_parts(signed, tag: str) -> tuple[str, bytes, bytes, str]:
    """Another image's config and layer as archive members: (id, config, layer, layer path)."""
    evil = other_image(signed, tag)
    theirs = tarfile.open(fileobj=io.BytesIO(saved_tar(tag)))
    entry = json.loads(theirs.extractfile("manifest.json").read())[0]
    return (evil, theirs.extractfile(entry["Config"]).read(), theirs.extractfile(entry["Layers"][0]).read(),
            entry["Layers"][0])


@pytest.mark.parametrize("how", ["a key in another case", "index.json"])
def test_an_image_smuggled_past_manifest_json_is_refused_by_both(signed, present, how, tmp_path):
    """docker load reads manifest.json with Go, whose keys match case-insensitively (the later
    wins); a containerd image store loads what index.json names. Neither can slip an image past."""
    import hashlib

    evil, config, layer, layer_path = unsigned_parts(signed, f"rapidship-test-{uuid.uuid4().hex[:8]}:smuggled")
    archive = saved_tar(*signed["refs"].values())
    entries = json.loads(tarfile.open(fileobj=io.BytesIO(archive)).extractfile("manifest.json").read())
    added = {f"{evil[7:]}.json": config, layer_path: layer}
    if how == "index.json":
        oci = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                          "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": evil,
                                     "size": len(config)},
                          "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "size": len(layer),
                                      "digest": "sha256:" + hashlib.sha256(layer).hexdigest()}]}).encode()
        added |= {f"blobs/sha256/{hashlib.sha256(oci).hexdigest()}": oci, f"blobs/sha256/{evil[7:]}": config,
                  "index.json": json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                                            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                           "digest": "sha256:" + hashlib.sha256(oci).hexdigest(),
                                                           "size": len(oci)}]}).encode()}
    else:
        entries[0]["config"] = f"{evil[7:]}.json"  # Go's decoder takes this one for Config
        entries[0]["layers"] = [layer_path]
    added["manifest.json"] = json.dumps(entries).encode()
    subprocess.run(["docker", "rmi", "-f", *signed["ids"].values(), evil], capture_output=True)
    dirs = forge(signed, add_members(archive, added), tmp_path)
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1 and "nothing was loaded" in message
    assert (f"({evil[:19]})" in message and "is not a signed image" in message) if how == "index.json" \
        else "no usable manifest.json" in message
    proc = install(signed, dirs, "--key", str(signed["pub"]))
    assert proc.returncode == 1 and "loading into docker" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert (evil in last and "is not a signed image" in last) if how == "index.json" \
        else "manifest.json is not as docker save writes it" in last, proc.stderr
    assert nothing_loaded(signed) and image_id(evil) is None


# ---- round 2: one name, one meaning -------------------------------------------------------------

def duplicated(archive: bytes, name: str, evil: bytes, evil_first: bool) -> bytes:
    """The archive with a second member spelled `name` (which cleans to an existing member's name)
    holding `evil`: before the genuine one or after it."""
    source = tarfile.open(fileobj=io.BytesIO(archive))
    members = [(m, source.extractfile(m).read() if m.isfile() else None) for m in source]
    info = tarfile.TarInfo(name)
    info.size = len(evil)
    extra = [(info, evil)]
    ordered = extra + members if evil_first else members + extra
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for m, data in ordered:
            tar.addfile(m, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def catalog(registry: str) -> list[str]:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{registry}/v2/_catalog", timeout=5) as resp:
        return json.loads(resp.read())["repositories"]


@pytest.mark.parametrize("spelling", ["manifest.json", "./manifest.json"])
@pytest.mark.parametrize("evil_first", [True, False], ids=["evil-first", "evil-last"])
def test_a_manifest_json_given_twice_loads_and_pushes_nothing(signed, present, spelling, evil_first, tmp_path):
    """Whichever copy a reader takes (install.sh's tar, docker load, skopeo), an archive holding
    manifest.json twice is refused by every reader before anything is loaded or pushed."""
    from rapidship.export.load import scratch_registry

    evil, config, layer, layer_path = unsigned_parts(signed, f"rapidship-test-{uuid.uuid4().hex[:8]}:twice")
    archive = saved_tar(*signed["refs"].values())
    entries = json.loads(tarfile.open(fileobj=io.BytesIO(archive)).extractfile("manifest.json").read())
    evil_entries = [dict(entries[0], Config=f"{evil[7:]}.json", Layers=[layer_path])]
    archive = add_members(archive, {f"{evil[7:]}.json": config, layer_path: layer})
    forged = duplicated(archive, spelling, json.dumps(evil_entries).encode(), evil_first)
    subprocess.run(["docker", "rmi", "-f", *signed["ids"].values(), evil], capture_output=True)
    dirs = forge(signed, forged, tmp_path)
    proc = install(signed, dirs, "--key", str(signed["pub"]))
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "loading into docker" not in proc.stderr
    assert ("more than once" in last or "is not spelled as docker save writes names" in last), proc.stderr
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1 and "'manifest.json' more than once" in message and "nothing was loaded" in message
    assert nothing_loaded(signed) and image_id(evil) is None
    with scratch_registry(tmp_path) as registry:
        proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]), "--registry", registry,
                   "--insecure", "--work", str(tmp_path))
        assert proc.returncode == 1 and "more than once" in error_of(proc)
        assert catalog(registry) == []  # nothing reached the site registry


def test_import_checks_every_id_in_the_archive_before_pushing_any(signed, tmp_path):
    """--no-verify still compares ids; now before the first push, so a wrong archive pushes nothing."""
    from rapidship.export.load import scratch_registry

    swapped = copy_dirs(signed["dirs"], tmp_path / "disc")
    for volume in swapped:  # MANIFEST.json's record of the arm64 id is wrong (as a swapped archive would be)
        doc = json.loads((volume / "MANIFEST.json").read_text())
        for image in doc["images"]:
            if image["image_id"] == signed["ids"]["arm64"]:
                image["image_id"] = signed["ids"]["amd64"]
        from rapidship.export.write import manifest_text
        (volume / "MANIFEST.json").write_text(manifest_text(doc))
        reseal(volume)
    with scratch_registry(tmp_path) as registry:
        proc = run(signed["env"], "import", *from_args(swapped), "--no-verify", "--registry", registry, "--insecure",
                   "--work", str(tmp_path))
        message = error_of(proc)
        assert proc.returncode == 1 and "before anything was pushed" in message and signed["refs"]["arm64"] in message
        assert catalog(registry) == []


def retagged(archive: bytes, tag: str) -> bytes:
    """The archive with every image's RepoTags replaced by `tag` (a site's existing name)."""
    entries = json.loads(tarfile.open(fileobj=io.BytesIO(archive)).extractfile("manifest.json").read())
    for entry in entries[:1]:
        entry["RepoTags"] = [tag]
    return add_members(archive, {"manifest.json": json.dumps(entries).encode()})


def test_a_signed_image_under_a_name_its_signature_does_not_cover_is_refused(signed, present, tmp_path):
    """The names an import creates come from the archive, which the disc's writer controls: each
    must be one the image's signature lists, in install.sh and in invoke import."""
    archive = saved_tar(*signed["refs"].values())
    dirs = forge(signed, retagged(archive, "site-registry.example/python:3.11"), tmp_path)
    subprocess.run(["docker", "rmi", "-f", *signed["ids"].values()], capture_output=True)
    proc = install(signed, dirs, "--key", str(signed["pub"]))
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "loading into docker" not in proc.stderr
    assert "the archive tags it site-registry.example/python:3.11, a name its signature does not cover" in last
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1 and "tags it site-registry.example/python:3.11, a name its signature does not cover" \
        in message
    assert nothing_loaded(signed) and image_id("site-registry.example/python:3.11") is None


def test_the_signature_lists_the_names_and_export_refuses_any_other(signed, present, tmp_path):
    amd64 = signed["refs"]["amd64"]
    folder = signed["dirs"][0] / "signatures" / signed["sign"]["arches"]["amd64"]["digest"].replace(":", "-")
    names = json.loads((folder / "payload.json").read_text())["optional"]["io.rapidship.names"]
    assert amd64 in names and any(n.endswith(":26.10-cpu-debian12-py3.11-amd64") and "/staging/" in n for n in names)
    alias = f"rapidship-test-{uuid.uuid4().hex[:8]}:alias"
    subprocess.run(["docker", "tag", amd64, alias], check=True)
    try:
        proc = run(signed["env"], "export", "--image", alias, "--build-dir", str(signed["build"]), "--out",
                   str(tmp_path / "x"))
        message = error_of(proc)
        assert proc.returncode == 2 and f"{alias} ({signed['ids']['amd64'][:19]}): its signature covers only" in message
    finally:
        subprocess.run(["docker", "rmi", alias], capture_output=True)
