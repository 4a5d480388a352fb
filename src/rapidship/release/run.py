"""The release chain's edge: each stage is the stage function its task calls (src/rapidship/stages/, one
definition), called in order by `plan.walk`; this measures what each one read and wrote and keeps the
chain's record. Nothing here imports a task: cli/ sits above the release, not below it.

Bytes, honestly: `read` is what the stage must read by its own records (the image for gates, scan,
push and export, the ISOs for export-verify, the records for the report; build's inputs are not
counted); `written` is the size of the files it left in the workspace and the disc folder. What
the engine or the registry stores on their side is in neither.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from rapidship import console
from rapidship.config.matrix import Arch
from rapidship.errors import RapidshipError
from rapidship.records import ExportVerified, ReleaseRecord, write_atomic
from rapidship.release import current
from rapidship.release.current import REPORT_BINDING, Release, disc_out, read_export
from rapidship.release.plan import STAGES, Ran, StageFailed, fresh, records_digest, timeline_line, walk
from rapidship.report.verdict import gpu_smoke
from rapidship.stages import build as stages_build, export as stages_export, publish, report as stages_report
from rapidship.stages import scan as stages_scan, smoke as stages_smoke


def release(rel: Release) -> ReleaseRecord:
    """Walk every stage; the record is saved (and a timeline line printed) at each step."""
    shown: dict[str, str] = {}

    def saved(record: ReleaseRecord) -> None:
        rel.ws.save(rel.ws.release(rel.variant.id), record)
        for i, stage in enumerate(record.stages):
            if shown.get(stage.name) != stage.verdict:
                shown[stage.name] = stage.verdict
                if stage.verdict != "not run" or record.passed is False:
                    console.err.print(timeline_line(stage, i, len(STAGES)), highlight=False)

    record = fresh(rel.variant.id, list(rel.arches), rel.since or "")
    record = walk(record, lambda s: current.check(s, rel), lambda s: run_stage(s, rel), time.monotonic, saved)
    if record.passed:  # the page shows this run as it ended, also when its report stage was current and skipped
        from rapidship.report.write import retime

        retime(rel.ws, rel.report_out)
    elif record.stopped_at != "report":  # the page shows where this run stopped, not an earlier run's verdict
        try:
            _draw(rel)
        except StageFailed as err:
            console.err.print(f"the report page was not redrawn: {err}", highlight=False)
    return record


def run_stage(stage: str, rel: Release) -> Ran:
    return STEPS[stage](rel)


def _stage(fn, *args, **kw):
    """Run one stage function as its task would; its error (what said no, and the fix) is the stage's FAIL."""
    try:
        return fn(*args, **kw)
    except RapidshipError as err:
        raise StageFailed(err.message) from None


def _arches(rel: Release) -> list[Arch]:
    return [Arch(a) for a in rel.arches]


def _build(rel: Release) -> Ran:
    _stage(stages_build.build, rel.variant.id, _arches(rel), variants_file=rel.variants_file, **rel.build_inputs)
    return Ran(None, _sizes(*[p for a in rel.arches for p in (rel.ws.build(rel.variant.id, a),
                                                             rel.ws.build_log(rel.variant.id, a))]))


def _gates(rel: Release) -> Ran:
    _stage(stages_build.gates, rel.variant.id, _arches(rel), variants_file=rel.variants_file,
           **{k: v for k, v in rel.build_inputs.items() if k != "network"})  # the secrets gate looks for them
    return Ran(_image_bytes(rel), _sizes(*[p for a in rel.arches for p in (rel.ws.gates(rel.variant.id, a),
                                                                          rel.ws.content(rel.variant.id, a))]))


def _scan(rel: Release) -> Ran:
    for a in rel.arches:
        _stage(stages_scan.scan, rel.variant.id, a, policy=rel.policy, variants_file=rel.variants_file,
               **rel.scan_flags)
    return Ran(_image_bytes(rel), _sizes(*[rel.ws.scan_dir(rel.variant.id, a) for a in rel.arches]))


