"""Records -> Summary: every verdict the release report shows, decided here and nowhere else (pure).

The rules, so that nothing reads as a pass that is not one:
- a record that is not there is MISSING ("not run"); one the workspace refuses is CORRUPT, with
  its message; the cell says so, and so does the records table;
- a gate record, smoke run or signature of another image id than the build record names is
  STALE: it speaks of an image that is no longer the one built;
- a gate the gate record does not list is MISSING, not passed;
- smoke passes only when every run of that image passed (a failed run is never outvoted).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from rapidship.records import ClusterTiers
from rapidship.imagebuild.delta_cost import per_year_words
from rapidship.smoke.scrape import OOM_KILLS
from rapidship.report.collect import Got, ImageRecords, Records, VariantRecords
from rapidship.smoke.run import negative_markers
from rapidship.report.scope import release_scope
from rapidship.report.model import (DeltaCostRow, EnvLayer, CORRUPT, FAIL, IMAGE_GATES, MISSING, PASS,
                                    SEVERITIES, SITE, STALE, AllowRow, BaseImage, BytesReport, Cell, ExportImage,
                                    ExportRow, ExportVolume, ImageRow, ImageVersions, PathBytes, PruneArch,
                                    PruneFile, RecordState, ReleaseRun, ReleaseStep, ScanFinding, ScanRow, SignedArch, SignRow, SizeRow, ScrapedWorker,
                                    SmokeRun, SmokeStage, Summary, VersionRow)

TOP_PATHS = 10      # largest directories / files shown per image
TOP_FAILING = 20    # failing findings listed per scan (decision.json keeps all)
TOP_FINDINGS = 100  # findings of every outcome listed per scan
LABEL_KEYS = {"rapids": "io.rapidship.rapids.version", "cuda": "io.rapidship.cuda.version",
              "python": "io.rapidship.python.version", "gpu_archs": "io.rapidship.gpu.archs",
              "revision": "org.opencontainers.image.revision", "created": "org.opencontainers.image.created"}
LOCK_LABEL = "io.rapidship.lock.sha256"


def gb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e9:.2f} GB"


def short(digest: str, n: int = 19) -> str:
    return digest[:n] if digest else "-"


def _unread(got: Got) -> Cell:
    """The cell of a record that could not be used: NOT RUN (the command that writes it on hover)
    or CORRUPT (why, in the cell)."""
    if got.state.state == MISSING:
        return Cell(MISSING, "", got.state.message)
    return Cell(CORRUPT, f"{got.state.what}: {got.state.message}", f"{got.state.path}; fix: run {got.state.writer}")


# ---- the matrix ------------------------------------------------------------------------------

def build_cell(got: Got) -> Cell:
    if not got.ok:
        return _unread(got)
    b = got.value
    return Cell(PASS, f"{gb(b.size_bytes)}, zstd {gb(b.zstd_bytes)}, {b.layers} layers, {b.seconds:.0f}s")


def gate_cells(gates: Got, build: Got) -> dict[str, Cell]:
    if not gates.ok:
        return {g: _unread(gates) for g in IMAGE_GATES}
    record = gates.value
    by_name = {g.gate: g for g in record.gates}
    stale = build.ok and build.value.image_id != record.image_id
    cells = {}
    for name in IMAGE_GATES:
        report = by_name.get(name)
        if report is None:
            cells[name] = Cell(MISSING, f"the gate record lists no {name} gate")
        elif stale:
            cells[name] = Cell(STALE, f"{'PASS' if report.passed else 'FAIL'} for {short(record.image_id)}, "
                                      f"built {short(build.value.image_id)}", "the gate record is of another image "
                                      "than the build record: run invoke gates again")
        elif report.passed:
            cells[name] = Cell(PASS, _gate_detail(name, report.details))
        else:
            cells[name] = Cell(FAIL, "; ".join(report.reasons) or "failed (no reason recorded)")
    return cells


def _gate_detail(name: str, details: dict) -> str:
    if name == "size" and "size_bytes" in details:
        return f"{gb(details.get('size_bytes'))}, zstd {gb(details.get('zstd_bytes'))} of {gb(details.get('budget_bytes'))}"
    if name == "user" and "configured" in details:
        return f"user {details['configured']}, ran as uid {details.get('random_uid', '?')}"
    if name == "suid":
        return f"{details.get('count', 0)} setuid/setgid files"
    if name == "secrets" and "needles" in details:
        return f"{details['needles']} secrets looked for, none found"
    if name == "labels":
        return f"{len(details.get('labels', {}))} labels checked"
    return ""


def trivy_cell(got: Got, build: Got | None = None) -> Cell:
    if not got.ok:
        return _unread(got)
    rec = got.value
    if build is not None and build.ok and rec.image_id != build.value.image_id:  # as push reads it: "" vouches for none
        return Cell(STALE, f"{'PASS' if rec.passed else 'FAIL'} for {short(rec.image_id or '(no image id)')}, "
                           f"built {short(build.value.image_id)}",
                    "the scan decision is of another image than the build record: run invoke scan again")
    fails = sum(c.get("fail", 0) for c in rec.counts.values())
    allowed = sum(c.get("allowlisted", 0) for c in rec.counts.values())
    found = sum(sum(c.values()) for c in rec.counts.values())
    text = f"{found} findings, {fails} failing, {allowed} allowlisted (threshold {rec.policy.get('threshold', '?')})"
    if rec.passed:
        return Cell(PASS, text)
    return Cell(FAIL, (rec.reasons[0] if rec.reasons else "failed") + (f" (+{len(rec.reasons) - 1} more)" if len(rec.reasons) > 1 else "")
                + f"; {text}")


def harbor_cell(arch: str, harbor: Got, push: Got) -> Cell:
    if harbor.state.state == MISSING:  # Harbor runs nowhere but at the site
        return Cell(SITE, "Harbor's scan", f"only a site's Harbor runs it: {harbor.state.writer}")
    if not harbor.ok:
        return _unread(harbor)
    record = harbor.value
    digest = push.value.arches[arch].digest if push.ok and arch in push.value.arches else None
    scans = [s for s in record.scans if digest is None or s.get("digest") == digest]
    if not scans:
        return Cell(STALE, f"Harbor scanned no image of digest {short(digest or '')} (the one push.json records)")
    failed = [s for s in scans if s.get("passed") is not True]
    if failed:
        decision = failed[0].get("decision")
        reasons = (decision.get("reasons") or []) if isinstance(decision, dict) else []
        return Cell(FAIL, "; ".join(reasons[:3]) or f"Harbor's scan of {short(failed[0].get('digest', ''))} failed the policy")
    return Cell(PASS, f"Harbor scan of {short(scans[0].get('digest', ''))}: passed")


def smoke_cell(runs: list[SmokeRun], build: Got, gpu: bool = False) -> Cell:
    runs = [r for r in runs if not r.negative]  # a run meant to fail says nothing about the image
    if not runs and gpu:
        return Cell(SITE, "GPU smoke", "a CUDA image's smoke needs a GPU runner: invoke smoke --mode gpu --gpus all")
    if not runs:
        return Cell(MISSING, "", "no smoke run of this image: run invoke smoke")
    corrupt = [r for r in runs if r.state.state == CORRUPT]
    if corrupt:
        return Cell(CORRUPT, f"{corrupt[0].file}: {corrupt[0].state.message}")
    image_id = build.value.image_id if build.ok else None
    fresh = [r for r in runs if not (image_id and r.image.startswith("sha256:") and r.image != image_id)]
    if not fresh:
        return Cell(STALE, f"{len(runs)} run(s), all of another image than {short(image_id or '')}")
    failed = [r for r in fresh if r.cell.status != PASS]
    if failed:
        first = failed[0]
        return Cell(FAIL, f"{len(failed)} of {len(fresh)} run(s) failed: {first.name}: "
                          + ("; ".join(first.problems[:2]) or first.cell.detail))
    disk = sum(1 for r in fresh if any(s.reached_disk for s in r.stages))
    return Cell(PASS, f"{len(fresh)} run(s) passed, {disk} reached disk")


def signature_cell(arch: str, sign: Got, build: Got) -> Cell:
    if not sign.ok:
        return _unread(sign)
    record = sign.value
    signed = record.arches.get(arch)
    if signed is None and not build.ok:
        return Cell(MISSING, "", f"no {arch} image was built, and sign.json signs none")
    if signed is None:
        return Cell(FAIL, f"sign.json signs no {arch} image, but one was built")
    if build.ok and signed.image_id and signed.image_id != build.value.image_id:
        return Cell(STALE, f"signed image {short(signed.image_id)}, but the build record names {short(build.value.image_id)}")
    atts = f", {len(signed.predicates)} attestations" if signed.predicates else ""
    return Cell(PASS, f"{short(signed.digest)} signed with key {short(record.key_fingerprint, 23)}{atts}")


# ---- smoke -----------------------------------------------------------------------------------

def smoke_runs(records: Records) -> list[SmokeRun]:
    arches = {(v.id, a.value) for v in records.variants for a in v.arches}
    runs = []
    for got in records.smoke:
        name = got.state.path.rsplit("/", 1)[-1]
        if not got.ok:
            vid, arch = _owner(name, arches)
            runs.append(SmokeRun(file=name, state=got.state, variant=vid, arch=arch, cell=_unread(got)))
            continue
        r = got.value
        plan, report = r.plan, r.report or {}
        stages = [_stage(s) for s in report.get("stages") or [] if isinstance(s, dict)]
        if r.verdict == "PASS" and not r.problems:
            cell = Cell(PASS, f"{len(stages)} stage(s); " + ", ".join(
                f"{s.name} {'reached disk' if s.reached_disk else 'spilled to ' + s.spill_tier}" for s in stages))
        else:
            cell = Cell(FAIL, "; ".join(r.problems[:3]) or f"verdict {r.verdict}")
        runs.append(SmokeRun(file=name, state=got.state, variant=str(plan.get("variant", "")), arch=str(plan.get("arch", "")),
                             mode=str(plan.get("mode", "")), uid=_int(plan.get("uid")), memory_bytes=_int(plan.get("memory_bytes")),
                             image=str(plan.get("ref", "")), cell=cell, seconds=r.seconds, stages=stages,
                             problems=list(r.problems), notes=[str(n) for n in report.get("notes") or []],
                             negative=", ".join(negative_markers(plan))))
    return runs + cluster_runs(records, arches)


def cluster_runs(records: Records, arches: set[tuple[str, str]]) -> list[SmokeRun]:
    """The cluster smoke (scheduler + N worker containers): one stage per phase, every worker's
    tiers added up; it reached disk when the workers' spill files held bytes."""
    runs = []
    for got in records.cluster:
        name = got.state.path.rsplit("/", 1)[-1]
        if not got.ok:
            vid, arch = _owner(name, arches)
            runs.append(SmokeRun(file=name, state=got.state, variant=vid, arch=arch, mode="cluster", cell=_unread(got)))
            continue
        r = got.value
        stages = [SmokeStage(name=f"{phase} ({len(workers)} workers)", data_bytes=r.data_bytes, device_bytes=0,
                             host_bytes=_total(workers, "memory_bytes"), disk_bytes=_total(workers, "disk_bytes"),
                             spill_files=_total(workers, "spill_files"),
                             spill_file_bytes=_total(workers, "spill_file_bytes"), spill_tier="disk",
                             result_ok=r.result_exact, seconds=r.job_seconds.get(phase))
                  for phase, workers in r.tiers.items()]
        passed = r.verdict == "PASS" and not r.problems
        cell = (Cell(PASS, f"{r.workers} workers{', one killed' if r.kill_worker else ''}; result exact")
                if passed else Cell(FAIL, "; ".join(r.problems[:3]) or f"verdict {r.verdict}"))
        runs.append(SmokeRun(file=name, state=got.state, variant=r.variant, arch=r.arch,
                             mode=f"cluster x{r.workers}" + (" kill" if r.kill_worker else ""), uid=r.uid,
                             memory_bytes=r.memory_bytes, image=r.ref, cell=cell, seconds=r.seconds, stages=stages,
                             problems=list(r.problems), notes=list(r.notes), scraped=scraped_workers(r)))
    return runs


