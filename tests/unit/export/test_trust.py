"""Signatures on discs without an engine: signed bundles made with the real cosign formats and a real
key, docker-archives built here (tests/support/archives.py), compressed with the real zstd and laid
out as a disc by the real export code. Every swap an attacker who can write the disc might try is
refused with a line naming the image and what was swapped; what reaches a loader is export/repack.py's
business (tests/unit/export/test_repack.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from rapidship.errors import ConfigError, GateFailure
from rapidship.export import carry, trust as t
from rapidship.export.write import (ExportRecord, ImageRecord, Media, PartWriter, install_script, plan_layout,
                                    sign_images, write_volume_files, INSTALL_BODY, ISO_RESERVE, METADATA_RESERVE)
from rapidship.records import SignedDigest, SignRecord, Workspace
from rapidship.sign import formats as f, release
from rapidship.sign.keys import FileSigner, fingerprint, public_pem
from rapidship.sign.sources import keep
from support.archives import LOCK, VARIANT, Image, archive_v1, sha as _sha
from support.signed_samples import sbom


def record_of(image: Image, **kw) -> ImageRecord:
    return ImageRecord(image.ref, [image.ref], image.id, [], "amd64", "linux", 1, [], VARIANT, **kw)


def sign(image: Image, signer: FileSigner, root: Path, stated: dict | None = None) -> Path:
    """What `invoke sign` keeps for one per-arch image: signature, SBOM and provenance attestations;
    the payload states the release the config's labels give (or `stated`)."""
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
    of_config = release.of_config(json.loads(image.config))
    sig = f.signature_artifact(name, subject, signer.sign, names=[image.ref],
                               release=stated or (of_config.payload() if of_config else None))
    att = f.attestation_artifact({k: f.envelope(v, signer.sign) for k, v in statements.items()}, subject)
    return keep(root, image.digest, image.manifest, image.config, {"sig": sig, "att": att})


@pytest.fixture(scope="module")
def signer():
    return FileSigner("test", ec.generate_private_key(ec.SECP256R1()))


@pytest.fixture(scope="module")
def pair():
    """b and c share their first layer, as images FROM one base do."""
    return Image("b", "base layer", "b's own"), Image("c", "base layer", "c's own")


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
    records, key, files = sign_images([record_of(i) for i in images], ws, unsigned)
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
    """What import does before anything is loaded: signatures, then pass 1 over the archive."""
    from rapidship.export.load import plan_load
    from rapidship.export.verify import verify

    public = signer_or_key.public_key() if hasattr(signer_or_key, "public_key") else signer_or_key
    checked = verify([str(volume)])
    trust = t.verify_disc(checked, public, "cosign.pub", tmp)
    plan_load(checked)
    return trust


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


def test_another_key_is_the_operators_input_naming_both_fingerprints(pair, signer, tmp_path):
    from rapidship.errors import ConfigError

    volume, _ = disc(tmp_path, list(pair), signer, archive_v1(*pair))
    other = ec.generate_private_key(ec.SECP256R1()).public_key()
    with pytest.raises(ConfigError) as err:   # exit 2: a valid key of another signer is not damage
        import_check(volume, other, tmp_path)
    assert fingerprint(signer.public_key()) in err.value.message and fingerprint(other) in err.value.message
    assert "nothing was loaded" in err.value.message


def test_a_swapped_image_in_the_archive_is_refused(pair, signer, tmp_path):
    b, c = pair
    other = Image("x", "base layer", "not what was signed")
    volume, _ = disc(tmp_path, [b, c], signer, archive_v1(other, c, tags={other.ref: [b.ref]}))
    with pytest.raises(GateFailure) as err:
        import_check(volume, signer, tmp_path)
    assert f"image {b.ref} ({b.id[:19]}): the archive holds no config that hashes to {b.id[:19]}" in err.value.message
    assert "nothing was loaded" in err.value.message and c.ref not in err.value.message


def test_a_payload_stating_another_release_than_the_config_is_refused(pair, signer, tmp_path):
    b, _ = pair
    ws = Workspace(tmp_path / "build")
    volume, _ = disc(tmp_path, [b], signer, archive_v1(b))
    sign(b, signer, ws.variant_dir(VARIANT) / "signed", stated={"created": "2027-01-01T00:00:00+00:00", "revision": ""})
    later = disc(tmp_path / "later", [b], signer, archive_v1(b), ws=_signed_ws(ws, b, signer))[0]
    with pytest.raises(GateFailure) as err:
        import_check(later, signer, tmp_path)
    assert ("the signed payload states release 2027-01-01T00:00:00+00:00, the image's labels 2026-12-01T00:00:00+00:00"
            in err.value.message)
    assert import_check(volume, signer, tmp_path).releases[b.id].created == "2026-12-01T00:00:00+00:00"


def test_an_image_that_states_no_release_is_refused(signer, tmp_path):
    bare = Image("bare", "x", labels={"io.rapidship.variant": VARIANT, "io.rapidship.lock.sha256": LOCK})
    volume, _ = disc(tmp_path, [bare], signer, archive_v1(bare))
    with pytest.raises(GateFailure, match="the image states no release"):
        import_check(volume, signer, tmp_path)


def _signed_ws(ws: Workspace, image: Image, signer: FileSigner) -> Workspace:
    ws.save(ws.sign(VARIANT), SignRecord(
        variant=VARIANT, registry="registry.example", repository="site/x", tag="1",
        key_fingerprint=fingerprint(signer.public_key()), key_reference="test",
        index=SignedDigest(digest="sha256:" + "2" * 64, signature="sha256:" + "3" * 64),
        arches={"a0": SignedDigest(digest=image.digest, signature="sha256:" + "1" * 64, image_id=image.id)},
        content_digests={}, signed_at="2026-12-01T00:00:00+00:00", seconds=0.1))
    return ws


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
        sign_images([record_of(b)], ws)
    assert b.ref in err.value.problem and "--unsigned" in err.value.fix
    warned = []
    records, key, files = sign_images([record_of(b)], ws, unsigned=True, warn=warned.append)
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
        sign_images([record_of(b), record_of(c)], ws)


def test_a_signed_bundle_that_is_not_whole_is_an_error_not_unsigned(pair, signer, tmp_path):
    from rapidship.records import RecordError

    b, _ = pair
    _, ws = disc(tmp_path, [b], signer, archive_v1(b))
    (ws.signed_dir(VARIANT, b.digest) / "manifest.json").write_bytes(b"{}")
    with pytest.raises(RecordError, match="does not hash to the signed digest"):
        sign_images([record_of(b)], ws)


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
