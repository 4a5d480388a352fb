"""Run every image gate on one built image and record the result for push to read."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rapidship.imagebuild.buildkit import BuildSecrets, BuiltImage
from rapidship.gates import GateReport, GatesRecord
from rapidship.gates.labels import check_labels
from rapidship.gates.secrets import check_secrets
from rapidship.gates.size import check_size
from rapidship.gates.suid import check_suid
from rapidship.gates.user import check_user
from rapidship.engine import ENGINE
from rapidship.image import ImageSnapshot, snapshot
from rapidship.config.matrix import Variant
from rapidship.records import ContentRecord, Workspace
from rapidship import content, layerfacts, needles

GATES = ("size", "labels", "user", "suid", "secrets")


def secret_values(secrets: BuildSecrets) -> dict[str, str]:
    return needles.secret_values(secrets.pip_index, secrets.conda_channels)


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


def read_image(image_id: str, facts_root: Path | None) -> tuple[ImageSnapshot, str, list[layerfacts.LayerFacts]]:
    """One read of the image for every gate: its layers' facts where each layer has them (the
    normaliser noted them as it wrote the bytes; layerfacts.py), else one `docker export` with the
    env's files hashed. Says which; the facts read (none: read whole)."""
    config = ENGINE.inspect(image_id)
    diff_ids = list((config.get("RootFS") or {}).get("Layers") or [])
    facts = layerfacts.read(facts_root, diff_ids, content.ROOTS) if facts_root is not None else "no facts asked for"
    if isinstance(facts, str):
        return snapshot(image_id, hash_under=content.ROOTS), f"read whole (one docker export): {facts}", []
    files, digests, links = layerfacts.view(layerfacts.flatten(facts), content.ROOTS)
    return (ImageSnapshot(image_id, config, ENGINE.history(image_id), files, {}, digests, links),
            f"read from the facts of its {len(diff_ids)} layers, bound to their diff_ids", facts)


def secret_hits(facts: list[layerfacts.LayerFacts], facts_root: Path | None, secrets: BuildSecrets,
                values: dict[str, str]) -> layerfacts.LayerHits:
    """What the normaliser found of these needles in every layer, where it searched for exactly them."""
    if not facts or facts_root is None:
        return None
    found, _ = needles.needles_of(secrets.ca_bundle, values)
    return layerfacts.layer_hits(facts, needles.fingerprint(found, layerfacts.key_path(facts_root)))


def run_gates(v: Variant, built: BuiltImage, secrets: BuildSecrets, rendered_lock: str | None = None,
              on_gate: Callable[[str], None] = lambda _: None,
              facts_root: Path | None = None) -> tuple[list[GateReport], ContentRecord, str, str]:
    """Every gate's report, the env's content manifest hashed from the same read (provenance names
    its digest; two builds from one lock must agree on it), the id of the image judged and how it
    was read (`read_image`). The image is read by the build record's id, not by its tag (which a
    later build may have moved). `facts_root`: the workspace whose layer facts may stand in for
    the read (None: read the image whole)."""
    image, how, facts = read_image(built.image_id, facts_root)
    on_gate(how)
    values = secret_values(secrets)
    image_id = image.config.get("Id", "")
    config = image.config["Config"]
    size = int(image.config.get("Size") or 0)  # of the image judged, not a copy of the build record
    steps: list[tuple[str, Callable[[], GateReport]]] = [
        ("size", lambda: check_size(size, built.zstd_bytes, v.budget_bytes)),
        ("labels", lambda: check_labels(config.get("Labels"), v, rendered_lock, built.arch)),
        ("user", lambda: check_user(image_id, config.get("User", ""))),
        ("suid", lambda: check_suid(image)),
        ("secrets", lambda: check_secrets(image, secrets.ca_bundle, values, unsearched_secrets(built, secrets),
                                          secret_hits(facts, facts_root, secrets, values))),
    ]
    reports = []
    for name, step in steps:
        on_gate(name)
        reports.append(step())
    return reports, content.manifest(image, built.variant, built.arch, image_id), image_id, how


def write_content_record(ws: Workspace, record: ContentRecord) -> Path:
    return ws.save(ws.content(record.variant, record.arch), record)


def write_gates_record(ws: Workspace, built: BuiltImage, reports: list[GateReport], image_id: str,
                       read: str = "") -> Path:
    """`image_id`: the image the gates read, `read`: how (run_gates says both)."""
    record = GatesRecord(ref=built.ref, image_id=image_id, arch=built.arch,
                         passed=all(r.passed for r in reports), gates=reports, read=read)
    return ws.save(ws.gates(built.variant, built.arch), record)
