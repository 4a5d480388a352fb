"""A signed image held in memory: its manifest, config, .sig and .att objects, as a verify Source."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from rapidship.sign import formats as f

LOCK = "11" * 32
VARIANT = "cpu-debian12"
CREATED = "2026-12-01T00:00:00+00:00"  # the release every rapidship build states (sign/release.py)
LABELS = {"io.rapidship.lock.sha256": LOCK, "io.rapidship.variant": VARIANT, "org.opencontainers.image.created": CREATED}
POLICY = {"threshold": "HIGH", "ignore_unfixed": False}


def signer(key: ec.EllipticCurvePrivateKey):
    return lambda data: key.sign(data, ec.ECDSA(hashes.SHA256()))


def provenance(config_digest: str, lock: str = LOCK, gates: bool = True, trivy: bool = True,
               policy: dict | None = None) -> dict:
    return {"buildDefinition": {"buildType": "urn:rapidship:buildtype:dockerfile:v1",
                                "externalParameters": {"variant": VARIANT, "lock": {"sha256": lock}}},
            "runDetails": {"builder": {"id": "urn:test"}, "byproducts": [
                {"name": "image-config", "digest": {"sha256": config_digest.partition(":")[2]}},
                {"name": "gates", "digest": {"sha256": "00"}, "annotations": {"passed": gates}},
                {"name": "trivy-decision", "digest": {"sha256": "00"},
                 "annotations": {"passed": trivy, "image_id": config_digest, "decided_on": "2026-12-01",
                                 "policy": {"source": "p", "variant": VARIANT, **(policy or POLICY)}}}]}}


def sbom(config_digest: str) -> dict:
    """trivy's CycloneDX of the image `config_digest` (metadata.component names it)."""
    return {"bomFormat": "CycloneDX", "specVersion": "1.6", "components": [{"name": "python3"}],
            "metadata": {"component": {"type": "container", "properties": [
                {"name": "aquasecurity:trivy:ImageID", "value": config_digest}]}}}


@dataclass
class MemSource:
    where: str = "memory"
    manifests: dict[str, bytes] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)

    def manifest(self, ref: str) -> bytes | None:
        return self.manifests.get(ref)

    def blob(self, digest: str) -> bytes | None:
        data = self.blobs.get(digest)
        return data if data is not None and f.sha256(data) == digest else None

    def put(self, art: f.Artifact, tag: str) -> None:
        self.manifests[tag] = art.manifest
        for b in art.blobs:
            self.blobs[b.digest] = b.data


def signed_image(key: ec.EllipticCurvePrivateKey, src: MemSource | None = None, labels: dict | None = None,
                 predicates: dict | None = None, name: str = "reg.example/p/img",
                 names: tuple[str, ...] = ("reg.example/p/img:t",),
                 release: dict | None = None) -> tuple[MemSource, str]:
    """(source, manifest digest) of a one-layer image signed and attested by `key`; the payload
    states `release` (default: none, as signatures made before releases were signed)."""
    src = src or MemSource()
    config = json.dumps({"config": {"Labels": labels if labels is not None else LABELS},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "22" * 32]}}).encode()
    config_digest = f.sha256(config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": f.OCI_MANIFEST,
                           "config": {"mediaType": f.OCI_CONFIG, "digest": config_digest, "size": len(config)},
                           "layers": []}).encode()
    digest = f.sha256(manifest)
    src.manifests[digest] = manifest
    src.blobs[config_digest] = config
    subject = {"mediaType": f.OCI_MANIFEST, "digest": digest, "size": len(manifest)}
    src.put(f.signature_artifact(name, subject, signer(key), names, release), f.tag_for(digest, "sig"))
    preds = predicates if predicates is not None else {f.CYCLONEDX: sbom(config_digest),
                                                       f.SLSA_PROVENANCE: provenance(config_digest)}
    envelopes = {k: f.envelope(f.statement(name, digest, k, v), signer(key)) for k, v in preds.items()}
    src.put(f.attestation_artifact(envelopes, subject), f.tag_for(digest, "att"))
    return src, digest


def signed_index(key: ec.EllipticCurvePrivateKey, children: int = 2) -> tuple[MemSource, str]:
    src = MemSource()
    digests = []
    for i in range(children):
        _, d = signed_image(key, src, labels={**LABELS, "arch": str(i)})
        digests.append(d)
    index = json.dumps({"schemaVersion": 2, "mediaType": f.OCI_INDEX, "manifests": [
        {"mediaType": f.OCI_MANIFEST, "digest": d, "size": len(src.manifests[d])} for d in digests]}).encode()
    digest = f.sha256(index)
    src.manifests[digest] = index
    src.put(f.signature_artifact("reg.example/p/img", {"mediaType": f.OCI_INDEX, "digest": digest,
                                                        "size": len(index)}, signer(key)), f.tag_for(digest, "sig"))
    return src, digest