def _push(rel: Release) -> Ran:
    # signing is the next stage's (the same function `invoke sign` calls): push alone here
    _stage(publish.push, rel.variant.id, rel.registry, no_sign=True, arches=_arches(rel), build_dir=str(rel.ws.root),
           variants_file=rel.variants_file)
    return Ran(_image_bytes(rel), _sizes(rel.ws.push(rel.variant.id)))


def _smoke(rel: Release) -> Ran:
    """The spill smoke of a CPU image runs here, as `invoke smoke` does (a CUDA image's is pending, never run here)."""
    if rel.variant.cuda:
        raise StageFailed(f"smoke {rel.variant.id}: a smoke of this CUDA image failed, and it runs on a GPU runner, "
                          f"not here: {', '.join(gpu_smoke(rel.variant.id, a).text() for a in rel.arches)}")
    for a in rel.arches:
        _stage(stages_smoke.smoke, rel.variant.id, a, out=str(rel.ws.smoke_dir()), variants_file=rel.variants_file)
    return Ran(_image_bytes(rel), _sizes(*rel.ws.smoke_dir().glob(f"{rel.variant.id}-*.json")))


def _sign(rel: Release) -> Ran:
    _stage(publish.sign, rel.variant.id, key=rel.key, build_dir=str(rel.ws.root), **rel.online_keys)
    return Ran(None, _sizes(rel.ws.sign(rel.variant.id), rel.ws.variant_dir(rel.variant.id) / "signed"))


def _export(rel: Release) -> Ran:
    out = disc_out(rel)
    if rel.out is None and out.exists():  # the chain's own folder, holding a disc that is not current
        shutil.rmtree(out)
    _stage(stages_export.export_images, [rel.variant.id], rel.arches[0] if len(rel.arches) == 1 else None,
           media=rel.media, out=str(out), build_dir=str(rel.ws.root), variants_file=rel.variants_file, since=rel.since)
    return Ran(read_export(out).tar_bytes, _sizes(out))


def _export_verify(rel: Release) -> Ran:
    out = disc_out(rel)
    start = time.monotonic()
    disc = read_export(out)
    hashes = current.iso_hashes_now(out, disc)  # the ISOs verified: the record is bound to these bytes
    shown = _stage(stages_export.export_verify, [str(out)], key=rel.public_key)
    rel.ws.save(rel.ws.export_verify(rel.variant.id), ExportVerified(
        export_id=shown["export_id"], iso_sha256=hashes, verified_with=shown["verified_with"],
        images={x["expected_id"]: x["image_id"] for x in shown["verified"]}, seconds=round(time.monotonic() - start, 2)))
    return Ran(sum(v.iso_bytes for v in disc.volumes), _sizes(rel.ws.export_verify(rel.variant.id)))


def _draw(rel: Release) -> None:
    try:
        disc = [str(disc_out(rel))]
    except RapidshipError:  # a chain stopped before its image was built has no disc to name
        disc = []
    _stage(stages_report.report, out=str(rel.report_out), build_dir=str(rel.ws.root), export=disc,
           variant=[rel.variant.id], arch=list(rel.arches), variants_file=rel.variants_file)


def _report(rel: Release) -> Ran:
    inputs = current.report_inputs(rel)  # read before: the binding is what the page was written from
    _draw(rel)
    write_atomic(rel.report_out / REPORT_BINDING, json.dumps({"records": records_digest(inputs)}) + "\n")
    return Ran(sum(len(b) for b in inputs.values() if b), _sizes(rel.report_out))


STEPS = {"build": _build, "gates": _gates, "scan": _scan, "push": _push, "smoke": _smoke, "sign": _sign,
         "export": _export, "export-verify": _export_verify, "report": _report}


def _image_bytes(rel: Release) -> int:
    return sum(b.size_bytes for b in current.built(rel).values())


def _sizes(*paths: Path) -> int:
    """Bytes of the files at `paths` (folders: every file under them)."""
    total = 0
    for path in paths:
        if path.is_dir():
            total += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        elif path.is_file():
            total += path.stat().st_size
    return total
