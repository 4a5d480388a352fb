"""When a stage's record is current: bound to the image ids this release carries and to its inputs.

One rule per stage, each made of the rules the stages themselves already apply, so the chain never
trusts a record the next stage would refuse:
- build: the build record names the image the engine holds under its name, and its recorded inputs
  are this checkout's (commit, clean tree, rendered lock, bases): `reproduce.input_problems`;
- gates, scan: the records vouch for that image id and say passed (`records.gated_problems`, what
  push, sign and export ask), the scan under the policy's rules as they read now;
- push: the push record is of these image ids, into this registry, and the registry still serves
  its index under the tag;
- smoke: a spill smoke of the built image id passed (the report's rule); a CUDA image's is pending
  on a GPU runner;
- sign: the sign record signed that index and those image ids, with this key, in the repository the
  push went to, and that repository serves each signature and attestation it attached (a HEAD each);
- export: export.json carries those image ids under the signed digests, with this key, extending
  the `--since` release (or none), and its ISOs hash to what it lists (read in full: a byte flip
  keeps a size and a time, not a hash);
- export-verify: its record verified ISOs of exactly those hashes with this key, every id served as
  shipped;
- report: the records it read are byte for byte the ones there now.
A record of another image is stale, never trusted. Thin edge: reads records, the engine, the registry.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from rapidship.config.matrix import Arch, Variant
from rapidship.errors import RapidshipError
from rapidship.records import (BuiltImage, ExportVerified, RecordError, Workspace, gated_problems, load, read_document,
                               read_sign)
from rapidship.release.plan import Check, StageFailed, disc_folder, records_digest

EXPORT_RECORD = "export.json"


@dataclass(frozen=True)
class Release:
    """What one `invoke release` was asked for (the flags, resolved)."""

    variant: Variant
    arch_flag: str | None          # as given to build and gates: one arch, "all", None (this machine's)
    arches: tuple[str, ...]
    ws: Workspace
    registry: str                  # HOST[:PORT]/PROJECT
    key: str                       # the signing key (path or URI)
    public_key: str                # cosign.pub: what sign must have used, what export-verify checks with
    policy: str
    since: str | None = None
    out: Path | None = None        # --out of the disc (None: build/<variant>/disc-<what it carries>)
    report_out: Path = Path("build/report")
    media: str = "dvd"
    scan_flags: dict = field(default_factory=dict)  # scan's trivy flags (cache_dir, skip_db_update, ...)
    variants_file: str = "variants.yaml"
    online_keys: dict = field(default_factory=dict)  # sign's snapshot_key / timestamp_key, with a trust repository
    build_inputs: dict = field(default_factory=dict)  # build's mirrors, CA bundle and network (never recorded)


def check(stage: str, rel: Release) -> Check:
    """The stage's record and why it is not current; StageFailed when the rule cannot be applied."""
    try:
        return RULES[stage](rel)
    except RapidshipError as err:
        raise StageFailed(err.message) from None


# ---- per stage -------------------------------------------------------------------------------

def built(rel: Release) -> dict[str, BuiltImage]:
    """arch -> build record, for stages after build (which ran, or was current)."""
    from rapidship.imagebuild.buildkit import read_record

    return {a: read_record(rel.ws, rel.variant.id, a) for a in rel.arches}


def image_ids(rel: Release) -> dict[str, str]:
    return {a: b.image_id for a, b in built(rel).items()}


def _build(rel: Release) -> Check:
    from rapidship.engine import ENGINE
    from rapidship.imagebuild.buildkit import read_record
    from rapidship.imagebuild.reproduce import input_problems, recorded_bases
    from rapidship.render.dockerfile import render

    vid, stale, bound = rel.variant.id, [], {}
    head, dirty = checkout_state()
    lock = render(rel.variant).lock_sha256
    for a in rel.arches:
        path = rel.ws.build(vid, a)
        try:
            rec = read_record(rel.ws, vid, a)
        except RecordError as err:
            stale.append(f"{a}: {err.problem}")
            continue
        held = (ENGINE.try_inspect(rec.ref) or {}).get("Id", "")
        if held != rec.image_id:
            stale.append(f"{path}: names image {rec.image_id[:19]}, the engine holds {held[:19] or 'nothing'} "
                         f"under {rec.ref}")
        _, base_problems = recorded_bases(rel.ws, rel.variant, Arch(a), rec)
        stale += [f"{a}: {p}" for p in input_problems(rec, head, dirty, lock) + base_problems]
        bound[a] = rec.image_id
    return Check(str(rel.ws.build(vid, rel.arches[0])), stale, bound)


