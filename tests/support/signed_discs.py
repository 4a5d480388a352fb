"""Signed discs of tiny real images, made through the real `invoke push`, `invoke sign` and
`invoke export`, and the helpers the tests that attack them share.

The images are single-layer FROM-scratch images of random bytes (so zstd cannot shrink them),
loaded into the engine from docker-archives made here: no build cache holds their layer (BuildKit's
cache keeps a built layer in the engine's layer store, and `docker load` then takes that one instead
of the archive's, which would hide what a swapped layer does). Each test's images carry a unique name,
so runs sharing one engine never touch each other's images.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from rapidship.export.write import ISO_RESERVE, METADATA_RESERVE
from support.commands import ROOT
from support.tiny_matrix import VARIANTS_YAML

VARIANT, LOCK, PASSWORD = "cpu-debian12", "5e" * 32, "disc-signing-test"
ARCHES = ("amd64", "arm64")
MEDIA = ISO_RESERVE + METADATA_RESERVE + 420_000  # ~300 kB of data per volume after the signatures: 2 volumes
CREATED = "2026-12-01T00:00:00+00:00"


def labels(created: str = CREATED) -> dict[str, str]:
    return {"io.rapidship.variant": VARIANT, "io.rapidship.lock.sha256": LOCK,
            "org.opencontainers.image.created": created, "org.opencontainers.image.revision": "0d" * 20}


def layer_tar(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def load_image(ref: str, arch: str, payload: bytes, created: str = CREATED, shared: bytes | None = None) -> str:
    """`docker load` of a one-layer image (FROM scratch + COPY payload.bin, the labels export
    verification reads, the release `created`); with `shared`, a first layer of those bytes (one
    two releases share: a delta disc leaves it to the host). Returns the engine's image id."""
    layers = ([layer_tar({"shared.bin": shared})] if shared is not None else []) + [layer_tar({"payload.bin": payload})]
    diff_ids = ["sha256:" + hashlib.sha256(layer).hexdigest() for layer in layers]
    config = json.dumps({"architecture": arch, "os": "linux", "created": created,
                         "config": {"Labels": labels(created), "Cmd": ["/payload.bin"]},
                         "rootfs": {"type": "layers", "diff_ids": diff_ids},
                         "history": [{"created": created, "created_by": "COPY payload.bin /"}]}).encode()
    hex_id = hashlib.sha256(config).hexdigest()
    archive = layer_tar({f"{hex_id}.json": config, **{f"{d[7:]}/layer.tar": layer for d, layer in zip(diff_ids, layers)},
                         "manifest.json": json.dumps([{"Config": f"{hex_id}.json", "RepoTags": [ref],
                                                       "Layers": [f"{d[7:]}/layer.tar" for d in diff_ids]}]).encode()})
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


def error_of(proc: subprocess.CompletedProcess) -> str:
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr[proc.stderr.index("error:"):]


def from_args(sources) -> list[str]:
    return [a for s in sources for a in ("--from", str(s))]


def copy_dirs(dirs: list[Path], to: Path) -> list[Path]:
    return [Path(shutil.copytree(d, to / d.name)) for d in dirs]


