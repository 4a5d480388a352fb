"""Pure: the bytes of cosign signatures, DSSE envelopes, in-toto statements and their OCI manifests.

Layouts from the specs (cosign SIGNATURE_SPEC / ATTESTATION_SPEC / SBOM_SPEC, DSSE v1.0.0, in-toto
Statement v1, SLSA provenance v1, OCI image manifest with `subject`). No I/O and no keys here: a
signer is passed in, so the same code makes what the registry, the disc and the tests read.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Callable

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
DSSE = "application/vnd.dsse.envelope.v1+json"
IN_TOTO = "application/vnd.in-toto+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
PREDICATE_ANNOTATION = "predicateType"
SIGNATURE_TYPE = "cosign container image signature"
STATEMENT = "https://in-toto.io/Statement/v1"
SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"
CYCLONEDX = "https://cyclonedx.org/bom"
_ZERO_TIME = "0001-01-01T00:00:00Z"  # cosign's config: no time, so equal content gives equal digests


@dataclass(frozen=True)
class Blob:
    media_type: str
    data: bytes
    annotations: dict[str, str]

    @property
    def digest(self) -> str:
        return sha256(self.data)

    def descriptor(self) -> dict:
        out = {"mediaType": self.media_type, "size": len(self.data), "digest": self.digest}
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


@dataclass(frozen=True)
class Artifact:
    """One OCI manifest (a .sig or .att object) and the blobs it names (config first)."""

    manifest: bytes
    blobs: tuple[Blob, ...]

    @property
    def digest(self) -> str:
        return sha256(self.manifest)


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tag_for(digest: str, suffix: str) -> str:
    """cosign's tag-based discovery: sha256:abc -> sha256-abc.sig / .att; '' -> the OCI 1.1
    referrers tag schema (sha256-abc), for registries without the referrers API."""
    algo, _, hexpart = digest.partition(":")
    return f"{algo}-{hexpart}" + (f".{suffix}" if suffix else "")


NAMES_KEY = "io.rapidship.names"  # in the payload's `optional`: every name the image may be created under
RELEASE_KEY = "io.rapidship.release"  # in `optional`: {"created", "revision"} of the image (sign/release.py)


def simple_signing_payload(reference: str, digest: str, names: list[str] | tuple[str, ...] = (),
                           release: dict[str, str] | None = None) -> bytes:
    """What a cosign signature signs: the image's manifest digest and its repository; `names`
    (repository:tag refs) go into `optional`, which cosign leaves to the signer, so that the names
    an offline import creates are signed too (install.sh and `invoke import` refuse any other), and
    so does the image's `release` (sign/release.py), which loaders order before they move a name."""
    optional: dict = {NAMES_KEY: list(names)} if names else {}
    if release:
        optional[RELEASE_KEY] = dict(release)
    doc = {"critical": {"identity": {"docker-reference": reference}, "image": {"docker-manifest-digest": digest},
                        "type": SIGNATURE_TYPE}, "optional": optional or None}
    return json.dumps(doc, separators=(",", ":")).encode()


def signed_names(payload: dict) -> list[str]:
    """The names a (verified, parsed) simple-signing payload allows; [] when it lists none."""
    names = (payload.get("optional") or {}).get(NAMES_KEY) if isinstance(payload.get("optional"), dict) else None
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what each DSSE signature signs."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def statement(name: str, digest: str, predicate_type: str, predicate: dict) -> bytes:
    algo, _, hexpart = digest.partition(":")
    doc = {"_type": STATEMENT, "subject": [{"name": name, "digest": {algo: hexpart}}],
           "predicateType": predicate_type, "predicate": predicate}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def envelope(payload: bytes, sign: Callable[[bytes], bytes], payload_type: str = IN_TOTO) -> bytes:
    """A DSSE envelope with one signature (keyid empty, as cosign writes it)."""
    sig = base64.b64encode(sign(pae(payload_type, payload))).decode()
    doc = {"payloadType": payload_type, "payload": base64.b64encode(payload).decode(),
           "signatures": [{"keyid": "", "sig": sig}]}
    return json.dumps(doc, separators=(",", ":")).encode()


def artifact(layers: list[Blob], subject: dict | None, artifact_type: str) -> Artifact:
    """An OCI manifest over `layers` with cosign's empty-but-valid config, pointing at `subject`
    (the signed image's descriptor) so OCI 1.1 referrers find it too."""
    config = {"architecture": "", "created": _ZERO_TIME, "history": [{"created": _ZERO_TIME}], "os": "",
              "rootfs": {"type": "layers", "diff_ids": [b.digest for b in layers]}, "config": {}}
    config_blob = Blob(OCI_CONFIG, json.dumps(config, separators=(",", ":")).encode(), {})
    doc: dict = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": artifact_type,
                 "config": config_blob.descriptor(), "layers": [b.descriptor() for b in layers]}
    if subject is not None:
        doc["subject"] = {k: subject[k] for k in ("mediaType", "digest", "size")}
    return Artifact(json.dumps(doc, indent=2).encode(), (config_blob, *layers))


def signature_artifact(reference: str, subject: dict, sign: Callable[[bytes], bytes],
                       names: list[str] | tuple[str, ...] = (), release: dict[str, str] | None = None) -> Artifact:
    payload = simple_signing_payload(reference, subject["digest"], names, release)
    layer = Blob(SIMPLE_SIGNING, payload, {SIGNATURE_ANNOTATION: base64.b64encode(sign(payload)).decode()})
    return artifact([layer], subject, SIMPLE_SIGNING)


def attestation_artifact(envelopes: dict[str, bytes], subject: dict) -> Artifact:
    """`envelopes`: predicate type -> DSSE envelope bytes."""
    layers = [Blob(DSSE, env, {PREDICATE_ANNOTATION: kind}) for kind, env in envelopes.items()]
    return artifact(layers, subject, DSSE)


def referrers_index(existing: dict | None, added: list[tuple[Artifact, str]]) -> bytes:
    """The referrers tag-schema index: the existing entries (other digests kept) plus `added`
    ((artifact, artifactType)), an entry per manifest digest."""
    manifests = [m for m in (existing or {}).get("manifests", []) if isinstance(m, dict)]
    seen = {m.get("digest") for m in manifests}
    for art, kind in added:
        if art.digest in seen:
            continue
        manifests.append({"mediaType": OCI_MANIFEST, "digest": art.digest, "size": len(art.manifest),
                          "artifactType": kind})
    return json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}, indent=2).encode()
