"""verify_image: a good image passes; every kind of tampering is one named failure."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from rapidship.sign import formats as f
from rapidship.sign.verify import verify_image
from support.signed_samples import LOCK, POLICY, VARIANT, MemSource, provenance, sbom, signed_image, signed_index, signer

KEY = ec.generate_private_key(ec.SECP256R1())
OTHER = ec.generate_private_key(ec.SECP256R1())


def problems(src, digest, key=KEY, policy=None) -> list[str]:
    policy_for = (lambda variant: policy) if policy is not None else None
    return [p for v in verify_image(src, digest, key.public_key(), policy_for) for p in v.problems]


def test_a_signed_attested_image_and_index_pass():
    src, digest = signed_image(KEY)
    verdicts = verify_image(src, digest, KEY.public_key(), lambda variant: POLICY if variant == VARIANT else None)
    assert [v.ok for v in verdicts] == [True]
    assert any("SBOM of sha256:" in c and "(1 components)" in c for c in verdicts[0].checked)
    assert any("under the given policy" in c for c in verdicts[0].checked)
    src, digest = signed_index(KEY)
    verdicts = verify_image(src, digest, KEY.public_key())
    assert [v.kind for v in verdicts] == ["index", "image", "image"] and all(v.ok for v in verdicts)


def test_another_key_is_refused():
    src, digest = signed_image(OTHER)
    found = problems(src, digest)
    assert any("signature does not verify with key" in p for p in found)
    assert any("provenance attestation: no signature by key" in p for p in found)


def test_a_tag_moved_to_another_manifest_has_no_signature():
    src, digest = signed_image(KEY)
    other_src, other = signed_image(OTHER, labels={"io.rapidship.lock.sha256": LOCK, "io.rapidship.variant": "x"})
    src.manifests[other] = other_src.manifests[other]  # the attacker's image, signed by nobody we trust
    src.blobs.update(other_src.blobs)
    src.manifests.pop(f.tag_for(other, "sig"), None)
    assert any("no signature" in p for p in problems(src, other))


def test_a_signature_copied_from_another_digest_names_that_digest():
    src, digest = signed_image(KEY)
    _, second = signed_image(KEY, src, labels={"io.rapidship.lock.sha256": LOCK, "io.rapidship.variant": "cpu-debian12",
                                               "n": "2"})
    src.manifests[f.tag_for(second, "sig")] = src.manifests[f.tag_for(digest, "sig")]
    assert any("names another digest" in p for p in problems(src, second))


def test_an_edited_attestation_payload_is_refused():
    src, digest = signed_image(KEY)
    att = json.loads(src.manifests[f.tag_for(digest, "att")])
    layer = next(x for x in att["layers"] if x["annotations"]["predicateType"] == f.SLSA_PROVENANCE)
    env = json.loads(src.blobs[layer["digest"]])
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicate"]["buildDefinition"]["externalParameters"]["lock"]["sha256"] = "99" * 32
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    data = json.dumps(env).encode()
    src.blobs[f.sha256(data)] = data
    layer["digest"], layer["size"] = f.sha256(data), len(data)
    src.manifests[f.tag_for(digest, "att")] = json.dumps(att).encode()
    assert any("provenance attestation: no signature by key" in p and "changed after signing" in p
               for p in problems(src, digest))


def test_a_signed_provenance_whose_lock_differs_from_the_label_is_refused():
    src = MemSource()
    config_digest = None
    src, digest = signed_image(KEY, src)
    config_digest = json.loads(src.manifests[digest])["config"]["digest"]
    src2, digest2 = signed_image(KEY, MemSource(), predicates={f.CYCLONEDX: sbom(config_digest),
                                                               f.SLSA_PROVENANCE: provenance(config_digest, lock="77" * 32)})
    found = problems(src2, digest2)
    assert any("provenance lock sha256 7777" in p and "differs from the image label" in p for p in found)


def test_a_missing_sbom_is_refused():
    src, digest = signed_image(KEY, predicates={f.SLSA_PROVENANCE: provenance("sha256:" + "00" * 32)})
    found = problems(src, digest)
    assert any("no SBOM attestation" in p for p in found)


def test_missing_attestations_and_failed_gates_are_refused():
    src, digest = signed_image(KEY)
    config_digest = json.loads(src.manifests[digest])["config"]["digest"]
    del src.manifests[f.tag_for(digest, "att")]
    assert any("no attestations" in p for p in problems(src, digest))
    src, digest = signed_image(KEY, predicates={f.CYCLONEDX: sbom(config_digest), f.SLSA_PROVENANCE: provenance(
        "sha256:" + "00" * 32, trivy=False)})
    found = problems(src, digest)
    assert any("no passing trivy-decision" in p for p in found)
    assert any("provenance is for image" in p for p in found)
    assert config_digest


def test_a_scan_under_another_policy_is_refused():
    src, digest = signed_image(KEY)
    found = problems(src, digest, policy={"threshold": "CRITICAL", "ignore_unfixed": False})
    assert found == [f"{digest[:19]}: the scan was decided under another policy (threshold differ)"]


@pytest.mark.parametrize("garbage", [b"", b"not json", b"[]", b'{"layers": [{"mediaType": 5}]}'])
def test_garbage_signature_objects_fail_closed(garbage):
    src, digest = signed_image(KEY)
    src.manifests[f.tag_for(digest, "sig")] = garbage
    src.manifests[f.tag_for(digest, "att")] = garbage
    found = problems(src, digest)
    assert found and all(digest[:19] in p for p in found)


def test_an_index_child_that_fails_fails_the_index():
    src, digest = signed_index(KEY)
    child = json.loads(src.manifests[digest])["manifests"][1]["digest"]
    del src.manifests[f.tag_for(child, "sig")]
    found = problems(src, digest)
    assert found == [f"{child[:19]}: no signature ({src.where}:{f.tag_for(child, 'sig')} is missing or not a manifest)"]
    assert signer(KEY)


# ---- round 2: bound to the digest, read as a Go client reads it ----------------------------------

def _sign_index(src: MemSource, index: bytes) -> str:
    digest = f.sha256(index)
    src.manifests[digest] = index
    src.put(f.signature_artifact("reg.example/p/img", {"mediaType": f.OCI_INDEX, "digest": digest, "size": len(index)},
                                 signer(KEY)), f.tag_for(digest, "sig"))
    return digest


def test_an_index_whose_child_says_digest_twice_is_refused_even_when_signed():
    """Python's json keeps the last "digest", Go's decoder takes "Digest" too: one index, two children."""
    src, gated = signed_image(KEY)
    _, unsigned = signed_image(OTHER, src, labels={"evil": "1"})
    child = (f'{{"mediaType": "{f.OCI_MANIFEST}", "digest": "{gated}", "size": {len(src.manifests[gated])}, '
             f'"Digest": "{unsigned}"}}')
    index = f'{{"schemaVersion": 2, "mediaType": "{f.OCI_INDEX}", "manifests": [{child}]}}'.encode()
    found = problems(src, _sign_index(src, index))
    assert len(found) == 1 and "refused: the manifest is not as the spec has it" in found[0]
    assert "keys 'digest' and 'Digest' differ only in case" in found[0]


@pytest.mark.parametrize("edit, why", [
    (lambda d: d.replace(b'"config": {', b'"Config": {"digest": "sha256:' + b"0" * 64 + b'", "size": 1, '
                         b'"mediaType": "x"}, "config": {'), "differ only in case"),
    (lambda d: d.replace(b'"layers": []', b'"layers": [], "layers": []'), "given twice"),
    (lambda d: d.replace(b'"layers": []', b'"layers": [], "extra": 1'), "field(s) the spec does not define: extra"),
])
def test_a_manifest_a_go_client_would_read_otherwise_is_refused(edit, why):
    src, digest = signed_image(KEY)
    bent = edit(src.manifests[digest])
    assert bent != src.manifests[digest]
    bent_digest = f.sha256(bent)
    src.manifests[bent_digest] = bent
    found = problems(src, bent_digest)
    assert len(found) == 1 and why in found[0]


def test_an_sbom_or_a_scan_decision_of_another_image_is_refused():
    src, digest = signed_image(KEY)
    config_digest = json.loads(src.manifests[digest])["config"]["digest"]
    other = "sha256:" + "ab" * 32
    bad_decision = provenance(config_digest)
    next(b for b in bad_decision["runDetails"]["byproducts"] if b["name"] == "trivy-decision")["annotations"][
        "image_id"] = other
    src2, digest2 = signed_image(KEY, MemSource(), predicates={f.CYCLONEDX: sbom(other),
                                                               f.SLSA_PROVENANCE: bad_decision})
    found = problems(src2, digest2)
    assert any(f"the SBOM is of image {other[:19]}, this image's config is {config_digest[:19]}" in p for p in found)
    assert any(f"trivy decision is of image {other[:19]}" in p for p in found)
    assert len(found) == 2


def test_the_docker_reference_binds_a_signature_to_its_repository():
    src, digest = signed_image(KEY, name="reg.example/staging/img")
    assert [v.ok for v in verify_image(src, digest, KEY.public_key(), references={"reg.example/staging/img"})] == [True]
    [v] = verify_image(src, digest, KEY.public_key(), references={"reg.example/release/img"})
    assert v.problems == [f"{digest[:19]}: signed as reg.example/staging/img, not as reg.example/release/img (pass "
                          "--signed-as reg.example/staging/img if it was promoted from there)"]
    assert v.names == ["reg.example/p/img:t"] and set(v.objects) == {"sig", "att"}


# ---- the release the image states (sign/release.py) ---------------------------------------------

def test_the_release_is_read_from_the_config_and_must_agree_with_the_payload():
    from support.signed_samples import CREATED, LABELS

    src, digest = signed_image(KEY, release={"created": CREATED, "revision": ""})
    [v] = verify_image(src, digest, KEY.public_key())
    assert v.ok and v.release.created == CREATED and f"release {CREATED}" in v.checked
    src, digest = signed_image(KEY, release={"created": "2027-01-01T00:00:00Z", "revision": ""})
    assert problems(src, digest) == [f"{digest[:19]}: the signed payload states release 2027-01-01T00:00:00Z, the "
                                     f"image's labels {CREATED}"]
    src, digest = signed_image(KEY, labels={k: v for k, v in LABELS.items() if "created" not in k})
    assert problems(src, digest) == [f"{digest[:19]}: the image states no release (org.opencontainers.image.created "
                                     "as a UTC time): a loader cannot tell it from an older one"]
    src, digest = signed_image(KEY, labels={**LABELS, "org.opencontainers.image.created": "1 December 2026"})
    assert any("states no release" in p for p in problems(src, digest))


def test_a_policy_can_require_a_minimum_release_and_a_recent_scan(tmp_path):
    from datetime import date

    from rapidship.gates.policy import load_policy

    src, digest = signed_image(KEY)  # release 2026-12-01T00:00:00+00:00, its scan decided 2026-12-01
    policy = tmp_path / "p.yaml"
    policy.write_text("release:\n  min_created: 2026-12-02T00:00:00Z\n  max_decision_age_days: 30\n")
    rules = load_policy(policy).release

    def found(today):
        return [p for v in verify_image(src, digest, KEY.public_key(), age_rules=rules, today=today) for p in v.problems]

    assert found(date(2026, 12, 10)) == [
        f"{digest[:19]}: release 2026-12-01T00:00:00+00:00 is older than the policy's release.min_created "
        "2026-12-02 00:00:00+00:00"]
    policy.write_text("release:\n  min_created: 2026-12-01\n  max_decision_age_days: 30\n")
    rules = load_policy(policy).release
    assert found(date(2026, 12, 31)) == []
    assert found(date(2027, 1, 1)) == [f"{digest[:19]}: the scan was decided on 2026-12-01, 31 days ago, more than "
                                       "the policy's release.max_decision_age_days 30: scan it again"]