def reseal(volume: Path) -> None:
    """An attacker's last step after changing files: MANIFEST.json's file list and SHA256SUMS again."""
    from rapidship.export.write import manifest_text, sums_text

    doc = json.loads((volume / "MANIFEST.json").read_text())
    for name in doc["files"]:
        data = (volume / name).read_bytes()
        doc["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    text = manifest_text(doc)
    (volume / "MANIFEST.json").write_text(text)
    (volume / "SHA256SUMS").write_text(sums_text({n: m["sha256"] for n, m in doc["files"].items()}
                                                 | {"MANIFEST.json": hashlib.sha256(text.encode()).hexdigest()}))


def saved_tar(*refs: str) -> bytes:
    return subprocess.run(["docker", "save", *refs], capture_output=True, check=True).stdout


@dataclass
class Disc:
    """One release of the two tiny images, pushed, signed and exported; `work` holds it all."""

    work: Path
    env: dict
    refs: dict[str, str]
    ids: dict[str, str]
    pub: Path
    other: Path
    fingerprint: str
    other_fingerprint: str
    build: Path
    saved: Path
    sign: dict
    out: Path
    record: dict
    dirs: list[Path] = field(default_factory=list)
    isos: list[Path] = field(default_factory=list)

    def __getitem__(self, key: str):  # the tests read it like the dict it was
        return getattr(self, key)

    def forget(self, *ids: str) -> None:
        """Ids of images a test made: removed with the disc's own at the end."""
        with open(self.work / "extra-ids", "a") as fh:
            fh.write("".join(i + "\n" for i in ids))

    def extra(self) -> list[str]:
        path = self.work / "extra-ids"
        return path.read_text().split() if path.exists() else []

    def remove_images(self) -> None:
        subprocess.run(["docker", "rmi", "-f", *self.ids.values(), *self.extra()], capture_output=True)

    def nothing_loaded(self) -> bool:
        return all(image_id(x) is None for x in [*self.refs.values(), *self.ids.values(), *self.extra()])


def make_disc(work: Path, registry, name: str, created: str = CREATED, keys: Path | None = None,
              policy: dict | None = None, shared: dict[str, bytes] | None = None, trust: bool = False,
              trust_from: Path | None = None, sign_at_push: bool = False) -> Disc:
    """Make, push, sign and export the two images of release `created` under `name` (a repository
    unique to the test run); `keys` reuses a key pair made before (a later release of one signer);
    `policy`: the scan rules the records say the scan was decided under; `shared`: per arch, the
    bytes of a first layer two releases share; `trust`: a new trust repository (invoke trust.init);
    `trust_from`: the work folder of an earlier disc whose trust repository (TRUST_FROM/build/trust,
    rotated or not) and online keys this release continues; `sign_at_push`: `invoke push --key` signs
    (the online keys from $RAPIDSHIP_TUF_SNAPSHOT_KEY / $RAPIDSHIP_TUF_TIMESTAMP_KEY), no `invoke sign`."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "variants.yaml").write_text(VARIANTS_YAML.format(image=name))
    refs = {arch: f"{name}:26.10-cpu-debian12-py3.11-{arch}" for arch in ARCHES}
    ids = {arch: load_image(refs[arch], arch, os.urandom(160_000), created, (shared or {}).get(arch)) for arch in ARCHES}
    saved = work / "images.tar"
    subprocess.run(["docker", "save", "-o", str(saved), *refs.values()], check=True)
    docker_config = work / "docker-config"
    docker_config.mkdir(exist_ok=True)
    env = dict(os.environ, RAPIDSHIP_REGISTRY_USER=registry.user, RAPIDSHIP_REGISTRY_PASSWORD=registry.password,
               RAPIDSHIP_REGISTRY_CA=str(registry.ca), RAPIDSHIP_RETRY_ATTEMPTS="2", RAPIDSHIP_RETRY_BASE_DELAY="0.05",
               DOCKER_CONFIG=str(docker_config), RAPIDSHIP_SIGNING_PASSWORD=PASSWORD, TMPDIR=str(work),
               RAPIDSHIP_SITE_DIR=str(work / "site"))
    if keys is None:
        keys = work / "keys"
        ok(run(env, "keys.generate", "--out", str(keys)))
    other = work / "other-keys"
    if not other.exists():
        ok(run(env, "keys.generate", "--out", str(other)))
    fingerprint = _fingerprint(keys / "cosign.pub")
    build = work / "build"
    from support.gated_records import write_gated

    write_gated(build, VARIANT, {arch: (refs[arch], ids[arch]) for arch in ARCHES}, lock=LOCK, policy=policy)
    variants = str(work / "variants.yaml")
    online = []
    if trust:  # a TUF trust repository: 3 root keys (2 must sign), the signing key as release signer
        for role in ("root1", "root2", "root3", "snapshot", "timestamp"):
            ok(run(env, "keys.generate", "--out", str(work / role)))
        roots = [a for r in ("root1", "root2", "root3") for a in ("--root-key", str(work / r / "cosign.key"))]
        online = online_keys(work)
        ok(run(env, "trust.init", *roots, "--targets-key", str(keys / "cosign.key"), *online, "--build-dir", str(build)))
    elif trust_from:
        shutil.copytree(trust_from / "build" / "trust", build / "trust")
        online = online_keys(trust_from)
    push = ["push", "--variant", VARIANT, "--registry", f"{registry.host}/staging", "--build-dir", str(build),
            "--variants-file", variants]
    if sign_at_push:  # push signs (--key) and writes the TUF release, its online keys from the environment
        ok(run(env | {"RAPIDSHIP_TUF_SNAPSHOT_KEY": online[1], "RAPIDSHIP_TUF_TIMESTAMP_KEY": online[3]} if online
               else env, *push, "--key", str(keys / "cosign.key")))
    else:
        ok(run(env, *push))
        ok(run(env, "sign", "--variant", VARIANT, "--key", str(keys / "cosign.key"), "--build-dir", str(build),
               *online))
    sign_record = json.loads((build / VARIANT / "sign.json").read_text())
    out = work / "export"
    record = json.loads(ok(run(env, "export", "--variant", VARIANT, "--variants-file", variants, "--build-dir",
                               str(build), "--media", str(MEDIA), "--out", str(out), "--keep-dirs", "--json")).stdout)
    return Disc(work=work, env=env, refs=refs, ids=ids, pub=keys / "cosign.pub", other=other / "cosign.pub",
                fingerprint=fingerprint, other_fingerprint=_fingerprint(other / "cosign.pub"), build=build, saved=saved,
                sign=sign_record, out=out, record=record,
                dirs=[out / f"volume-{v['number']:02d}" for v in record["volumes"]],
                isos=[out / v["iso"] for v in record["volumes"]])


def online_keys(work: Path) -> list[str]:
    """The snapshot and timestamp key flags of the trust repository made under `work`."""
    return ["--snapshot-key", str(work / "snapshot" / "cosign.key"), "--timestamp-key",
            str(work / "timestamp" / "cosign.key")]


def with_metadata(disc: Disc, build: Path, to: Path) -> list[Path]:
    """Copies of the disc's volumes whose tuf/ is what export writes from the trust repository of
    `build` (tufmeta.disc_files: the same bytes, root chain included), MANIFEST.json and SHA256SUMS
    made consistent again: a disc of the same images carrying other release metadata."""
    from rapidship.sign import tufmeta

    files = tufmeta.disc_files(build)
    dirs = copy_dirs(disc.dirs, to)
    for volume in dirs:
        shutil.rmtree(volume / tufmeta.DISC)
        (volume / tufmeta.DISC).mkdir()
        for name, data in files.items():
            (volume / name).write_bytes(data)
        doc = json.loads((volume / "MANIFEST.json").read_text())
        doc["files"] = {n: m for n, m in doc["files"].items() if not n.startswith(tufmeta.DISC + "/")} | {
            n: {} for n in files}
        (volume / "MANIFEST.json").write_text(json.dumps(doc, indent=2) + "\n")
        reseal(volume)
    return dirs


def _fingerprint(pub: Path) -> str:
    from rapidship.sign.keys import fingerprint, load_public

    return fingerprint(load_public(str(pub)))


def unique_name() -> str:
    return f"rapidship-test-{uuid.uuid4().hex[:10]}/tiny"


def install(disc: Disc, dirs, *flags: str, site: Path | None = None) -> subprocess.CompletedProcess:
    """install.sh of `dirs`; the site directory is the disc's own unless `site` names a shared one."""
    return subprocess.run(["sh", str(dirs[0] / "install.sh"), *flags, *map(str, dirs)], capture_output=True, text=True,
                          env=dict(os.environ, TMPDIR=str(disc.work), RAPIDSHIP_SITE_DIR=str(site or disc.work / "site")))


def forge(disc: Disc, archive: bytes, to: Path) -> list[Path]:
    """A one-volume disc of `archive` carrying the genuine disc's MANIFEST images, signatures and
    key fingerprint, with MANIFEST.json, install.sh and SHA256SUMS made consistent again."""
    packed = subprocess.run(["zstd", "-q", "-c"], input=archive, capture_output=True, check=True).stdout
    return forge_packed(disc, packed, len(archive), to)


def forge_stream(disc: Disc, archive, to: Path) -> list[Path]:
    """`forge` of an archive read from the stream `archive` (never held whole: a courier's gigabytes)."""
    zstd = subprocess.Popen(["zstd", "-q", "-c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    import threading

    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(zstd.stdout.read()))
    reader.start()
    moved = 0
    while chunk := archive.read(1 << 20):
        zstd.stdin.write(chunk)
        moved += len(chunk)
    zstd.stdin.close()
    reader.join()
    assert zstd.wait() == 0
    return forge_packed(disc, out[0], moved, to)


def forge_packed(disc: Disc, packed: bytes, tar_bytes: int, to: Path) -> list[Path]:
    from rapidship.export.write import (INSTALL_BODY, ExportRecord, ImageRecord, Media, PartRecord, install_script,
                                        part_name)

    volume = copy_dirs(disc.dirs[:1], to)[0]
    for old in volume.glob("images.tar.zst.*"):
        old.unlink()
    (volume / part_name(0)).write_bytes(packed)
    digest = hashlib.sha256(packed).hexdigest()
    doc = json.loads((volume / "MANIFEST.json").read_text())
    part = PartRecord(part_name(0), 0, 1, 0, len(packed), digest)
    doc.update(volume_count=1, parts=[vars(part)], archive=doc["archive"] | {"bytes": len(packed), "sha256": digest,
                                                                             "tar_bytes": tar_bytes})
    doc["files"] = {n: m for n, m in doc["files"].items() if not n.startswith("images.tar.zst.")} | {part.name: {}}
    record = ExportRecord(export_id=doc["export_id"], created=doc["created"], tool_version=doc["tool_version"],
                          media=Media(**doc["media"]), images=[ImageRecord(**i) for i in doc["images"]],
                          signing_key_fingerprint=doc["signing_key_fingerprint"], parts=[part], tar_bytes=tar_bytes)
    (volume / "install.sh").write_text(install_script(record, INSTALL_BODY.read_text()))
    (volume / "MANIFEST.json").write_text(json.dumps(doc, indent=2) + "\n")
    reseal(volume)
    return [volume]


def other_image(disc: Disc, tag: str, created: str = CREATED) -> str:
    """Another image made like the signed ones (same labels, other bytes), tagged `tag`; its id."""
    iid = load_image(tag, "amd64", os.urandom(160_000), created)
    disc.forget(iid)
    return iid
