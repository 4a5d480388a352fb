"""Run every image gate on one built image and record the result for push to read."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rapidship.build.buildkit import BuildSecrets, BuiltImage
from rapidship.gates import GateReport, GatesRecord
from rapidship.gates.labels import check_labels
from rapidship.gates.secrets import check_secrets, env_secret_values, is_trust_store
from rapidship.gates.size import check_size
from rapidship.gates.suid import check_suid
from rapidship.gates.user import check_user
from rapidship.image import snapshot
from rapidship.config.matrix import Variant
from rapidship.records import ContentRecord, Workspace
from rapidship import content

GATES = ("size", "labels", "user", "suid", "secrets")


def secret_values(secrets: BuildSecrets) -> dict[str, str]:
    values = env_secret_values()
    if secrets.pip_index:
        values["pip index URL"] = secrets.pip_index
    if secrets.conda_channels:
        values["conda channel URLs"] = " ".join(secrets.conda_channels)
    return values


def run_gates(v: Variant, built: BuiltImage, secrets: BuildSecrets,
              on_gate: Callable[[str], None] = lambda _: None) -> tuple[list[GateReport], ContentRecord]:
    """Every gate's report, and the env's content manifest hashed from the same read (provenance
    names its digest; two builds from one lock must agree on it)."""
    on_gate("reading the image (inspect, history, one export, env files hashed)")
    image = snapshot(built.ref, keep=is_trust_store, hash_under=content.ROOTS)  # one read for every gate
    config = image.config["Config"]
    steps: list[tuple[str, Callable[[], GateReport]]] = [
        ("size", lambda: check_size(built.size_bytes, built.zstd_bytes, v.budget_bytes)),
        ("labels", lambda: check_labels(config.get("Labels"), v)),
        ("user", lambda: check_user(built.ref, config.get("User", ""))),
        ("suid", lambda: check_suid(image)),
        ("secrets", lambda: check_secrets(image, secrets.ca_bundle, secret_values(secrets))),
    ]
    reports = []
    for name, step in steps:
        on_gate(name)
        reports.append(step())
    return reports, content.manifest(image, built.variant, built.arch, image.config.get("Id", built.image_id))


def write_content_record(ws: Workspace, record: ContentRecord) -> Path:
    return ws.save(ws.content(record.variant, record.arch), record)


def write_gates_record(ws: Workspace, built: BuiltImage, reports: list[GateReport]) -> Path:
    record = GatesRecord(ref=built.ref, image_id=built.image_id, arch=built.arch,
                         passed=all(r.passed for r in reports), gates=reports)
    return ws.save(ws.gates(built.variant, built.arch), record)