def _gated(rel: Release, what: tuple[str, ...], path) -> Check:
    ids = image_ids(rel)
    stale = [p for a in rel.arches for p in gated_problems(rel.ws, rel.variant.id, a, ids[a], only=what)]
    return Check(str(path(rel.variant.id, rel.arches[0])), stale, ids)


def _gates(rel: Release) -> Check:
    return _gated(rel, ("gate record", "content manifest"), rel.ws.gates)


def _scan(rel: Release) -> Check:
    from rapidship.gates.policy import describe, load_policy
    from rapidship.records import read_decision

    found = _gated(rel, ("scan decision",), rel.ws.decision)
    stale = list(found.stale)
    if not stale:  # decided under the policy as it reads now (the decision's own description of it)
        now = {k: v for k, v in describe(load_policy(rel.policy, rel.variant.id)).items() if k != "source"}
        for a in rel.arches:
            decision = read_decision(rel.ws, rel.variant.id, a)
            if {k: v for k, v in decision.policy.items() if k != "source"} != now:
                stale.append(f"{rel.ws.decision(rel.variant.id, a)}: decided under other policy rules than "
                             f"{rel.policy} has now")
            elif (why := db_too_old(decision.db, now.get("max_db_age_days"))):
                stale.append(f"{rel.ws.decision(rel.variant.id, a)}: {why}")
    return Check(found.record, stale, found.bound)


def db_too_old(db: dict, max_days: int | None, today: date | None = None) -> str:
    """The policy's max_db_age_days, applied again when a decision is reused: a scan against a DB that
    has since grown too old is not current ('' when it is young enough, or no age is asked for)."""
    if not max_days:
        return ""
    try:
        updated = date.fromisoformat(str(db.get("UpdatedAt", ""))[:10])
    except ValueError:
        return "the DB it was decided with states no update time"
    age = ((today or date.today()) - updated).days
    return f"the DB it was decided with is {age} days old (max_db_age_days: {max_days})" if age > max_days else ""


def _push(rel: Release) -> Check:
    from rapidship.stages.publish import registry_for
    from rapidship.publish.oci import split_repository
    from rapidship.publish.push import read_push_record
    from rapidship.redact import redact

    path, ids = rel.ws.push(rel.variant.id), image_ids(rel)
    try:
        rec = read_push_record(rel.ws, rel.variant.id)
    except RecordError as err:
        return Check(str(path), [err.problem])
    host, project = split_repository(rel.registry)
    stale = ["pushed with --skip-gates"] if rec.gates_skipped else []
    if (rec.registry, rec.repository) != (host, f"{project}/{rel.variant.image}"):
        stale.append(redact(f"pushed to {rec.registry}/{rec.repository}, this release goes to {host}/{project}"))
    pushed = {a: x.image_id for a, x in rec.arches.items()}
    if pushed != ids:
        stale.append(f"pushed {_ids(pushed)}, this release is {_ids(ids)}")
    if not stale:
        served = registry_for(host, None).head_manifest(rec.repository, rec.tag)
        if served is None or served.digest != rec.index_digest:
            stale.append(f"the registry serves {served.digest[:19] if served else 'nothing'} under {rec.tag}, the "
                         f"record pushed {rec.index_digest[:19]}")
    return Check(str(path), stale, {"index": rec.index_digest, **ids})


def _smoke(rel: Release) -> Check:
    """A spill smoke of the built image passed, by the report's own rule (report/summary.smoke_cell);
    a CUDA image's smoke runs on a GPU runner: pending there, named with its job and command."""
    from rapidship.report.collect import collect
    from rapidship.report.model import LABELS, PASS, SITE
    from rapidship.report.summary import smoke_cell, smoke_runs
    from rapidship.report.verdict import gpu_smoke

    vid, ids = rel.variant.id, image_ids(rel)
    records = collect(rel.ws, [rel.variant], [])
    runs, stale, elsewhere = smoke_runs(records), [], []
    for a in rel.arches:
        mine = [r for r in runs if (r.variant, r.arch) == (vid, a)]
        cell = smoke_cell(mine, records.images[(vid, a)].build, gpu=bool(rel.variant.cuda))
        if cell.status != PASS:
            stale.append(f"{a}: {LABELS[cell.status]}: {cell.detail or cell.note}")
        if cell.status == SITE:
            elsewhere.append(gpu_smoke(vid, a).text())
    return Check(str(rel.ws.smoke_dir()), stale, ids, "; ".join(elsewhere) if len(elsewhere) == len(stale) else "")