def scraped_workers(r) -> list[ScrapedWorker]:
    """Pure: the highest values each worker's /metrics gave the cluster smoke (--metrics)."""
    return [ScrapedWorker(worker=c.name.removeprefix(r.network.removesuffix("-net") + "-"), scrapes=c.metrics.scrapes,
                          failures=c.metrics.failures,
                          cgroup_peak_bytes=c.metrics.highest.get("rapidship_cgroup_memory_peak_bytes"),
                          working_set_bytes=c.metrics.highest.get("rapidship_cgroup_memory_working_set_bytes"),
                          spill_dir_bytes=c.metrics.highest.get("rapidship_spill_dir_used_bytes"),
                          spill_written_bytes=c.metrics.highest.get('dask_worker_spill_bytes_total{activity="disk-write"}'),
                          oom_kills=c.metrics.highest.get(OOM_KILLS))
            for c in r.containers if c.metrics is not None]


def _total(workers: list[ClusterTiers], key: str) -> int:
    return sum(getattr(w, key) for w in workers)


def _owner(file_name: str, arches: set[tuple[str, str]]) -> tuple[str, str]:
    """The variant x arch a record file is named after (<variant>-<arch>-...), longest id first."""
    return next(((v, a) for v, a in sorted(arches, key=lambda k: -len(k[0])) if file_name.startswith(f"{v}-{a}-")),
                ("", ""))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _stage(s: dict) -> SmokeStage:
    tiers = {t.get("name"): t for t in s.get("tiers") or [] if isinstance(t, dict)}

    def tier(*names: str) -> int:
        return sum(int(tiers[n].get("bytes") or 0) for n in names if n in tiers)

    seconds = s.get("seconds")
    total = seconds.get("total") if isinstance(seconds, dict) else seconds
    return SmokeStage(name=str(s.get("name", "")), data_bytes=int(s.get("data_bytes") or 0),
                      device_bytes=tier("device"), host_bytes=tier("host", "memory"), disk_bytes=tier("disk"),
                      spill_files=int(s.get("spill_files") or 0), spill_file_bytes=int(s.get("spill_file_bytes") or 0),
                      spill_tier=str(s.get("spill_tier", "disk")), result_ok=bool(s.get("result_ok")),
                      seconds=float(total) if isinstance(total, (int, float)) else None, error=str(s.get("error") or ""))


