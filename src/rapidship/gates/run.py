"""Run every image gate on one built image and record the result for push to read."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rapidship.imagebuild.buildkit import BuildSecrets, BuiltImage
from rapidship.gates import GateReport, GatesRecord
from rapidship.gates.labels import check_labels
from rapidship.gates.secrets import check_secrets, env_secret_values
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


# build secret id -> (the value the gates need to look for it, the flag that gives it)
SECRET_SOURCES = {"pip-index": (lambda s: s.pip_index, "--pip-index (or $RAPIDSHIP_PIP_INDEX_URL)"),
                  "conda-channels": (lambda s: s.conda_channels, "$RAPIDSHIP_CONDA_CHANNELS"),
                  "cacert": (lambda s: s.ca_bundle, "--ca-bundle (or $RAPIDSHIP_CA_BUNDLE)")}


def unsearched_secrets(built: BuiltImage, secrets: BuildSecrets) -> list[str]:
    """Pure: the secrets the build record says the build used, that this gates run has no value to
    look for. A gate that cannot look must not say "nothing found"."""
    out = []
    for sid in built.extra.get("secret_ids") or []:
        value, flag = SECRET_SOURCES.get(sid, (lambda _s: None, "the same value the build had"))
        if not value(secrets):
            out.append(f"the build used secret {sid!r} but this gates run was not given it, so it cannot be "
                       f"searched for: pass {flag} as the build had it")
    return out


def run_gates(v: Variant, built: BuiltImage, secrets: BuildSecrets, rendered_lock: str | None = None,
              on_gate: Callable[[str], None] = lambda _: None) -> tuple[list[GateReport], ContentRecord, str]:
    """Every gate's report, the env's content manifest hashed from the same read (provenance names
    its digest; two builds from one lock must agree on it), and the id of the image judged. The
    image is read by the build record's id, not by its tag (which a later build may have moved)."""
    on_gate("reading the image (inspect, history, one export, env files hashed)")
    image = snapshot(built.image_id, hash_under=content.ROOTS)  # one read for every gate
    image_id = image.config.get("Id", "")
    config = image.config["Config"]
    size = int(image.config.get("Size") or 0)  # of the image judged, not a copy of the build record
    steps: list[tuple[str, Callable[[], GateReport]]] = [
        ("size", lambda: check_size(size, built.zstd_bytes, v.budget_bytes)),
        ("labels", lambda: check_labels(config.get("Labels"), v, rendered_lock, built.arch)),
        ("user", lambda: check_user(image_id, config.get("User", ""))),
        ("suid", lambda: check_suid(image)),
        ("secrets", lambda: check_secrets(image, secrets.ca_bundle, secret_values(secrets),
                                          unsearched_secrets(built, secrets))),
    ]
    reports = []
    for name, step in steps:
        on_gate(name)
        reports.append(step())
    return reports, content.manifest(image, built.variant, built.arch, image_id), image_id


def write_content_record(ws: Workspace, record: ContentRecord) -> Path:
    return ws.save(ws.content(record.variant, record.arch), record)


def write_gates_record(ws: Workspace, built: BuiltImage, reports: list[GateReport], image_id: str) -> Path:
    """`image_id`: the image the gates read (run_gates says which)."""
    record = GatesRecord(ref=built.ref, image_id=image_id, arch=built.arch,
                         passed=all(r.passed for r in reports), gates=reports)
    return ws.save(ws.gates(built.variant, built.arch), record)