def _sign(rel: Release) -> Check:
    from rapidship.stages.publish import registry_for
    from rapidship.publish.push import read_push_record
    from rapidship.redact import redact

    path, ids = rel.ws.sign(rel.variant.id), image_ids(rel)
    try:
        rec = read_sign(rel.ws, rel.variant.id)
    except RecordError as err:
        return Check(str(path), [err.problem])
    pushed = read_push_record(rel.ws, rel.variant.id)
    stale = []
    if rec.index.digest != pushed.index_digest:
        stale.append(f"signed index {rec.index.digest[:19]}, the push record's is {pushed.index_digest[:19]}")
    signed = {a: x.image_id for a, x in rec.arches.items()}
    if signed != ids:
        stale.append(f"signed {_ids(signed)}, this release is {_ids(ids)}")
    if rec.key_fingerprint != key_fingerprint(rel):
        stale.append(f"signed with key {rec.key_fingerprint[:19]}, this release's key is {key_fingerprint(rel)[:19]}")
    if (rec.registry, rec.repository) != (pushed.registry, pushed.repository):
        stale.append(redact(f"signed in {rec.registry}/{rec.repository}, pushed to {pushed.registry}/{pushed.repository}"))
    if not stale:  # what the record attached is what the registry the push went to serves now
        stale += unserved_signatures(registry_for(pushed.registry, None), rec)
    return Check(str(path), stale, {"index": rec.index.digest, "key": rec.key_fingerprint})


def unserved_signatures(reg, rec) -> list[str]:
    """Each .sig / .att object the sign record attached that its repository does not serve under its
    tag (one HEAD each): missing, or another object there now."""
    from rapidship.sign.formats import tag_for

    missing = []
    for what, signed in (("index", rec.index), *rec.arches.items()):
        for suffix, attached in (("sig", signed.signature), ("att", signed.attestations)):
            if not attached:
                continue
            served = reg.head_manifest(rec.repository, tag_for(signed.digest, suffix))
            if served is None or served.digest != attached:
                missing.append(f"{rec.repository} serves {served.digest[:19] if served else 'no'} {suffix} of {what} "
                               f"{signed.digest[:19]}, the record attached {attached[:19]}")
    return missing


def disc_out(rel: Release) -> Path:
    if rel.out is not None:
        return rel.out
    return rel.ws.variant_dir(rel.variant.id) / disc_folder(list(image_ids(rel).values()), since_id(rel))


def since_id(rel: Release) -> str:
    if not rel.since:
        return ""
    from rapidship.export.verify import previous_release

    return previous_release(rel.since)[0]


def read_export(folder: Path):
    from rapidship.export.write import ExportRecord

    return load(folder / EXPORT_RECORD, ExportRecord, f"invoke export --out {folder}", "export record")


def _export(rel: Release) -> Check:
    out = disc_out(rel)
    path = out / EXPORT_RECORD
    if not path.is_file():
        return Check(str(path), [f"no export record in {out}"])
    rec, ids = read_export(out), image_ids(rel)
    sign = read_sign(rel.ws, rel.variant.id)
    stale = []
    carried = {i.arch: i.image_id for i in rec.images}
    if carried != ids:
        stale.append(f"carries {_ids(carried)}, this release is {_ids(ids)}")
    unsigned = [i.arch for i in rec.images if i.arch not in sign.arches or i.signed_digest != sign.arches[i.arch].digest]
    if unsigned:
        stale.append(f"{', '.join(unsigned)}: not under the digest the sign record signed")
    if rec.signing_key_fingerprint != sign.key_fingerprint:
        stale.append(f"signatures of key {rec.signing_key_fingerprint[:19] or '(none)'}, signed with "
                     f"{sign.key_fingerprint[:19]}")
    extends = (rec.extends or {}).get("export_id", "")
    if extends != since_id(rel):
        stale.append(f"extends export {extends[:12] or '(none: a full disc)'}, this release asks for "
                     f"{since_id(rel)[:12] or 'a full disc'}")
    for v in rec.volumes:
        iso = out / v.iso
        if not iso.is_file() or iso.stat().st_size != v.iso_bytes:
            stale.append(f"{iso}: missing, or not the {v.iso_bytes:,} bytes recorded")
        elif (now := iso_sha256_now(iso)) != v.iso_sha256:
            stale.append(f"{iso}: hashes to {now[:16]}, export.json says {v.iso_sha256[:16]} (damaged or changed)")
    return Check(str(path), stale, {"export": rec.export_id})