# ---- sizes, bytes, scans ---------------------------------------------------------------------

def released_name(arch: str, push: Got, build) -> str:
    """The name the release pushed (and signed) this image under: registry/repository:tag@digest from
    push.json; before a push (or a push of another image) the build's release name, never the run's
    engine name (config.matrix.run_id)."""
    pushed = push.value.arches.get(arch) if push.ok else None
    if pushed and (build is None or not pushed.image_id or pushed.image_id == build.image_id):
        return f"{push.value.registry}/{push.value.repository}:{pushed.tag}@{pushed.digest}"
    return build.release_name if build else ""


def size_row(vid: str, arch: str, budget: int, img: ImageRecords) -> SizeRow:
    if not img.build.ok:
        return SizeRow(vid, arch, None, None, budget, _unread(img.build))
    b = img.build.value
    over = [what for what, n in (("uncompressed", b.size_bytes), ("zstd", b.zstd_bytes)) if n > budget]
    if over:
        cell = Cell(FAIL, f"{' and '.join(over)} over the {gb(budget)} budget")
    else:
        cell = Cell(PASS, f"{gb(budget - b.size_bytes)} headroom")
    return SizeRow(vid, arch, b.size_bytes, b.zstd_bytes, budget, cell)


def bytes_report(vid: str, arch: str, got: Got) -> BytesReport:
    if not got.ok:
        return BytesReport(vid, arch, got.state)
    r = got.value
    trims = r.trims or {}
    prune = r.prune or {}
    totals = prune.get("totals") or {}
    before, after = totals.get("arch_before") or {}, totals.get("arch_after") or {}
    plan, delta = r.layers or {}, r.delta_cost or {}
    return BytesReport(
        vid, arch, got.state, files_bytes=r.files_bytes, files=r.files,
        largest_dirs=[PathBytes(p.path, p.bytes) for p in r.largest_dirs[:TOP_PATHS]],
        largest_files=[PathBytes(p.path, p.bytes) for p in r.largest_files[:TOP_PATHS]],
        trims_style=str(trims.get("style", "")), trims_before=int(trims.get("before_bytes") or 0),
        trims_saved=int(trims.get("trimmed_bytes") or 0), trims_pyc=int(trims.get("pyc_bytes") or 0),
        trims=sorted((PathBytes(str(k), int(v), str((trims.get("why") or {}).get(k, ""))) for k, v in (trims.get("patterns") or {}).items()),
                     key=lambda p: -p.bytes),
        prune_keep=list(prune.get("keep") or []), prune_saved=int(totals.get("saved_bytes") or 0),
        prune_before=int(totals.get("bytes_before") or 0), prune_after=int(totals.get("bytes_after") or 0),
        prune_counts={k: int(totals.get(k) or 0) for k in ("with_device_code", "pruned", "refused")} if totals else {},
        prune_archs=[PruneArch(str(a), int(n), int(after.get(a, 0))) for a, n in sorted(before.items())],
        prune_files=[PruneFile(str(f.get("path", "")), str(f.get("status", "")), int(f.get("bytes_before") or 0),
                               int(f.get("bytes_after") or 0), str(f.get("reason") or f.get("layout") or ""))
                     for f in (prune.get("files") or [])[:TOP_PATHS] if isinstance(f, dict)],
        layer_budget=int(plan.get("budget") or 0),
        env_layers=[EnvLayer(str(layer["name"]), str(layer["why"]), int(layer.get("bytes") or 0),
                             ", ".join(layer.get("distributions") or [])) for layer in plan.get("layers") or []],
        delta_goal=str(delta.get("goal", "")), delta_misses=int(delta.get("misses") or 0),
        delta_rows=[DeltaCostRow(str(row["distribution"]), int(row["carried_bytes"]), int(row["own_bytes"]),
                                 float(row["ratio"]), bool(row["within_goal"]), int(row.get("refed_bytes") or 0))
                    for row in delta.get("rows") or []],
        delta_per_year=per_year_words(delta["per_year"]) if delta.get("per_year") else "")


