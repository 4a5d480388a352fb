"""Check one image's signature and attestations against a public key; every failure is one line.

Pure over a `Source` (where manifests and blobs come from: the registry, or a disc's folder), so
the registry check, promote and the offline import run the same rules:
  1. a cosign signature (.sig) made by this key whose payload names exactly this digest;
  2. for per-arch images, attestations (.att) made by this key over in-toto statements whose
     subject is this digest: a CycloneDX SBOM and a SLSA v1 provenance;
  3. the provenance matches the image: its config digest, the lock label, the variant label;
  4. the gates and the trivy decision in it passed, under the given policy when one is given.
A missing object is a failure (fail closed), never "nothing to check".
"""

from __future__ import annotations

import base64
import binascii
from datetime import date, datetime, timezone
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from cryptography.hazmat.primitives.asymmetric import ec

from rapidship import oci_json
from rapidship.sign import formats as f, release
from rapidship.sign.keys import fingerprint, verify_signature
from rapidship.sign.release import Release
from rapidship.sign.provenance import LOCK_LABEL, VARIANT_LABEL, byproduct, sbom_subject

INDEX_TYPES = oci_json.INDEX_TYPES
NAMES = {f.CYCLONEDX: "SBOM", f.SLSA_PROVENANCE: "provenance"}
PolicyFor = Callable[[Any], "dict | None"]  # variant id (from the provenance) -> the policy's rules for it


class Source(Protocol):
    where: str

    def manifest(self, ref: str) -> bytes | None: ...  # by digest or tag; None when absent

    def blob(self, digest: str) -> bytes | None: ...   # content checked against digest by the source


@dataclass
class Verdict:
    digest: str
    kind: str  # "index" or "image"
    problems: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    image_id: str = ""
    predicates: dict[str, dict] = field(default_factory=dict)  # type -> statement predicate
    names: list[str] = field(default_factory=list)  # repository:tag names the verified signature allows
    reference: str = ""  # the verified signature's docker-reference (the repository it was signed in)
    objects: dict[str, str] = field(default_factory=dict)  # "sig" / "att" -> digest of the verified object
    release: Release | None = None  # what the image's config states (sign/release.py), per-arch images only
    signed_release: Release | None = None  # what the verified payload states, when it states one

    @property
    def ok(self) -> bool:
        return not self.problems


def _json(data: bytes | None) -> Any:
    """Every document here is read as a Go client would read it, or not at all (oci_json)."""
    return oci_json.parse_or_none(data)


def _manifest(data: bytes | None) -> tuple[dict | None, str]:
    try:
        return oci_json.parse_manifest(data), ""
    except oci_json.Ambiguous as err:
        return None, str(err)


def check_signature(src: Source, digest: str, key: ec.EllipticCurvePublicKey, v: Verdict) -> None:
    tag = f.tag_for(digest, "sig")
    raw = src.manifest(tag)
    doc, why = _manifest(raw)
    if doc is None:
        v.problems.append(f"{digest[:19]}: no signature ({src.where}:{tag} is missing or not a manifest"
                          + (f": {why})" if raw is not None else ")"))
        return
    layers = [x for x in doc.get("layers") or [] if isinstance(x, dict) and x.get("mediaType") == f.SIMPLE_SIGNING]
    other_digest = other_key = False
    for layer in layers:
        payload = src.blob(str(layer.get("digest", "")))
        sig_text = (layer.get("annotations") or {}).get(f.SIGNATURE_ANNOTATION, "")
        try:
            signature = base64.b64decode(sig_text, validate=True)
        except (binascii.Error, ValueError):
            continue
        if payload is None or not verify_signature(key, signature, payload):
            other_key = True
            continue
        signed = _json(payload) or {}
        critical = signed.get("critical") or {} if isinstance(signed, dict) else {}
        if critical.get("type") != f.SIGNATURE_TYPE or (critical.get("image") or {}).get("docker-manifest-digest") != digest:
            other_digest = True
            continue
        v.names, v.objects["sig"] = f.signed_names(signed), f.sha256(raw)
        v.signed_release = release.of_payload(signed)
        v.reference = str((critical.get("identity") or {}).get("docker-reference") or "")
        v.checked.append(f"signature by {fingerprint(key)[:19]} over {digest[:19]}")
        return
    if other_digest:
        v.problems.append(f"{digest[:19]}: signed by this key, but the signed payload names another digest")
    elif other_key or layers:
        v.problems.append(f"{digest[:19]}: signature does not verify with key {fingerprint(key)[:19]} "
                          "(signed by another key, or the signature or its payload was changed)")
    else:
        v.problems.append(f"{digest[:19]}: the signature object holds no cosign signature")


