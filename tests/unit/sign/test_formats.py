"""The signed bytes, checked against the specs' own vectors and by independent verifiers."""

from __future__ import annotations

import base64
import json

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from rapidship.sign import formats as f

SUBJECT = {"mediaType": f.OCI_MANIFEST, "digest": "sha256:" + "ab" * 32, "size": 1234}


def test_pae_matches_the_dsse_test_vector_and_its_signature_verifies():
    """dsse/protocol.md: the PAE text and the example signature over it with the stated key."""
    encoded = f.pae("http://example.com/HelloWorld", b"hello world")
    assert encoded == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    public = ec.EllipticCurvePublicNumbers(
        46950820868899156662930047687818585632848591499744589407958293238635476079160,
        5640078356564379163099075877009565129882514886557779369047442380624545832820, ec.SECP256R1()).public_key()
    raw = base64.b64decode("A3JqsQGtVsJ2O2xqrI5IcnXip5GToJ3F+FnZ+O88SjtR6rDAajabZKciJTfUiHqJPcIAriEGAHTVeCUjW2JIZA==")
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, encoded, ec.ECDSA(hashes.SHA256()))


def test_signature_artifact_is_cosigns_layout_and_verifies_with_cryptography():
    key = ec.generate_private_key(ec.SECP256R1())
    art = f.signature_artifact("reg.example/p/img", SUBJECT, lambda d: key.sign(d, ec.ECDSA(hashes.SHA256())))
    manifest = json.loads(art.manifest)
    assert manifest["mediaType"] == f.OCI_MANIFEST and manifest["subject"] == SUBJECT
    layer = manifest["layers"][0]
    assert layer["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json"
    blobs = {b.digest: b.data for b in art.blobs}
    payload = blobs[layer["digest"]]
    assert json.loads(payload) == {"critical": {"identity": {"docker-reference": "reg.example/p/img"},
                                                "image": {"docker-manifest-digest": SUBJECT["digest"]},
                                                "type": "cosign container image signature"}, "optional": None}
    key.public_key().verify(base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"]), payload,
                            ec.ECDSA(hashes.SHA256()))
    config = json.loads(blobs[manifest["config"]["digest"]])
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]
    assert f.tag_for(SUBJECT["digest"], "sig") == "sha256-" + "ab" * 32 + ".sig"


def test_dsse_envelope_verifies_with_securesystemslib():
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    key = ec.generate_private_key(ec.SECP256R1())
    body = f.statement("reg.example/p/img", SUBJECT["digest"], f.SLSA_PROVENANCE, {"buildDefinition": {}})
    raw = f.envelope(body, lambda d: key.sign(d, ec.ECDSA(hashes.SHA256())))
    from rapidship.sign.keys import public_pem

    ssl_key = SSlibKey("", "ecdsa", "ecdsa-sha2-nistp256", {"public": public_pem(key.public_key())})
    envelope = Envelope.from_dict(json.loads(raw))
    assert envelope.payload_type == "application/vnd.in-toto+json"
    assert "" in envelope.verify([ssl_key], 1)
    statement = json.loads(envelope.payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [{"name": "reg.example/p/img", "digest": {"sha256": "ab" * 32}}]
    other = ec.generate_private_key(ec.SECP256R1())
    import pytest
    from securesystemslib.exceptions import VerificationError

    wrong = SSlibKey("", "ecdsa", "ecdsa-sha2-nistp256", {"public": public_pem(other.public_key())})
    with pytest.raises(VerificationError):
        Envelope.from_dict(json.loads(raw)).verify([wrong], 1)


def test_referrers_index_keeps_other_entries_and_adds_each_once():
    key = ec.generate_private_key(ec.SECP256R1())
    art = f.signature_artifact("r/p/i", SUBJECT, lambda d: key.sign(d, ec.ECDSA(hashes.SHA256())))
    other = {"mediaType": f.OCI_MANIFEST, "digest": "sha256:" + "cd" * 32, "size": 5, "artifactType": "x"}
    doc = json.loads(f.referrers_index({"manifests": [other]}, [(art, f.SIMPLE_SIGNING)]))
    doc = json.loads(f.referrers_index(doc, [(art, f.SIMPLE_SIGNING)]))
    assert doc["mediaType"] == f.OCI_INDEX
    assert [m["digest"] for m in doc["manifests"]] == [other["digest"], art.digest]
    assert doc["manifests"][1]["artifactType"] == f.SIMPLE_SIGNING