def scan_row(vid: str, arch: str, img: ImageRecords) -> ScanRow:
    got = img.decision
    cell = trivy_cell(got, img.build)
    if not got.ok:
        return ScanRow(vid, arch, cell)
    r = got.value
    counts = {sev: {o: int(n) for o, n in (r.counts.get(sev) or {}).items()} for sev in SEVERITIES}
    counts |= {sev: dict(c) for sev, c in r.counts.items() if sev not in counts}
    failing = [v.get("reason", "") for v in r.verdicts if v.get("outcome") == "fail"]
    problems = r.reasons[:len(r.reasons) - len(failing)]
    return ScanRow(vid, arch, cell, artifact=r.artifact, trivy_version=r.trivy_version,
                   db_updated=str((r.db or {}).get("UpdatedAt", "")), decided_on=r.decided_on,
                   threshold=str(r.policy.get("threshold", "")), policy_source=str(r.policy.get("source", "")),
                   os=r.os, packages=r.packages, counts=counts, failing=(problems + failing)[:TOP_FAILING],
                   notes=list(r.notes), findings=findings(r.verdicts), sbom=img.sbom)


def findings(verdicts: list[dict]) -> list[ScanFinding]:
    """Every finding with its id, worst severity first (decision.json keeps them all)."""
    def what(v: dict) -> str:
        if v.get("package"):
            fixed = f" (fixed in {v['fixed']})" if v.get("fixed") else ""
            return f"{v['package']} {v.get('installed', '')}".strip() + fixed
        return ": ".join(str(v[k]) for k in ("target", "title") if v.get(k))

    rank = {sev: n for n, sev in enumerate(SEVERITIES)}
    rows = [ScanFinding(str(v.get("id", "")), str(v.get("severity", "UNKNOWN")), what(v), str(v.get("outcome", "")))
            for v in verdicts]
    return sorted(rows, key=lambda f: rank.get(f.severity, len(rank)))[:TOP_FINDINGS]


