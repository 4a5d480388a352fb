"""Sign a pushed variant: a cosign signature on the index and on every per-arch digest, and on each
per-arch digest two attestations (CycloneDX SBOM from the scan, SLSA v1 provenance from the records).

Before anything is signed, the records must agree with what the registry holds: each pushed
manifest's config digest is the gated image's id (gates, scan, content manifest and build record
name the same image) and the rendered lock is the image's lock label. So a signature can only
vouch for the image that was built, gated and scanned here. Objects are attached under cosign's
tags (`sha256-<hex>.sig` / `.att`), with `subject` set and the referrers tag-schema index updated,
and kept under build/<variant>/signed/ for the disc.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from rapidship.errors import RapidshipError
from rapidship.publish.oci import Registry
from rapidship.publish.push import make_index
from rapidship import oci_json
from rapidship.records import (PushRecord, Rendered, RecordError, SignedDigest, SignRecord, Workspace, gated_problems,
                               read_content, read_decision, read_gates)
from rapidship.sign import formats as f, release
from rapidship.sign.keys import Signer, fingerprint
from rapidship.sign.provenance import predicate, sbom_subject
from rapidship.sign.sources import keep, push_artifact, update_referrers


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def source_info() -> dict[str, str]:
    """The commit being built and where it lives (credentials in a remote URL are dropped)."""
    env = os.environ
    commit, uri = env.get("CI_COMMIT_SHA", ""), env.get("CI_PROJECT_URL", "")
    if not commit:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
        commit = proc.stdout.strip() if proc.returncode == 0 else ""
    if not uri:
        proc = subprocess.run(["git", "remote", "get-url", "origin"], capture_output=True, text=True, check=False)
        uri = proc.stdout.strip() if proc.returncode == 0 else ""
    uri = re.sub(r"^([a-z+]+://)[^/@]*@", r"\1", uri)
    return {"commit": commit, "uri": f"git+{uri}" if uri else ""}


def builder_id() -> str:
    env = os.environ
    if env.get("RAPIDSHIP_BUILDER_ID"):
        return env["RAPIDSHIP_BUILDER_ID"]
    if env.get("CI_SERVER_URL") and env.get("CI_RUNNER_ID"):
        return f"{env['CI_SERVER_URL']}/{env.get('CI_PROJECT_PATH', '')}/-/runners/{env['CI_RUNNER_ID']}"
    return f"urn:rapidship:builder:{socket.gethostname()}"


def _read_bytes(path: Path, writer: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        raise RecordError(str(path), "cannot be read", f"run {writer}") from None


def _sbom(ws: Workspace, variant: str, arch: str, image_id: str) -> dict:
    """The scan's CycloneDX SBOM, which must describe `image_id` (trivy names it in
    metadata.component): an SBOM of another image is never attested for this one."""
    from rapidship.gates.scan import SBOM

    path = ws.scan_dir(variant, arch) / SBOM
    writer = f"invoke scan --variant {variant} --arch {arch}"
    try:
        doc = oci_json.parse(_read_bytes(path, writer))
    except oci_json.Ambiguous as err:
        raise RecordError(str(path), f"the SBOM is not JSON one way ({err})", f"run {writer} again") from None
    if not isinstance(doc, dict) or doc.get("bomFormat") != "CycloneDX":
        raise RecordError(str(path), "not a CycloneDX SBOM", f"run {writer} again")
    if (subject := sbom_subject(doc)) != image_id:
        raise RecordError(str(path), f"the SBOM is of image {subject[:19] or '(none named)'}, not of the pushed "
                          f"{image_id[:19]}", f"run {writer} again on the image that was pushed")
    return doc


def sign_variant(ws: Workspace, record: PushRecord, signer: Signer, reg: Registry,
                 log: Callable[[str], None] = lambda _: None,
                 on_target: Callable[[str, str, int, dict], None] = lambda *_: None) -> SignRecord:
    """Sign each arch and the index; `on_target(name, manifest digest, manifest length, custom)` is
    told every signed name of every arch (what a TUF release binds: sign/tufmeta.py)."""
    start = time.monotonic()
    variant, repo = record.variant, record.repository
    reference = f"{record.registry}/{repo}"
    rendered = ws.load(ws.render(variant), Rendered, f"invoke render --variant {variant}", "render record")
    from rapidship.imagebuild.buildkit import read_record

    if record.gates_skipped:
        raise RapidshipError(f"sign {variant}", "push skipped the gates (--skip-gates)",
                             "only gated images are signed: fix the gates, push again, then sign")
    signed_at, source, builder = _now(), source_info(), builder_id()
    serial = time.time_ns() // 1_000_000  # the release's own order among builds of one commit (sign/release.py)
    arches, contents, children = {}, {}, []
    for arch, pushed in record.arches.items():
        manifest, _ = reg.get_manifest(repo, pushed.digest)
        config_digest = reg.parse_manifest(manifest, f"{repo}@{pushed.digest}")["config"]["digest"]
        stale = gated_problems(ws, variant, arch, config_digest)
        if pushed.image_id and pushed.image_id != config_digest:
            stale.insert(0, f"push.json records image {pushed.image_id[:19]} for {arch}")
        if stale:
            raise RapidshipError(f"sign {variant} {arch}", f"the registry's {pushed.digest[:19]} is image "
                                 f"{config_digest[:19]}, but:\n  " + "\n  ".join(stale),
                                 "gate, scan and push the same build again, then sign")
        built, gates, decision = read_record(ws, variant, arch), read_gates(ws, variant, arch), read_decision(ws, variant, arch)
        content = read_content(ws, variant, arch)
        if built.lock_sha256 != rendered.lock_sha256:
            raise RapidshipError(f"sign {variant} {arch}", "the image's lock label differs from the rendered lock",
                                 f"render and build {variant} again")
        config = reg.get_blob(repo, config_digest)
        stated = release.of_config(oci_json.parse_or_none(config))
        if stated is None:  # loaders order releases before they move a name: an image must state its own
            raise RapidshipError(f"sign {variant} {arch}", f"image {config_digest[:19]} states no release (label "
                                 f"{release.CREATED_LABEL} as a UTC time, which invoke build sets)",
                                 f"build it with invoke build --variant {variant} --arch {arch}, then gate, push, sign")
        subject = {"mediaType": pushed.media_type, "digest": pushed.digest, "size": pushed.size}
        pred = predicate(rendered=rendered, built=built, gates=gates,
                         gates_bytes=_read_bytes(ws.gates(variant, arch), "invoke gates"), decision=decision,
                         decision_bytes=_read_bytes(ws.decision(variant, arch), "invoke scan"), content=content,
                         image_id=config_digest, source=source, builder_id=builder, signed_at=signed_at)
        statements = {f.CYCLONEDX: f.statement(reference, pushed.digest, f.CYCLONEDX,
                                               _sbom(ws, variant, arch, config_digest)),
                      f.SLSA_PROVENANCE: f.statement(reference, pushed.digest, f.SLSA_PROVENANCE, pred)}
        # the names an offline import may create: the build's own ref and the pushed one
        names = [built.release_name, f"{reference}:{pushed.tag}"]
        sig = f.signature_artifact(reference, subject, signer.sign, names=names,
                                     release=replace(stated, serial=serial).payload())
        for name in names:
            on_target(name, pushed.digest, len(manifest), {"variant": variant, "arch": arch, "release": record.tag,
                                                           "lock_sha256": built.lock_sha256, "image_id": config_digest})
        att = f.attestation_artifact({k: f.envelope(v, signer.sign) for k, v in statements.items()}, subject)
        log(f"{arch}: signing {reference}@{pushed.digest[:19]} (signature, SBOM, provenance)")
        attach(reg, repo, pushed.digest, sig, att)
        keep(ws.variant_dir(variant) / "signed", pushed.digest, manifest, config, {"sig": sig, "att": att})
        arches[arch] = SignedDigest(digest=pushed.digest, signature=sig.digest, attestations=att.digest,
                                    image_id=config_digest,
                                    predicates={k: f.sha256(v) for k, v in statements.items()})
        contents[arch] = content.digest
        children.append(pushed)
    index_manifest, desc = reg.get_manifest(repo, record.index_digest)
    if make_index(children)[0] != index_manifest:  # sign exactly the index over the arches checked above
        raise RapidshipError(f"sign {variant}", f"the registry's index {record.index_digest[:19]} is not the index "
                             f"over the {len(children)} per-arch manifests just checked",
                             "push again (invoke push), then sign; nothing of the index was signed")
    index_sig = f.signature_artifact(reference, {"mediaType": desc.media_type, "digest": record.index_digest,
                                                 "size": desc.size}, signer.sign, names=[f"{reference}:{record.tag}"])
    log(f"index: signing {reference}@{record.index_digest[:19]}")
    attach(reg, repo, record.index_digest, index_sig, None)
    keep(ws.variant_dir(variant) / "signed", record.index_digest, index_manifest, None, {"sig": index_sig})
    return SignRecord(variant=variant, registry=record.registry, repository=repo, tag=record.tag,
                      key_fingerprint=fingerprint(signer.public_key()), key_reference=signer.reference,
                      index=SignedDigest(digest=record.index_digest, signature=index_sig.digest), arches=arches,
                      content_digests=contents, signed_at=signed_at, seconds=round(time.monotonic() - start, 1))


def attach(reg: Registry, repo: str, digest: str, sig: f.Artifact, att: f.Artifact | None) -> None:
    push_artifact(reg, repo, sig, f.tag_for(digest, "sig"))
    added = [(sig, f.SIMPLE_SIGNING)]
    if att is not None:
        push_artifact(reg, repo, att, f.tag_for(digest, "att"))
        added.append((att, f.DSSE))
    update_referrers(reg, repo, digest, added)


def copy_signed(reg: Registry, src_repo: str, dst_repo: str, digest: str, objects: dict[str, str] | None) -> int:
    """Promote's part: the .sig / .att objects (and their referrers index) of `digest` from src to
    dst, byte for byte. `objects` ("sig"/"att" -> manifest digest): exactly the objects verification
    read, fetched by digest, so a tag moved after the check copies nothing else; None (--no-verify):
    whatever the tags hold now. Returns how many objects were copied."""
    copied = []
    for suffix, kind in (("sig", f.SIMPLE_SIGNING), ("att", f.DSSE)):
        tag = f.tag_for(digest, suffix)
        ref = (objects or {}).get(suffix) if objects is not None else tag
        if not ref or (objects is None and reg.head_manifest(src_repo, tag) is None):
            continue
        data, desc = reg.get_manifest(src_repo, ref)
        doc = reg.parse_manifest(data, f"{src_repo}:{tag}")
        for blob in [doc["config"], *doc["layers"]]:
            reg.copy_blob(src_repo, dst_repo, blob["digest"])
        reg.put_manifest(dst_repo, tag, data, desc.media_type)
        copied.append((f.Artifact(data, ()), kind))
    if copied:
        update_referrers(reg, dst_repo, digest, copied)
    return len(copied)


def verify_staged(reg: Registry, record: PushRecord, key) -> dict[str, dict[str, str]]:
    """Promote's first step: every staged object verifies with the release key, signed in the
    staging repository, or nothing moves. Returns digest -> the signature objects verified."""
    from rapidship.errors import GateFailure
    from rapidship.sign.sources import RegistrySource
    from rapidship.sign.verify import verify_image

    src = RegistrySource(reg, record.repository)
    verdicts = verify_image(src, record.index_digest, key, references={src.where})
    problems = [p for v in verdicts for p in v.problems]
    if problems:
        raise GateFailure(f"promote {record.variant}", f"{record.registry}/{record.repository}@"
                          f"{record.index_digest[:19]} does not verify:\n  " + "\n  ".join(problems),
                          "sign the staged push (invoke sign) with the release key; nothing was copied")
    return {v.digest: v.objects for v in verdicts}


def promote_signed(reg: Registry, record: PushRecord, dst_repo: str,
                   verified: dict[str, dict[str, str]] | None) -> int:
    """Promote's last step: the signed objects of the index and of every arch, copied with them."""
    digests = [record.index_digest, *(a.digest for a in record.arches.values())]
    return sum(copy_signed(reg, record.repository, dst_repo, d, verified.get(d, {}) if verified is not None else None)
               for d in digests)