def check_attestations(src: Source, digest: str, key: ec.EllipticCurvePublicKey, v: Verdict) -> None:
    tag = f.tag_for(digest, "att")
    raw = src.manifest(tag)
    doc, why = _manifest(raw)
    if doc is None:
        v.problems.append(f"{digest[:19]}: no attestations ({src.where}:{tag} is missing"
                          + (f" or not a manifest: {why})" if raw is not None else ")"))
        return
    v.objects["att"] = f.sha256(raw)
    for layer in doc.get("layers") or []:
        if not isinstance(layer, dict) or layer.get("mediaType") != f.DSSE:
            continue
        kind = (layer.get("annotations") or {}).get(f.PREDICATE_ANNOTATION, "?")
        problem, statement = open_envelope(src.blob(str(layer.get("digest", ""))), key, digest)
        if problem:
            v.problems.append(f"{digest[:19]}: {NAMES.get(kind, kind)} attestation: {problem}")
        elif statement.get("predicateType") != kind:
            v.problems.append(f"{digest[:19]}: attestation says {statement.get('predicateType')}, labelled {kind}")
        else:
            v.predicates[kind] = statement.get("predicate") or {}
    for kind, what in NAMES.items():
        if kind not in v.predicates and not any(p.startswith(f"{digest[:19]}: {what} attestation") for p in v.problems):
            v.problems.append(f"{digest[:19]}: no {what} attestation ({kind})")
    if f.CYCLONEDX in v.predicates:
        if v.predicates[f.CYCLONEDX].get("bomFormat") != "CycloneDX":
            v.problems.append(f"{digest[:19]}: the SBOM attestation holds no CycloneDX document")
        elif (subject := sbom_subject(v.predicates[f.CYCLONEDX])) != v.image_id:
            v.problems.append(f"{digest[:19]}: the SBOM is of image {subject[:19] or '(none named)'}, this image's "
                              f"config is {v.image_id[:19]}")
        else:
            v.checked.append(f"SBOM of {v.image_id[:19]} ({len(v.predicates[f.CYCLONEDX].get('components') or [])} "
                             "components)")


def open_envelope(data: bytes | None, key: ec.EllipticCurvePublicKey, digest: str) -> tuple[str, dict]:
    """(problem, statement): the DSSE envelope's signature over PAE and its statement's subject."""
    env = _json(data)
    if not isinstance(env, dict):
        return "missing or not a DSSE envelope", {}
    if env.get("payloadType") != f.IN_TOTO:
        return f"payloadType {env.get('payloadType')!r} is not {f.IN_TOTO}", {}
    try:
        payload = base64.b64decode(env.get("payload", ""), validate=True)
        sigs = [base64.b64decode(s.get("sig", ""), validate=True) for s in env.get("signatures") or []]
    except (binascii.Error, ValueError, AttributeError):
        return "envelope is not valid base64", {}
    if not any(verify_signature(key, sig, f.pae(f.IN_TOTO, payload)) for sig in sigs):
        return f"no signature by key {fingerprint(key)[:19]} (changed after signing, or another key)", {}
    statement = _json(payload)
    if not isinstance(statement, dict) or statement.get("_type") != f.STATEMENT:
        return "signed payload is not an in-toto Statement v1", {}
    algo, _, hexpart = digest.partition(":")
    if not any(isinstance(s, dict) and (s.get("digest") or {}).get(algo) == hexpart for s in statement.get("subject") or []):
        return f"its subject is not {digest[:19]}", {}
    return "", statement


def check_provenance(v: Verdict, config_digest: str, labels: dict, policy_for: PolicyFor | None) -> None:
    pred = v.predicates.get(f.SLSA_PROVENANCE)
    if pred is None:
        return
    params = (pred.get("buildDefinition") or {}).get("externalParameters") or {}
    image = byproduct(pred, "image-config") or {}
    if (image.get("digest") or {}).get("sha256") != config_digest.partition(":")[2]:
        v.problems.append(f"{v.digest[:19]}: provenance is for image {image.get('digest')}, this image's config is "
                          f"{config_digest[:19]}")
    lock = (params.get("lock") or {}).get("sha256")
    if lock != labels.get(LOCK_LABEL):
        v.problems.append(f"{v.digest[:19]}: provenance lock sha256 {str(lock)[:12]} differs from the image label "
                          f"{LOCK_LABEL}={str(labels.get(LOCK_LABEL))[:12]}")
    if params.get("variant") != labels.get(VARIANT_LABEL):
        v.problems.append(f"{v.digest[:19]}: provenance variant {params.get('variant')!r} differs from the label "
                          f"{labels.get(VARIANT_LABEL)!r}")
    for name in ("gates", "trivy-decision"):
        item = byproduct(pred, name)
        if item is None or (item.get("annotations") or {}).get("passed") is not True:
            v.problems.append(f"{v.digest[:19]}: provenance shows no passing {name}")
    decision = (byproduct(pred, "trivy-decision") or {}).get("annotations") or {}
    if decision.get("image_id") != config_digest:
        v.problems.append(f"{v.digest[:19]}: provenance's trivy decision is of image "
                          f"{str(decision.get('image_id') or '(none named)')[:19]}, this image's config is {config_digest[:19]}")
    policy = policy_for(params.get("variant")) if policy_for is not None else None
    if policy is not None:
        recorded = {k: val for k, val in (decision.get("policy") or {}).items() if k not in ("source", "variant")}
        if recorded != policy:
            changed = sorted(k for k in policy.keys() | recorded.keys() if policy.get(k) != recorded.get(k))
            v.problems.append(f"{v.digest[:19]}: the scan was decided under another policy ({', '.join(changed)} differ)")
        else:
            v.checked.append("scan decided under the given policy")
    if not any(p.startswith(v.digest[:19] + ": provenance") for p in v.problems):
        v.checked.append(f"provenance (lock {str(lock)[:12]}, gates and trivy passed)")