def allowlist(images: dict[tuple[str, str], ImageRecords], today: date) -> list[AllowRow]:
    """Every allowlist entry of the policies the scans were decided under, once, with the scans that carried it."""
    entries: dict[tuple, list[str]] = {}
    for (vid, arch), img in images.items():
        if not img.decision.ok:
            continue
        for entry in img.decision.value.policy.get("allowlist") or []:
            if not isinstance(entry, dict):
                continue
            key = (str(entry.get("id", "")), str(entry.get("package") or ""), str(entry.get("reason", "")),
                   str(entry.get("expires", "")))
            entries.setdefault(key, []).append(f"{vid} {arch}")
    rows = [AllowRow(i, pkg, reason, expires, _days_left(expires, today), names)
            for (i, pkg, reason, expires), names in entries.items()]
    return sorted(rows, key=lambda r: (r.days_left if r.days_left is not None else -10**6, r.id))


def _days_left(expires: str, today: date) -> int | None:
    try:
        return (date.fromisoformat(expires) - today).days
    except ValueError:
        return None


# ---- signatures, exports, versions -----------------------------------------------------------

def sign_row(vid: str, rec: VariantRecords, in_release: set[tuple[str, str]] | None = None) -> SignRow:
    """`in_release`: the release's variant x arch (None: every arch sign.json signs)."""
    row: dict[str, Any] = {}
    if rec.sign.ok:
        s = rec.sign.value
        row |= {"key_fingerprint": s.key_fingerprint, "signed_at": s.signed_at, "index_digest": s.index.digest,
                "arches": [SignedArch(a, d.digest, d.signature, d.attestations, d.image_id) for a, d in sorted(s.arches.items())
                           if in_release is None or (vid, a) in in_release]}
    if rec.push.ok:
        p = rec.push.value
        row |= {"pushed_to": f"{p.registry}/{p.repository}:{p.tag}", "pushed_index": p.index_digest,
                "gates_skipped": p.gates_skipped}
    if rec.promote.ok:
        p = rec.promote.value
        row |= {"promoted_to": f"{p.registry}/{p.target}:{p.tag}", "promoted_digest": p.digest,
                "promote_verified_with": p.verified_with}
    return SignRow(vid, rec.sign.state, rec.push.state, rec.promote.state, **row)


