"""What a disc carries of the signatures: each exported image's signed objects, found in the workspace.

`find_signed` picks each image's signed bundle from the workspace (what `invoke sign` kept under
build/<variant>/signed/sha256-<hex>/, found through the sign records by image id) and `disc_files`
lays it out under `signatures/sha256-<hex>/` on every volume, with `payload.json` and `payload.sig`
(the signed payload and its signature, flat, for install.sh and openssl). Import checks them in
export/trust.py.
"""

from __future__ import annotations

import re
import posixpath
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from rapidship import oci_json
from rapidship.records import RecordError, Workspace, read_sign
from rapidship.sign import formats as f

SIGNATURES = "signatures"
PAYLOAD, PAYLOAD_SIG = "payload.json", "payload.sig"
BLOB_NAME = re.compile(r"^sha256-[0-9a-f]{64}$")


def load_json(data: bytes | None):
    """What the disc's own files say, read as a Go client would read them (oci_json), or None."""
    return oci_json.parse_or_none(data)


@dataclass(frozen=True)
class Bundle:
    """One image's signed objects in the workspace, as `invoke sign` kept them."""

    image_id: str
    digest: str        # the signed per-arch manifest digest
    folder: Path       # build/<variant>/signed/sha256-<hex>
    fingerprint: str   # of the key that signed
    variant: str
    signed_at: str
    record: Path       # the sign record that names it
    names: tuple[str, ...] = ()  # what the signed payload lets an import name it (check_bundle reads them)


def find_signed(images: list, ws: Workspace) -> dict[str, Bundle]:
    """image id -> its bundle, for the images (export.write.ImageRecord) that have one. An image
    signed more than once: the bundle of its own variant, then the newest. A sign record or a
    bundle that cannot be used is an error, not a silent 'unsigned'."""
    found: dict[str, list[Bundle]] = {}
    for path in ws.sign_records():
        record = read_sign(ws, path.parent.name)
        for signed in record.arches.values():
            if signed.image_id:
                found.setdefault(signed.image_id, []).append(Bundle(
                    signed.image_id, signed.digest, ws.signed_dir(record.variant, signed.digest),
                    record.key_fingerprint, record.variant, record.signed_at, path))
    out: dict[str, Bundle] = {}
    for image in images:
        candidates = found.get(image.image_id, [])
        own = [b for b in candidates if b.variant == image.variant] or candidates
        if own:
            out[image.image_id] = check_bundle(max(own, key=lambda b: b.signed_at))
    return out


def check_bundle(b: Bundle) -> Bundle:
    """The kept objects are whole and are of this image: manifest.json hashes to the signed
    digest, its config is the image id, the signature object and its payload are there."""
    fix = f"sign it again: invoke sign --variant {b.variant} (it keeps the objects under {b.folder.parent})"

    def read(name: str) -> bytes:
        try:
            return (b.folder / name).read_bytes()
        except OSError:
            raise RecordError(str(b.folder / name), f"is missing, but {b.record} names this signed image", fix) from None

    manifest = read("manifest.json")
    if f.sha256(manifest) != b.digest:
        raise RecordError(str(b.folder / "manifest.json"), f"does not hash to the signed digest {b.digest[:19]}", fix)
    if (load_json(manifest) or {}).get("config", {}).get("digest") != b.image_id:
        raise RecordError(str(b.folder / "manifest.json"), f"is not the manifest of image {b.image_id[:19]}", fix)
    read("att.json")
    flat = flat_payload(read("sig.json"), lambda d: _blob(b.folder, d))
    if flat is None:
        raise RecordError(str(b.folder / "sig.json"), "holds no cosign signature with its payload", fix)
    return replace(b, names=tuple(f.signed_names(load_json(flat[0]) or {})))


def _blob(folder: Path, digest: str) -> bytes | None:
    path = folder / "blobs" / f.tag_for(digest, "")
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if f.sha256(data) == digest else None


def flat_payload(sig_manifest: bytes | None, blob: Callable[[str], bytes | None]) -> tuple[bytes, bytes] | None:
    """(payload, base64 signature) of the first simple-signing layer of a .sig manifest."""
    for layer in (load_json(sig_manifest) or {}).get("layers") or []:
        if isinstance(layer, dict) and layer.get("mediaType") == f.SIMPLE_SIGNING:
            payload = blob(str(layer.get("digest", "")))
            signature = (layer.get("annotations") or {}).get(f.SIGNATURE_ANNOTATION, "")
            return (payload, signature.encode()) if payload is not None and signature else None
    return None


def disc_files(bundles: list[Bundle]) -> dict[str, bytes]:
    """Relative path on every volume -> bytes: each bundle under signatures/sha256-<hex>/."""
    files: dict[str, bytes] = {}
    for b in bundles:
        base = f"{SIGNATURES}/{f.tag_for(b.digest, '')}"
        for name in ("manifest.json", "sig.json", "att.json"):
            files[f"{base}/{name}"] = (b.folder / name).read_bytes()
        for blob in sorted((b.folder / "blobs").iterdir()):
            data = blob.read_bytes()
            if BLOB_NAME.match(blob.name) and f.tag_for(f.sha256(data), "") == blob.name:
                files[f"{base}/blobs/{blob.name}"] = data
        payload, signature = flat_payload(files[f"{base}/sig.json"], lambda d: _blob(b.folder, d)) or (b"", b"")
        files[f"{base}/{PAYLOAD}"], files[f"{base}/{PAYLOAD_SIG}"] = payload, signature
    return files


def disc_bytes(files: dict[str, bytes]) -> int:
    """Room the signature files take on each volume: whole 2 KiB sectors, a directory record per
    file and three per folder (ISO 9660, Joliet, Rock Ridge), their lines in MANIFEST.json and
    SHA256SUMS."""
    folders = {posixpath.dirname(n) for n in files} | {SIGNATURES}
    return sum(-(-len(d) // 2048) * 2048 + 2048 + 512 for d in files.values()) + 3 * 2048 * len(folders)
