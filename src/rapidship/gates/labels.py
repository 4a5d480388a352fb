"""Labels gate: the OCI set plus the versions, GPU archs and lock hash that tie an image to its inputs."""

from __future__ import annotations

import re

from rapidship.gates import GateReport, verdict
from rapidship.config.matrix import Variant

OCI_REQUIRED = ("org.opencontainers.image.title", "org.opencontainers.image.version",
                "org.opencontainers.image.created", "org.opencontainers.image.description",
                "org.opencontainers.image.vendor", "org.opencontainers.image.licenses",
                "org.opencontainers.image.base.name")


def expected_labels(v: Variant, arch: str | None = None) -> dict[str, str]:
    """`arch`: the judged image's (a variant with a fleet per arch keeps other device code per arch)."""
    return {"io.rapidship.variant": v.id, "io.rapidship.rapids.version": v.rapids,
            "io.rapidship.cuda.version": v.cuda or "none", "io.rapidship.python.version": v.python,
            # which GPUs' device code the image keeps ("80,90", "all", "none" for CPU variants)
            "io.rapidship.gpu.archs": v.gpu_archs_label(arch),
            "org.opencontainers.image.version": v.tag()}


def check_labels(labels: dict[str, str] | None, v: Variant, rendered_lock: str | None = None,
                 arch: str | None = None) -> GateReport:
    """`rendered_lock`: the sha256 render computed of the lock (render.json): the label must be it,
    not merely look like a hash."""
    labels = labels or {}
    reasons = [f"missing label {key}" for key in OCI_REQUIRED if not labels.get(key)]
    for key, want in expected_labels(v, arch).items():
        if labels.get(key) != want:
            reasons.append(f"label {key} is {labels.get(key)!r}, expected {want!r}")
    lock = labels.get("io.rapidship.lock.sha256", "")
    if not re.fullmatch(r"[0-9a-f]{64}", lock):
        reasons.append("label io.rapidship.lock.sha256 is not a sha256: the image was built without a lock")
    elif rendered_lock is not None and lock != rendered_lock:
        reasons.append(f"label io.rapidship.lock.sha256 is {lock[:12]}..., the rendered lock is {rendered_lock[:12]}...: "
                       "the image was built from another lock (render and build again)")
    return verdict("labels", reasons, labels=labels)