def export_row(got: Got, built: dict[tuple[str, str], str] | None = None, verified: list[Got] = ()) -> ExportRow:
    """`built`: the image id of each (variant, arch) build record, to flag a disc of another build;
    `verified`: the export-verify records there are (build/<variant>/export-verify.json)."""
    if not got.ok:
        return ExportRow(got.state)
    r = got.value
    built = built or {}

    def stale(i) -> str:
        now = built.get((i.variant, i.arch))
        return f"on the disc {short(i.image_id)}, built {short(now)}" if now and i.variant and now != i.image_id else ""

    return ExportRow(got.state, export_id=r.export_id, created=r.created, media=r.media.name, media_bytes=r.media.bytes,
                     tar_bytes=r.tar_bytes, archive_bytes=r.archive_bytes, archive_sha256=r.archive_sha256,
                     key_fingerprint=r.signing_key_fingerprint,
                     images=[ExportImage(i.ref, i.arch, i.image_id, i.size_bytes, i.signed_digest, i.variant, stale(i))
                             for i in r.images],
                     volumes=[ExportVolume(v.number, v.iso, v.iso_bytes, v.iso_sha256) for v in r.volumes],
                     verify=verify_cell(r, verified))


def verify_cell(disc, verified: list[Got]) -> Cell:
    """The export-verify record bound to this disc: its export id and every ISO's sha256 as export.json lists
    them. PASS when every image was read back with its own id; a record of this export but other ISO
    bytes is STALE; none is NOT RUN (and a record that cannot be read, CORRUPT)."""
    hashes = {v.iso: v.iso_sha256 for v in disc.volumes}
    mine = [g.value for g in verified if g.ok and g.value.export_id == disc.export_id]
    bound = next((rec for rec in mine if rec.iso_sha256 == hashes), None)
    if bound is not None:
        other = {k: v for k, v in bound.images.items() if k != v}
        if other:
            return Cell(FAIL, f"{len(other)} image(s) read back with another id: "
                              + ", ".join(f"{short(k)} -> {short(v)}" for k, v in other.items()))
        return Cell(PASS, f"verified with key {short(bound.verified_with, 23)}, {len(bound.images)} image(s) read back "
                          f"with their own ids, {bound.seconds:.1f} s")
    if mine:
        return Cell(STALE, "export-verify checked ISOs of other hashes than this disc lists",
                    "run invoke release again: its export-verify stage verifies the disc as it is")
    corrupt = next((g for g in verified if not g.ok), None)
    if corrupt is not None:
        return _unread(corrupt)
    return Cell(MISSING, "no export-verify record of this disc", "invoke release runs export-verify and records it "
                             "(build/<variant>/export-verify.json); invoke export-verify --from DIR --key cosign.pub checks it")


