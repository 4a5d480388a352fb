"""Signatures on discs without an engine: signed bundles made with the real cosign formats and a real
key, docker-archives built here in both layouts (engine 20.10's `<hex>.json` + `<id>/layer.tar`,
newer engines' `blobs/sha256/<hex>` + index.json), compressed with the real zstd and laid out as a
disc by the real export code. Every swap an attacker who can write the disc might try is refused
with a line naming the image and what was swapped."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from rapidship.errors import ConfigError, GateFailure
from rapidship.export import carry, trust as t
from rapidship.export.write import (ExportRecord, ImageRecord, Media, PartWriter, install_script, plan_layout,
                                    sign_images, write_volume_files, INSTALL_BODY, ISO_RESERVE, METADATA_RESERVE)
from rapidship.records import SignedDigest, SignRecord, Workspace
from support.signed_samples import sbom
from rapidship.sign import formats as f
from rapidship.sign.keys import FileSigner, fingerprint, public_pem
from rapidship.sign.sources import keep

VARIANT, LOCK = "cpu-debian12", "ab" * 32
LABELS = {"io.rapidship.variant": VARIANT, "io.rapidship.lock.sha256": LOCK}


def _tar(members: list[tuple[str, bytes | str]]) -> bytes:
    """A tar of (name, bytes) files and (name, '->target') symlinks, in this order."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data[2:]
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Image:
    """A tiny image: layer tars, its config (with the labels the provenance is checked against)."""

    def __init__(self, name: str, *layer_texts: str, labels: dict | None = None) -> None:
        self.ref = f"site/{name}:1"
        self.layers = [_tar([(f"layer-{i}.txt", text.encode())]) for i, text in enumerate(layer_texts)]
        self.config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": labels or LABELS},
                                  "rootfs": {"type": "layers", "diff_ids": ["sha256:" + _sha(x) for x in self.layers]}},
                                 separators=(",", ":")).encode()
        self.id = "sha256:" + _sha(self.config)
        self.manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                                    "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                                               "size": len(self.config), "digest": self.id},
                                    "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                                                "size": len(x), "digest": "sha256:" + _sha(x)} for x in self.layers]},
                                   indent=3).encode()
        self.digest = f.sha256(self.manifest)

    def record(self, **kw) -> ImageRecord:
        return ImageRecord(self.ref, [self.ref], self.id, [], "amd64", "linux", 1, [], VARIANT, **kw)


def sign(image: Image, signer: FileSigner, root: Path) -> Path:
    """What `invoke sign` keeps for one per-arch image: signature, SBOM and provenance attestations."""
    subject = {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "digest": image.digest,
               "size": len(image.manifest)}
    predicate = {"buildDefinition": {"externalParameters": {"variant": VARIANT, "lock": {"sha256": LOCK}}},
                 "runDetails": {"byproducts": [{"name": "image-config", "digest": {"sha256": image.id[7:]}},
                                               {"name": "gates", "annotations": {"passed": True}},
                                               {"name": "trivy-decision",
                                                "annotations": {"passed": True, "image_id": image.id}}]}}
    name = "registry.example/site/" + image.ref.split("/")[1].split(":")[0]
    statements = {f.CYCLONEDX: f.statement(name, image.digest, f.CYCLONEDX, sbom(image.id)),
                  f.SLSA_PROVENANCE: f.statement(name, image.digest, f.SLSA_PROVENANCE, predicate)}
    sig = f.signature_artifact(name, subject, signer.sign, names=[image.ref])
    att = f.attestation_artifact({k: f.envelope(v, signer.sign) for k, v in statements.items()}, subject)
    return keep(root, image.digest, image.manifest, image.config, {"sig": sig, "att": att})


def archive_v1(*images: Image, extra: list | None = None, tags: dict | None = None) -> bytes:
    """docker save of engine 20.10: <hex>.json configs, <id>/layer.tar (a layer saved once, then linked)."""
    members, entries, saved = [], [], {}
    for image in images:
        paths = []
        for layer in image.layers:
            lid = _sha(image.id.encode() + layer)
            if _sha(layer) in saved:
                members.append((f"{lid}/layer.tar", f"->../{saved[_sha(layer)]}/layer.tar"))
            else:
                members.append((f"{lid}/layer.tar", layer))
                saved[_sha(layer)] = lid
            paths.append(f"{lid}/layer.tar")
        members.append((f"{image.id[7:]}.json", image.config))
        entries.append({"Config": f"{image.id[7:]}.json", "RepoTags": (tags or {}).get(image.ref, [image.ref]),
                        "Layers": paths})
    return _tar(members + (extra or []) + [("manifest.json", json.dumps(entries).encode())])


