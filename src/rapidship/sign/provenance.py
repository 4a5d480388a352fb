"""Pure: the SLSA v1 provenance predicate of one per-arch image, from the records that made it.

What it ties together (the verifier checks each against the image): the rendered Dockerfile and
the lock (sha256), every base image (ref, id, repo digests), the build arguments (names of secrets
only, never values), the source commit, the gate record and the trivy decision (their sha256, their
verdicts and the policy the scan was decided under) and the env's content manifest digest.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rapidship import __version__
from rapidship.records import BuiltImage, ContentRecord, GatesRecord, Rendered, ScanRecord

BUILD_TYPE = "urn:rapidship:buildtype:dockerfile:v1"
LOCK_LABEL = "io.rapidship.lock.sha256"
VARIANT_LABEL = "io.rapidship.variant"


def file_sha256(data: bytes) -> dict[str, str]:
    return {"sha256": hashlib.sha256(data).hexdigest()}


def _hex(digest: str) -> dict[str, str]:
    algo, _, value = digest.partition(":")
    return {algo or "sha256": value} if value else {}


def predicate(*, rendered: Rendered, built: BuiltImage, gates: GatesRecord, gates_bytes: bytes,
              decision: ScanRecord, decision_bytes: bytes, content: ContentRecord, image_id: str,
              source: dict[str, str], builder_id: str, signed_at: str) -> dict[str, Any]:
    extra = built.extra
    deps: list[dict[str, Any]] = []
    if source.get("commit"):
        deps.append({"name": "source", "uri": source.get("uri") or "git+local",
                     "digest": {"gitCommit": source["commit"]}})
    deps.append({"name": "Dockerfile", "uri": f"file:{rendered.dockerfile}",
                 "digest": {"sha256": rendered.dockerfile_sha256}})
    deps.append({"name": "lock", "uri": f"file:{rendered.out_dir}/lock", "digest": {"sha256": rendered.lock_sha256}})
    for stage, base in sorted((extra.get("bases") or {}).items()):
        digests = {"sha256": base["id"].partition(":")[2]} if base.get("id") else {}
        deps.append({"name": stage, "uri": f"docker-image:{base['ref']}", "digest": digests,
                     "annotations": {"repoDigests": base.get("repo_digests", [])}})
    if not extra.get("bases"):
        deps.append({"name": "RUNTIME_BASE", "uri": f"docker-image:{built.base}", "digest": {},
                     "annotations": {"note": "base digests were not recorded by this build's builder"}})
    byproducts = [
        {"name": "image-config", "digest": _hex(image_id), "annotations": {"ref": built.ref}},
        {"name": "gates", "digest": file_sha256(gates_bytes),
         "annotations": {"passed": gates.passed, "gates": {g.gate: g.passed for g in gates.gates}}},
        {"name": "trivy-decision", "digest": file_sha256(decision_bytes),
         "annotations": {"passed": decision.passed, "image_id": decision.image_id, "policy": decision.policy,
                         "counts": decision.counts,
                         "trivy_version": decision.trivy_version, "db": decision.db,
                         "decided_on": decision.decided_on}},
        {"name": "content-manifest", "digest": _hex(content.digest),
         "annotations": {"roots": content.roots, "files": content.files, "bytes": content.bytes}},
    ]
    return {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {
                "variant": built.variant, "arch": built.arch, "target": extra.get("target", "runtime"),
                "dockerfile": {"path": rendered.dockerfile, "sha256": rendered.dockerfile_sha256},
                "lock": {"sha256": rendered.lock_sha256},
                "buildArgs": dict(sorted((extra.get("build_args") or {}).items())),
            },
            "internalParameters": {"secretIds": list(extra.get("secret_ids") or []),
                                   "gpuArchs": extra.get("gpu_archs", "")},
            "resolvedDependencies": deps,
        },
        "runDetails": {
            "builder": {"id": builder_id, "version": {"rapidship": __version__}},
            "metadata": {"invocationId": built.log, "finishedOn": signed_at},
            "byproducts": byproducts,
        },
    }


def byproduct(pred: dict, name: str) -> dict | None:
    for item in (pred.get("runDetails") or {}).get("byproducts") or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    return None


IMAGE_ID_PROPERTY = "aquasecurity:trivy:ImageID"  # trivy's CycloneDX: metadata.component.properties


def sbom_subject(sbom: dict) -> str:
    """The image id a trivy CycloneDX SBOM describes ('' when it names none)."""
    component = (sbom.get("metadata") or {}).get("component") or {} if isinstance(sbom, dict) else {}
    ids = {str(p.get("value")) for p in component.get("properties") or []
           if isinstance(p, dict) and p.get("name") == IMAGE_ID_PROPERTY}
    return ids.pop() if len(ids) == 1 else ""