def version_row(v, rec: VariantRecords, images: dict[tuple[str, str], ImageRecords],
                in_release: set[tuple[str, str]] | None = None) -> VersionRow:
    """`in_release`: the release's variant x arch (None: every arch of the variant)."""
    per_arch = []
    for arch in (a.value for a in v.arches if in_release is None or (v.id, a.value) in in_release):
        img = images[(v.id, arch)]
        labels: dict[str, str] = {}
        if img.gates.ok:
            gate = next((g for g in img.gates.value.gates if g.gate == "labels"), None)
            labels = dict((gate.details.get("labels") or {}) if gate else {})
        bases = []
        if img.build.ok:
            for stage, base in sorted((img.build.value.extra.get("bases") or {}).items()):
                if isinstance(base, dict):
                    bases.append(BaseImage(str(stage), str(base.get("ref", "")), str(base.get("id", "")),
                                           [str(d) for d in base.get("repo_digests") or []]))
        per_arch.append(ImageVersions(
            arch=arch, built=img.build.ok, image_id=img.build.value.image_id if img.build.ok else "",
            lock_sha256=img.build.value.lock_sha256 if img.build.ok else "",
            label_lock_sha256=str(labels.get(LOCK_LABEL, "")),
            labels={k: str(labels[key]) for k, key in LABEL_KEYS.items() if key in labels}, bases=bases,
            content_digest=img.content.value.digest if img.content.ok else "",
            content_files=img.content.value.files if img.content.ok else 0))
    return VersionRow(variant=v.id, rapids=v.rapids, cuda=v.cuda or "none", python=v.python,
                      os=f"{v.distro} {v.os_version}", flavour=getattr(v.flavour, "value", str(v.flavour)),
                      gpu_archs=v.gpu_archs_label(), budget_bytes=v.budget_bytes,
                      rendered_lock_sha256=rec.render.value.lock_sha256 if rec.render.ok else "",
                      render=rec.render.state, images=per_arch)