def archive_oci(*images: Image, index_extra: list[Image] = ()) -> bytes:
    """docker save of newer engines: blobs/sha256/<hex> for everything, manifest.json and index.json."""
    members, entries, index = {}, [], []
    for image in [*images, *index_extra]:
        for layer in image.layers:
            members[f"blobs/sha256/{_sha(layer)}"] = layer
        members[f"blobs/sha256/{image.id[7:]}"] = image.config
        oci = json.dumps({"schemaVersion": 2, "mediaType": f.OCI_MANIFEST,
                          "config": {"mediaType": f.OCI_CONFIG, "digest": image.id, "size": len(image.config)},
                          "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "size": len(x),
                                      "digest": "sha256:" + _sha(x)} for x in image.layers]}).encode()
        members[f"blobs/sha256/{_sha(oci)}"] = oci
        index.append({"mediaType": f.OCI_MANIFEST, "digest": "sha256:" + _sha(oci), "size": len(oci)})
        if image in images:
            entries.append({"Config": f"blobs/sha256/{image.id[7:]}", "RepoTags": [image.ref],
                            "Layers": [f"blobs/sha256/{_sha(x)}" for x in image.layers]})
    doc = {"schemaVersion": 2, "mediaType": f.OCI_INDEX, "manifests": index}
    return _tar([*members.items(), ("index.json", json.dumps(doc).encode()),
                 ("manifest.json", json.dumps(entries).encode()), ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')])


def trust_for(*images: Image) -> t.Trust:
    return t.Trust("sha256:" + "0" * 64, {i.id: {"ref": i.ref, "image_id": i.id, "tags": [i.ref]} for i in images},
                   {i.id: {i.ref} for i in images})


def scanned(data: bytes) -> dict:
    return t.scan_tar(io.BytesIO(data))


@pytest.fixture(scope="module")
def signer():
    return FileSigner("test", ec.generate_private_key(ec.SECP256R1()))


@pytest.fixture(scope="module")
def pair():
    """b and c share their first layer, as images FROM one base do."""
    return Image("b", "base layer", "b's own"), Image("c", "base layer", "c's own")


# ---- the archive pass (pure over a scanned stream) ----------------------------------------------

@pytest.mark.parametrize("layout", [archive_v1, archive_oci])
def test_an_archive_of_exactly_the_signed_images_passes(pair, layout):
    members = scanned(layout(*pair))
    assert t.check_archive(members, trust_for(*pair)) == []
    assert members["manifest.json"].data is not None and all(
        m.data is None for n, m in members.items() if n.endswith("layer.tar"))  # layers are hashed, not kept


def test_a_layer_saved_once_and_linked_resolves_to_its_bytes(pair):
    members = scanned(archive_v1(*pair))
    links = [n for n, m in members.items() if m.kind == "link"]
    assert len(links) == 1 and t.resolve(members, links[0]).sha256 == _sha(pair[0].layers[0])


def test_an_unsigned_image_in_the_archive_is_named_with_its_ref_and_id(pair):
    b, _c = pair
    other = Image("x", "something else")
    problems = t.check_archive(scanned(archive_v1(other, tags={other.ref: [b.ref]})), trust_for(b))
    assert any(f"image {b.ref} ({other.id[:19]}) in the archive is not a signed image" in p for p in problems)
    assert f"image {b.ref} ({b.id[:19]}) is listed in MANIFEST.json but the archive does not hold it" in problems


@pytest.mark.parametrize("layout", [archive_v1, archive_oci])
def test_a_swapped_layer_is_named_with_its_position(pair, layout):
    b, c = pair
    data = layout(b, c)
    swapped = data.replace(b"b's own", b"B's own")  # same length: the tar stays valid, the layer is another
    problems = t.check_archive(scanned(swapped), trust_for(b, c))
    assert any(p.startswith(f"image {b.ref} ({b.id[:19]}): layer 2 of 2") and "was swapped" in p for p in problems)
    assert not any(c.ref in p for p in problems)
    if layout is archive_oci:  # blobs are named by their digest: the changed one no longer is
        assert any("does not hash to its name" in p for p in problems)


def test_a_config_that_does_not_hash_to_its_name_is_refused(pair):
    b, _ = pair
    forged = Image("b", "base layer", "b's own", labels={**LABELS, "extra": "1"})
    entry = {"Config": f"{b.id[7:]}.json", "RepoTags": [b.ref], "Layers": ["l0/layer.tar", "l1/layer.tar"]}
    data = _tar([("l0/layer.tar", forged.layers[0]), ("l1/layer.tar", forged.layers[1]),
                 (f"{b.id[7:]}.json", forged.config), ("manifest.json", json.dumps([entry]).encode())])
    problems = t.check_archive(scanned(data), trust_for(b))
    assert any("does not hash to its name" in p for p in problems)
    assert any(f"({forged.id[:19]}) in the archive is not a signed image" in p for p in problems)


@pytest.mark.parametrize("first, second", [("manifest.json", "manifest.json"), ("./manifest.json", "manifest.json"),
                                           ("manifest.json", "./manifest.json"), ("repositories", "./repositories")])
@pytest.mark.parametrize("evil_first", [True, False])
def test_a_member_named_twice_is_refused_whichever_copy_is_the_signed_one(pair, first, second, evil_first):
    """tar readers differ on which copy of a name they take (the first, the last, the one their name
    matching hits): the archive is refused whole, with both orders and every spelling."""
    b, _ = pair
    other = Image("x", "something else")
    good = archive_v1(b)
    evil_manifest = json.dumps([{"Config": f"{other.id[7:]}.json", "RepoTags": [b.ref], "Layers": []}]).encode()
    members = [(m.name, tarfile.open(fileobj=io.BytesIO(good)).extractfile(m).read())
               for m in tarfile.open(fileobj=io.BytesIO(good)) if m.isfile() and m.name != "manifest.json"]
    genuine = tarfile.open(fileobj=io.BytesIO(good)).extractfile("manifest.json").read()
    name = first.removeprefix("./")
    copies = [(first, evil_manifest if name == "manifest.json" else b"{}"), (second, genuine if name == "manifest.json" else b"{}")]
    if not evil_first:
        copies.reverse()
    extra = [] if name == "manifest.json" else [("manifest.json", genuine)]
    problems = t.check_archive(scanned(_tar(members + [(f"{other.id[7:]}.json", other.config)] + extra + copies)),
                               trust_for(b))
    assert problems[-1].startswith("the archive names its members ambiguously")
    assert any(f"holds {name!r} more than once" in p for p in problems)
    if first != second:
        assert any(f"archive member './{name}' is not spelled as docker save writes names" in p for p in problems)


def test_an_odd_spelling_alone_is_refused(pair):
    b, _ = pair
    good = archive_v1(b)
    members = [(("./" + m.name) if m.name == "manifest.json" else m.name,
                tarfile.open(fileobj=io.BytesIO(good)).extractfile(m).read())
               for m in tarfile.open(fileobj=io.BytesIO(good)) if m.isfile()]
    problems = t.check_archive(scanned(_tar(members)), trust_for(b))
    assert "archive member './manifest.json' is not spelled as docker save writes names (it means 'manifest.json')" \
        in problems
    assert t.check_archive(scanned(good), trust_for(b)) == []  # the same archive, spelled as docker save does


def test_an_extra_tag_on_a_signed_image_is_refused(pair):
    b, _ = pair
    problems = t.check_archive(scanned(archive_v1(b, tags={b.ref: [b.ref, "debian:12"]})), trust_for(b))
    assert problems == [f"image {b.ref} ({b.id[:19]}): the archive tags it debian:12, a name its signature does not cover"]


def test_data_after_the_end_of_the_archive_is_refused(pair):
    """Another tar reader might go on past the end marker where this one stopped."""
    b, _ = pair
    good = archive_v1(b)
    assert scanned(good + b"\0" * 4096)  # zero padding is what tar writers add
    hidden = _tar([("manifest.json", b"[]")])
    with pytest.raises(tarfile.TarError, match="after the end of the archive"):
        scanned(good + hidden)


def test_no_manifest_json_means_a_legacy_load_and_is_refused(pair):
    b, _ = pair
    data = _tar([(f"{b.id[7:]}.json", b.config), ("repositories", b"{}")])
    assert any("no usable manifest.json" in p for p in t.check_archive(scanned(data), trust_for(b)))


def test_index_json_naming_an_unsigned_image_is_refused(pair):
    """A containerd image store loads what index.json names, whatever manifest.json says."""
    b, _ = pair
    other = Image("x", "something else")
    problems = t.check_archive(scanned(archive_oci(b, index_extra=[other])), trust_for(b))
    assert len(problems) == 1 and f"({other.id[:19]})" in problems[0] and "in index.json) is not a signed image" in problems[0]


# ---- whole discs: real export code, real zstd, real signatures ---------------------------------

def disc(tmp: Path, images: list[Image], signer: FileSigner, archive: bytes, ws: Workspace | None = None,
         unsigned: bool = False) -> tuple[Path, Workspace]:
    """A one-volume export directory of `archive` with each image's signature, as export writes it."""
    if ws is None:
        ws = Workspace(tmp / "build")
        arches = {f"a{i}": SignedDigest(digest=im.digest, signature="sha256:" + "1" * 64, image_id=im.id)
                  for i, im in enumerate(images)}
        for im in images:
            sign(im, signer, ws.variant_dir(VARIANT) / "signed")
        ws.save(ws.sign(VARIANT), SignRecord(
            variant=VARIANT, registry="registry.example", repository="site/x", tag="1",
            key_fingerprint=fingerprint(signer.public_key()), key_reference="test",
            index=SignedDigest(digest="sha256:" + "2" * 64, signature="sha256:" + "3" * 64), arches=arches,
            content_digests={}, signed_at="2026-12-01T00:00:00+00:00", seconds=0.1))
    records, key, files = sign_images([i.record() for i in images], ws, unsigned)
    packed = subprocess.run(["zstd", "-q", "-c"], input=archive, capture_output=True, check=True).stdout
    layout = plan_layout(Media("x", 100_000_000), carry.disc_bytes(files))
    out = tmp / "out"
    writer = PartWriter(layout, out)
    writer.write(memoryview(packed))
    writer.close()
    record = ExportRecord(export_id="e" * 32, created="2026-12-01T00:00:00+00:00", tool_version="0",
                          media=layout.media, images=records, signing_key_fingerprint=key, parts=writer.parts,
                          archive_bytes=writer.total, archive_sha256=writer.whole.hexdigest(), tar_bytes=len(archive))
    write_volume_files(record, out, files)
    return out / "volume-01", ws


def import_check(volume: Path, signer_or_key, tmp: Path) -> t.Trust:
    from rapidship.export.verify import verify

    public = signer_or_key.public_key() if hasattr(signer_or_key, "public_key") else signer_or_key
    return t.verify_disc(verify([str(volume)]), public, "cosign.pub", tmp)


def reseal(volume: Path) -> None:
    """What an attacker who can write the disc does after a swap: MANIFEST.json and SHA256SUMS again."""
    from rapidship.export.write import manifest_text, sums_text

    doc = json.loads((volume / "MANIFEST.json").read_text())
    for name in doc["files"]:
        data = (volume / name).read_bytes()
        doc["files"][name] = {"bytes": len(data), "sha256": _sha(data)}
    text = manifest_text(doc)
    (volume / "MANIFEST.json").write_text(text)
    (volume / "SHA256SUMS").write_text(sums_text({n: m["sha256"] for n, m in doc["files"].items()}
                                                 | {"MANIFEST.json": _sha(text.encode())}))


def test_a_signed_disc_verifies_with_its_key(pair, signer, tmp_path):
    volume, _ = disc(tmp_path, list(pair), signer, archive_v1(*pair))
    doc = json.loads((volume / "MANIFEST.json").read_text())
    assert doc["signing_key_fingerprint"] == fingerprint(signer.public_key())
    assert [(i["signed_digest"], i["unsigned"]) for i in doc["images"]] == [(i.digest, False) for i in pair]
    for image in pair:
        folder = volume / "signatures" / f.tag_for(image.digest, "")
        assert (folder / "manifest.json").read_bytes() == image.manifest
        assert json.loads((folder / "payload.json").read_text())["critical"]["image"]["docker-manifest-digest"] == image.digest
        assert f"signatures/{folder.name}/payload.sig" in doc["files"]
    check = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=volume, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    trust = import_check(volume, signer, tmp_path)
    assert set(trust.images) == {i.id for i in pair} and trust.fingerprint == fingerprint(signer.public_key())


def test_the_payload_files_are_what_openssl_verifies(pair, signer, tmp_path):
    volume, _ = disc(tmp_path, [pair[0]], signer, archive_v1(pair[0]))
    folder = volume / "signatures" / f.tag_for(pair[0].digest, "")
    (tmp_path / "cosign.pub").write_text(public_pem(signer.public_key()))
    der = subprocess.run(["openssl", "base64", "-d", "-A", "-in", str(folder / "payload.sig")], capture_output=True,
                         check=True).stdout
    (tmp_path / "sig.der").write_bytes(der)
    ok = subprocess.run(["openssl", "dgst", "-sha256", "-verify", str(tmp_path / "cosign.pub"), "-signature",
                         str(tmp_path / "sig.der"), str(folder / "payload.json")], capture_output=True, text=True)
    assert ok.returncode == 0 and "Verified OK" in ok.stdout
    der_key = subprocess.run(["openssl", "pkey", "-pubin", "-in", str(tmp_path / "cosign.pub"), "-outform", "DER"],
                             capture_output=True, check=True).stdout
    assert "sha256:" + _sha(der_key) == fingerprint(signer.public_key())


def test_another_key_is_refused_naming_both_fingerprints(pair, signer, tmp_path):
    volume, _ = disc(tmp_path, list(pair), signer, archive_v1(*pair))
    other = ec.generate_private_key(ec.SECP256R1()).public_key()
    with pytest.raises(GateFailure) as err:
        import_check(volume, other, tmp_path)
    assert fingerprint(signer.public_key()) in err.value.message and fingerprint(other) in err.value.message
    assert "nothing was loaded" in err.value.message


def test_a_swapped_image_in_the_archive_is_refused(pair, signer, tmp_path):
    b, c = pair
    other = Image("x", "base layer", "not what was signed")
    volume, _ = disc(tmp_path, [b, c], signer, archive_v1(other, c, tags={other.ref: [b.ref]}))
    with pytest.raises(GateFailure) as err:
        import_check(volume, signer, tmp_path)
    assert f"image {b.ref} ({other.id[:19]}) in the archive is not a signed image" in err.value.message
    assert "nothing was loaded" in err.value.message and c.ref not in err.value.message


def test_a_swapped_signature_object_is_refused(pair, signer, tmp_path):
    b, c = pair
    volume, _ = disc(tmp_path, [b, c], signer, archive_v1(b, c))
    fb, fc = (volume / "signatures" / f.tag_for(i.digest, "") for i in (b, c))
    (fb / "sig.json").write_bytes((fc / "sig.json").read_bytes())  # c's signature passed off as b's
    reseal(volume)
    with pytest.raises(GateFailure) as err:
        import_check(volume, signer, tmp_path)
    assert f"image {b.ref} ({b.id[:19]}): {b.digest[:19]}: signed by this key, but the signed payload names another digest" \
        in err.value.message


def test_swapped_payload_files_are_refused_as_install_sh_would(pair, signer, tmp_path):
    b, c = pair
    volume, _ = disc(tmp_path, [b, c], signer, archive_v1(b, c))
    fb, fc = (volume / "signatures" / f.tag_for(i.digest, "") for i in (b, c))
    (fb / "payload.sig").write_bytes((fc / "payload.sig").read_bytes())
    reseal(volume)
    with pytest.raises(GateFailure, match=rf"image {b.ref} .*payload.json or payload.sig differ from the signature"):
        import_check(volume, signer, tmp_path)


def test_a_manifest_json_claiming_another_id_is_refused(pair, signer, tmp_path):
    b, c = pair
    volume, _ = disc(tmp_path, [b, c], signer, archive_v1(b, c))
    doc = json.loads((volume / "MANIFEST.json").read_text())
    doc["images"][0]["image_id"] = c.id  # b's entry now claims to be c's image, under b's signature
    (volume / "MANIFEST.json").write_text(json.dumps(doc, indent=2) + "\n")
    reseal(volume)
    with pytest.raises(GateFailure, match="the signed manifest .* is of image .*not of the id MANIFEST.json lists"):
        import_check(volume, signer, tmp_path)


def test_export_refuses_an_unsigned_image_unless_told_and_then_records_it(pair, signer, tmp_path):
    b, c = pair
    ws = Workspace(tmp_path / "empty")
    with pytest.raises(ConfigError) as err:
        sign_images([b.record()], ws)
    assert b.ref in err.value.problem and "--unsigned" in err.value.fix
    warned = []
    records, key, files = sign_images([b.record()], ws, unsigned=True, warn=warned.append)
    assert records[0].unsigned and not records[0].signed_digest and key == "" and files == {}
    assert "WARNING: --unsigned" in warned[0] and b.ref in warned[0]
    volume, _ = disc(tmp_path, [b], signer, archive_v1(b), ws=ws, unsigned=True)
    with pytest.raises(GateFailure, match=rf"image {b.ref} .* was exported unsigned"):
        import_check(volume, signer, tmp_path)


def test_images_signed_with_two_keys_do_not_share_a_disc(pair, signer, tmp_path):
    b, c = pair
    _, ws = disc(tmp_path / "one", [b], signer, archive_v1(b))
    other = FileSigner("other", ec.generate_private_key(ec.SECP256R1()))
    _, ws2 = disc(tmp_path / "two", [c], other, archive_v1(c))
    record = json.loads(ws2.sign(VARIANT).read_text())
    record["variant"] = "other-variant"
    ws.save(ws.sign("other-variant"), SignRecord.model_validate({k: v for k, v in record.items() if k != "schema_version"}))
    import shutil
    shutil.copytree(ws2.variant_dir(VARIANT) / "signed", ws.variant_dir("other-variant") / "signed")
    with pytest.raises(ConfigError, match="signed with different keys"):
        sign_images([b.record(), c.record()], ws)


def test_a_signed_bundle_that_is_not_whole_is_an_error_not_unsigned(pair, signer, tmp_path):
    from rapidship.records import RecordError

    b, _ = pair
    _, ws = disc(tmp_path, [b], signer, archive_v1(b))
    (ws.signed_dir(VARIANT, b.digest) / "manifest.json").write_bytes(b"{}")
    with pytest.raises(RecordError, match="does not hash to the signed digest"):
        sign_images([b.record()], ws)


# ---- flags, sizes, the script's data ------------------------------------------------------------

def test_no_key_is_bad_input_and_both_flags_are_too(tmp_path):
    with pytest.raises(ConfigError) as err:
        t.require_key(None, False)
    assert err.value.where == "--key" and "--key cosign.pub" in err.value.fix and "--no-verify" in err.value.fix
    with pytest.raises(ConfigError, match="both given"):
        t.require_key("cosign.pub", True)
    assert t.require_key(None, True) is None
    (tmp_path / "cosign.key").write_text("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nx\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    with pytest.raises(ConfigError, match="is a private key"):
        t.require_key(str(tmp_path / "cosign.key"), False)


def test_signatures_take_their_room_out_of_every_volume():
    files = {"signatures/sha256-" + "a" * 64 + "/sig.json": b"x" * 3000, "signatures/sha256-" + "a" * 64 + "/att.json": b"y"}
    room = carry.disc_bytes(files)
    assert room >= 4096 + 2048 + 2 * 2048  # whole sectors per file, directory records
    media = Media("m", ISO_RESERVE + METADATA_RESERVE + 1_000_000)
    assert plan_layout(media, room).payload_bytes == plan_layout(media).payload_bytes - room


def test_install_script_carries_the_fingerprint_and_each_signed_digest():
    signed = ImageRecord("r/x:1", [], "sha256:" + "0" * 64, [], "amd64", "linux", 1, [], signed_digest="sha256:" + "9" * 64)
    unsigned = ImageRecord("r/y:1", [], "sha256:" + "1" * 64, [], "amd64", "linux", 1, [], unsigned=True)
    record = ExportRecord(export_id="ab" * 16, created="now", tool_version="0", media=Media("dvd", 1),
                          images=[signed, unsigned], signing_key_fingerprint="sha256:" + "f" * 64)
    script = install_script(record, INSTALL_BODY.read_text())
    assert f"KEY_FINGERPRINT='sha256:{'f' * 64}'" in script
    assert f"r/x:1 sha256:{'0' * 64} sha256:{'9' * 64}" in script and f"r/y:1 sha256:{'1' * 64} -" in script
    for shell in ("sh", "dash", "bash"):
        if subprocess.run(["which", shell], capture_output=True).returncode == 0:
            assert subprocess.run([shell, "-n"], input=script, capture_output=True, text=True).returncode == 0


def test_keys_that_fold_alike_are_refused_as_go_would_read_them_otherwise(pair):
    """docker load's Go decoder matches `config` to Config and lets the later key win."""
    b, _ = pair
    other = Image("x", "something else")
    entry = {"Config": f"{b.id[7:]}.json", "RepoTags": [b.ref], "Layers": ["l0/layer.tar", "l1/layer.tar"],
             "config": f"{other.id[7:]}.json"}
    data = _tar([("l0/layer.tar", b.layers[0]), ("l1/layer.tar", b.layers[1]), (f"{b.id[7:]}.json", b.config),
                 (f"{other.id[7:]}.json", other.config), ("manifest.json", json.dumps([entry]).encode())])
    assert t.check_archive(scanned(data), trust_for(b)) == [
        "the archive has no usable manifest.json (docker load would read it another way): refused"]