def _export_verify(rel: Release) -> Check:
    path = rel.ws.export_verify(rel.variant.id)
    try:
        rec = load(path, ExportVerified, f"invoke release --variant {rel.variant.id}", "export-verify record")
    except RecordError as err:
        return Check(str(path), [err.problem])
    out = disc_out(rel)
    disc = read_export(out)
    stale = []
    if rec.export_id != disc.export_id:
        stale.append(f"verified export {rec.export_id[:12]}, the disc is export {disc.export_id[:12]}")
    elif rec.iso_sha256 != iso_hashes(disc) or rec.iso_sha256 != iso_hashes_now(out, disc):
        stale.append("verified ISOs of other hashes than export.json lists or the ISOs hash to now")
    if rec.verified_with != key_fingerprint(rel):
        stale.append(f"verified with key {rec.verified_with[:19]}, this release's is {key_fingerprint(rel)[:19]}")
    if set(rec.images) != set(image_ids(rel).values()) or any(k != v for k, v in rec.images.items()):
        stale.append(f"verified ids {_ids(rec.images)}, this release is {_ids(image_ids(rel))}")
    return Check(str(path), stale, {"export": rec.export_id})


def report_inputs(rel: Release) -> dict[str, bytes | None]:
    """The records the report reads of this release, by path: its binding."""
    vid, ws = rel.variant.id, rel.ws
    paths = [ws.render(vid), ws.push(vid), ws.sign(vid), ws.export_verify(vid), disc_out(rel) / EXPORT_RECORD]
    for a in rel.arches:
        paths += [ws.build(vid, a), ws.gates(vid, a), ws.decision(vid, a), ws.content(vid, a), ws.size(vid, a)]
    return {str(p): p.read_bytes() if p.is_file() else None for p in paths}


REPORT_BINDING = "release-inputs.json"  # beside report.json: the digest of the records it was written from


def _report(rel: Release) -> Check:
    path = rel.report_out / "report.json"
    bound = {"records": records_digest(report_inputs(rel))}
    if not path.is_file():
        return Check(str(path), [f"no {path}"], bound)
    try:
        was = read_document(rel.report_out / REPORT_BINDING, "invoke release", "report binding").get("records")
    except RecordError as err:
        return Check(str(path), [err.problem], bound)
    if was != bound["records"]:
        return Check(str(path), ["written from other records than the release has now"], bound)
    return Check(str(path), [], bound)


RULES = {"build": _build, "gates": _gates, "scan": _scan, "push": _push, "smoke": _smoke, "sign": _sign,
         "export": _export, "export-verify": _export_verify, "report": _report}


# ---- shared facts ----------------------------------------------------------------------------

def key_fingerprint(rel: Release) -> str:
    from rapidship.sign.keys import fingerprint, load_public

    return fingerprint(load_public(rel.public_key, "--public-key"))


def iso_hashes(record) -> dict[str, str]:
    return {v.iso: v.iso_sha256 for v in record.volumes}


def iso_hashes_now(folder: Path, record) -> dict[str, str]:
    """What each ISO export.json lists hashes to now ('' for one that is not there)."""
    return {v.iso: iso_sha256_now(folder / v.iso) if (folder / v.iso).is_file() else "" for v in record.volumes}


_HASHED: dict[tuple, str] = {}


def iso_sha256_now(iso: Path) -> str:
    """The ISO's sha256, read in full (about 1 s per 1.4 GB): a size or a time can be kept by a flipped
    byte, a hash cannot. Kept for this process only while the file's identity, size and times stay, so
    export and export-verify of one walk read it once."""
    from rapidship.export.write import sha256_file

    st = iso.stat()
    key = (str(iso.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _HASHED:
        _HASHED[key] = sha256_file(iso)
    return _HASHED[key]


def checkout_state() -> tuple[str, bool]:
    """HEAD's commit ("" outside a git checkout) and whether tracked files have uncommitted changes."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           check=False).stdout.strip()
    return head, bool(dirty)


def _ids(ids: dict[str, str]) -> str:
    return ", ".join(f"{a} {i[:19]}" for a, i in sorted(ids.items())) or "nothing"