# ---- all of it -------------------------------------------------------------------------------

def summarize(records: Records, *, today: date, generated_at: str, commit: str,
              variants: list[str] | None = None, arches: list[str] | None = None) -> Summary:
    scope = release_scope(records, variants, arches)
    in_release = set(scope.images)
    runs = [r for r in smoke_runs(records) if (r.variant, r.arch) in in_release or not r.variant]  # "": its owner unknown
    rows, sizes, bytes_, scans = [], [], [], []
    states: list[RecordState] = []
    in_scope = [v for v in records.variants if any(vid == v.id for vid, _ in scope.images)]
    for v in records.variants:
        rec = records.per_variant[v.id]
        variant_states = [rec.render.state, rec.push.state, rec.promote.state, rec.sign.state, rec.harbor.state]
        states += variant_states if v in in_scope else [st for st in variant_states if st.state != MISSING]
        for arch in (a.value for a in v.arches):
            img = records.images[(v.id, arch)]
            image_states = [img.build.state, img.gates.state, img.content.state, img.decision.state, img.size.state]
            if (v.id, arch) not in scope.images:  # out of scope: listed once; only a record that is there is shown
                states += [st for st in image_states if st.state != MISSING]
                continue
            states += image_states
            mine = [r for r in runs if (r.variant, r.arch) == (v.id, arch)]
            cells = {"build": build_cell(img.build), **gate_cells(img.gates, img.build),
                     "trivy": trivy_cell(img.decision, img.build), "harbor": harbor_cell(arch, rec.harbor, rec.push),
                     "smoke": smoke_cell(mine, img.build, gpu=bool(v.cuda)),
                     "signature": signature_cell(arch, rec.sign, img.build)}
            b = img.build.value if img.build.ok else None
            rows.append(ImageRow(v.id, arch, released_name(arch, rec.push, b) or v.ref(arch), b.image_id if b else "",
                                 cells, engine_ref=b.ref if b else ""))
            sizes.append(size_row(v.id, arch, v.budget_bytes, img))
            bytes_.append(bytes_report(v.id, arch, img.size))
            scans.append(scan_row(v.id, arch, img))
    states += [g.state for g in (*records.smoke, *records.cluster, *records.exports)]
    chains = [records.per_variant[v.id].release for v in in_scope if records.per_variant[v.id].release is not None]
    states += [g.state for g in chains]
    verified = [v.export_verify for v in records.per_variant.values() if v.export_verify is not None]
    states += [g.state for g in verified]
    return Summary(
        generated_at=generated_at, today=today.isoformat(), commit=commit, workspace=records.root,
        rows=rows, sizes=sizes, bytes=bytes_, scans=scans, smoke=runs,
        allowlist=allowlist({k: i for k, i in records.images.items() if k in in_release}, today),
        signatures=[sign_row(v.id, records.per_variant[v.id], in_release) for v in in_scope],
        exports=[export_row(g, {k: i.build.value.image_id for k, i in records.images.items() if i.build.ok}, verified)
                 for g in records.exports],
        versions=[version_row(v, records.per_variant[v.id], records.images, in_release) for v in in_scope],
        records=states, scope=scope, releases=[release_run(g.value) for g in chains if g.ok])


def release_run(r) -> ReleaseRun:
    """The stage timeline of `invoke release`'s last run (its record, build/<variant>/release.json)."""
    return ReleaseRun(variant=r.variant, arches=list(r.arches), started_at=r.started_at, seconds=r.seconds,
                      passed=r.passed, stopped_at=r.stopped_at, since=r.since,
                      steps=[ReleaseStep(s.name, s.verdict, s.started_at, s.seconds, s.read_bytes, s.written_bytes,
                                         s.record, s.why) for s in r.stages])
