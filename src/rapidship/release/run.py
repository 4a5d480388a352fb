"""The release chain's edge: each stage is the task a user runs alone (one definition), called in
order by `plan.walk`; this measures what each one read and wrote and keeps the chain's record.

Bytes, honestly: `read` is what the stage must read by its own records (the image for gates, scan,
push and export, the ISOs for export-verify, the records for the report; build's inputs are not
counted); `written` is the size of the files it left in the workspace and the disc folder. What
the engine or the registry stores on their side is in neither.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from pathlib import Path

from invoke.exceptions import Exit

from rapidship import console
from rapidship.records import ExportVerified, ReleaseRecord, write_atomic
from rapidship.release import current
from rapidship.release.current import REPORT_BINDING, Release, disc_out, read_export
from rapidship.release.plan import STAGES, Ran, StageFailed, fresh, timeline_line, walk
from rapidship.report.verdict import gpu_smoke


def release(rel: Release, c) -> ReleaseRecord:
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
    return walk(record, lambda s: current.check(s, rel), lambda s: run_stage(s, rel, c), time.monotonic, saved)


def run_stage(stage: str, rel: Release, c) -> Ran:
    return STEPS[stage](rel, c)


def _task(task, c, **flags) -> str:
    """Run one task as `invoke TASK` would; its stdout (JSON, where asked for) is returned."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            task(c, **flags)
    except Exit as err:  # exits_cleanly's one message: "error: WHERE: WHAT\n  fix: ..."
        raise StageFailed(str(err.message or f"exit {err.code}").removeprefix("error: ")) from None
    return out.getvalue()


def _build(rel: Release, c) -> Ran:
    from rapidship.cli.build import build

    _task(build, c, variant=rel.variant.id, arch=rel.arch_flag, variants_file=rel.variants_file)
    return Ran(None, _sizes(*[p for a in rel.arches for p in (rel.ws.build(rel.variant.id, a),
                                                             rel.ws.build_log(rel.variant.id, a))]))


def _gates(rel: Release, c) -> Ran:
    from rapidship.cli.build import gates

    _task(gates, c, variant=rel.variant.id, arch=rel.arch_flag, variants_file=rel.variants_file)
    return Ran(_image_bytes(rel), _sizes(*[p for a in rel.arches for p in (rel.ws.gates(rel.variant.id, a),
                                                                          rel.ws.content(rel.variant.id, a))]))


def _scan(rel: Release, c) -> Ran:
    from rapidship.cli.scan import scan

    for a in rel.arches:
        _task(scan, c, variant=rel.variant.id, arch=a, policy=rel.policy, variants_file=rel.variants_file,
              **rel.scan_flags)
    return Ran(_image_bytes(rel), _sizes(*[rel.ws.scan_dir(rel.variant.id, a) for a in rel.arches]))


def _push(rel: Release, c) -> Ran:
    from rapidship.cli.publish import push

    # signing is the next stage's (the same task `invoke sign` is): push alone here
    _task(push, c, variant=rel.variant.id, registry=rel.registry, no_sign=True, arch=list(rel.arches),
          build_dir=str(rel.ws.root), variants_file=rel.variants_file)
    return Ran(_image_bytes(rel), _sizes(rel.ws.push(rel.variant.id)))


def _smoke(rel: Release, c) -> Ran:
    """The spill smoke of a CPU image runs here, as `invoke smoke` does (a CUDA image's is pending, never run here)."""
    from rapidship.cli.smoke import smoke

    if rel.variant.cuda:
        raise StageFailed(f"smoke {rel.variant.id}: a smoke of this CUDA image failed, and it runs on a GPU runner, "
                          f"not here: {', '.join(gpu_smoke(rel.variant.id, a).text() for a in rel.arches)}")
    for a in rel.arches:
        _task(smoke, c, variant=rel.variant.id, arch=a, out=str(rel.ws.smoke_dir()), variants_file=rel.variants_file)
    return Ran(_image_bytes(rel), _sizes(*rel.ws.smoke_dir().glob(f"{rel.variant.id}-*.json")))


def _sign(rel: Release, c) -> Ran:
    from rapidship.cli.sign import sign

    _task(sign, c, variant=rel.variant.id, key=rel.key, build_dir=str(rel.ws.root), **rel.online_keys)
    return Ran(None, _sizes(rel.ws.sign(rel.variant.id), rel.ws.variant_dir(rel.variant.id) / "signed"))


def _export(rel: Release, c) -> Ran:
    from rapidship.cli.export import export_images

    out = disc_out(rel)
    if rel.out is None and out.exists():  # the chain's own folder, holding a disc that is not current
        shutil.rmtree(out)
    _task(export_images, c, variant=[rel.variant.id], arch=rel.arches[0] if len(rel.arches) == 1 else None,
          media=rel.media, out=str(out), build_dir=str(rel.ws.root), variants_file=rel.variants_file,
          since=rel.since)
    return Ran(read_export(out).tar_bytes, _sizes(out))


def _export_verify(rel: Release, c) -> Ran:
    from rapidship.cli.export import export_verify

    out = disc_out(rel)
    start = time.monotonic()
    disc = read_export(out)
    hashes = current.iso_hashes_now(out, disc)  # the ISOs verified: the record is bound to these bytes
    shown = json.loads(_task(export_verify, c, from_=[str(out)], key=rel.public_key, json=True))
    rel.ws.save(rel.ws.export_verify(rel.variant.id), ExportVerified(
        export_id=shown["export_id"], iso_sha256=hashes, verified_with=shown["verified_with"],
        images={x["expected_id"]: x["image_id"] for x in shown["verified"]}, seconds=round(time.monotonic() - start, 2)))
    return Ran(sum(v.iso_bytes for v in disc.volumes), _sizes(rel.ws.export_verify(rel.variant.id)))


def _report(rel: Release, c) -> Ran:
    from rapidship.cli.report import report

    inputs = current.report_inputs(rel)  # read before: the binding is what the page was written from
    _task(report, c, out=str(rel.report_out), build_dir=str(rel.ws.root), export=[str(disc_out(rel))],
          variant=[rel.variant.id], arch=list(rel.arches), variants_file=rel.variants_file)
    from rapidship.release.plan import records_digest

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