def check_age(v: Verdict, rules: Any, today: date) -> None:
    """A policy's `release` rules (gates/policy.ReleaseRules): the image's release and its scan
    decision young enough. Nothing to go on is a failure, never a pass."""
    if rules.min_created is not None and v.release is not None and v.release.key < release.key_at(rules.min_created):
        v.problems.append(f"{v.digest[:19]}: release {v.release.describe()} is older than the policy's "
                          f"release.min_created {rules.min_created}")
    if rules.max_decision_age_days is not None:
        decided = ((byproduct(v.predicates.get(f.SLSA_PROVENANCE) or {}, "trivy-decision") or {})
                   .get("annotations") or {}).get("decided_on")
        try:
            age = (today - date.fromisoformat(str(decided))).days
        except ValueError:
            v.problems.append(f"{v.digest[:19]}: the provenance states no scan decision date ({decided!r}), "
                              "so release.max_decision_age_days cannot be met")
            return
        if age > rules.max_decision_age_days:
            v.problems.append(f"{v.digest[:19]}: the scan was decided on {decided}, {age} days ago, more than the "
                              f"policy's release.max_decision_age_days {rules.max_decision_age_days}: scan it again")
        else:
            v.checked.append(f"scan decided {age} day(s) ago")


def verify_image(src: Source, digest: str, key: ec.EllipticCurvePublicKey,
                 policy_for: PolicyFor | None = None, references: set[str] | None = None,
                 age_rules: Any = None, today: date | None = None) -> list[Verdict]:
    """The verdicts of `digest` and, for an index, of every child image. `policy_for(variant)`: the
    scan rules the provenance's decision must have been made under (None: not checked).
    `references`: the repositories a signature may name as its docker-reference (None: not checked,
    as on a disc, where the signed names are checked instead). `age_rules`: a policy's release
    rules (check_age), judged on `today` (default: the UTC date now)."""
    raw = src.manifest(digest)
    doc, why = _manifest(raw)
    if raw is None or f.sha256(raw) != digest:
        return [Verdict(digest, "image", [f"{digest[:19]}: not found in {src.where} (or not a manifest)"])]
    if doc is None:
        return [Verdict(digest, "image", [f"{digest[:19]}: refused: the manifest is not as the spec has it ({why}); "
                                          "a Go client could read it as another image"])]
    if oci_json.is_index(doc):
        top = Verdict(digest, "index")
        check_signature(src, digest, key, top)
        _check_reference(top, references)
        return [top] + [v for child in doc["manifests"]
                        for v in verify_image(src, child["digest"], key, policy_for, references, age_rules, today)]
    v = Verdict(digest, "image", image_id=str(doc["config"]["digest"]))
    check_signature(src, digest, key, v)
    _check_reference(v, references)
    check_attestations(src, digest, key, v)
    config = _json(src.blob(v.image_id))
    if not isinstance(config, dict):
        v.problems.append(f"{digest[:19]}: the image config {v.image_id[:19]} cannot be read (missing, or JSON a Go "
                          "client would read otherwise)")
    else:
        check_provenance(v, v.image_id, (config.get("config") or {}).get("Labels") or {}, policy_for)
        check_release(v, config)
        if age_rules is not None:
            check_age(v, age_rules, today or datetime.now(timezone.utc).date())
    return [v]


def check_release(v: Verdict, config: dict) -> None:
    """The image states its release, and a payload that repeats it says the same."""
    v.release = release.of_config(config)
    if v.release is None:
        v.problems.append(f"{v.digest[:19]}: the image states no release ({release.CREATED_LABEL} as a UTC time): "
                          "a loader cannot tell it from an older one")
    elif v.signed_release is not None and v.signed_release.built() != v.release:
        v.problems.append(f"{v.digest[:19]}: the signed payload states release {v.signed_release.describe()}, the "
                          f"image's labels {v.release.describe()}")
    else:
        if v.signed_release is not None:  # the serial only the signature states: the order within one commit
            v.release = v.signed_release
        v.checked.append(f"release {v.release.describe()}" + (f", serial {v.release.serial}" if v.release.serial else ""))


def _check_reference(v: Verdict, references: set[str] | None) -> None:
    """A signature made in one repository vouches for the image there (or where it was promoted
    from, when the caller says so), not in any repository that holds the same digest."""
    if references is None or not v.objects.get("sig") or v.reference in references:
        return
    v.problems.append(f"{v.digest[:19]}: signed as {v.reference or '(no docker-reference)'}, not as "
                      f"{' or '.join(sorted(references))} (pass --signed-as {v.reference} if it was promoted from there)")
