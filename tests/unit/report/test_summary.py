"""The release report's verdicts from hand-made records: every variant x arch, and nothing that was
not a pass ever reads as one (missing, corrupt, stale, a gate the record does not list)."""

from __future__ import annotations

import json

from unit.report.samples import ARCH, GATES, OTHER_ID, VARIANT, allow, built, decision, gates, sign, smoke

from rapidship.report.model import COLUMNS, CORRUPT, FAIL, MISSING, PASS, SITE, STALE


def row(summary, variant=VARIANT, arch=ARCH):
    return next(r for r in summary.rows if (r.variant, r.arch) == (variant, arch))


def test_every_variant_and_arch_of_the_matrix_has_a_row_even_with_no_record(records, variants):
    summary = records.summary()
    assert [(r.variant, r.arch) for r in summary.rows] == [(v.id, a.value) for v in variants for a in v.arches]
    assert len(summary.rows) == 10  # every variant on amd64 and arm64
    for r in summary.rows:
        assert set(r.cells) == set(COLUMNS)
        # nothing ran: not run, never passed; what only a site can run says so
        assert {n: c.status for n, c in r.cells.items() if c.status != MISSING} == (
            {"harbor": SITE, "smoke": SITE} if r.variant.startswith("cuda") else {"harbor": SITE})
        assert r.status == MISSING
    assert summary.status == MISSING and summary.count(PASS) == 0
    assert all(s.state == MISSING for s in summary.records)
    assert summary.smoke == [] and summary.exports == []


def test_a_release_where_every_stage_ran_and_passed(records):
    summary = records.full().summary()
    cells = row(summary).cells
    assert {c: cells[c].status for c in COLUMNS} == {c: PASS for c in COLUMNS} | {"harbor": SITE}
    assert "0.25 GB" in cells["build"].detail and "of 4.70 GB" not in cells["build"].detail
    assert "1 run(s) passed, 1 reached disk" == cells["smoke"].detail
    assert cells["signature"].detail.startswith("sha256:ffffffffffff signed with key sha256:1111")
    # only Harbor's scan is left, and only a site can run it: ready for the site, not yet releasable
    assert summary.status == SITE and summary.count(SITE) == 1
    other = row(records.summary(arches=["amd64", "arm64"]), "cpu-debian12", "arm64")
    assert other.cells["build"].status == MISSING and other.cells["signature"].status == MISSING  # not built


def test_a_failing_gate_is_failed_with_its_reason(records):
    summary = records.full(gates=gates(failing={"suid": "/usr/bin/planted has the setuid bit"})).summary()
    cells = row(summary).cells
    assert cells["suid"].status == FAIL and cells["suid"].label == "FAIL"
    assert cells["suid"].detail == "/usr/bin/planted has the setuid bit"
    assert all(cells[g].status == PASS for g in GATES if g != "suid")
    assert row(summary).status == FAIL and summary.status == FAIL


def test_a_gate_the_record_does_not_list_is_not_run_not_passed(records):
    summary = records.full(gates=gates(only=("size", "labels"))).summary()
    cells = row(summary).cells
    assert cells["user"].status == cells["suid"].status == cells["secrets"].status == MISSING
    assert "lists no suid gate" in cells["suid"].detail


def test_a_corrupt_record_shows_as_corrupt_with_the_workspace_message(records):
    records.full()
    records.ws.gates(VARIANT, ARCH).write_text('{"ref": "x", "passed": tr')
    summary = records.summary()
    cells = row(summary).cells
    assert all(cells[g].status == CORRUPT for g in GATES)
    assert "corrupt gate record: not JSON" in cells["size"].detail
    (state,) = summary.corrupt
    assert state.path.endswith("cpu-debian12/gates-amd64.json") and state.writer.startswith("invoke gates")
    assert summary.status == CORRUPT


def test_a_record_of_another_shape_is_corrupt_too(records):
    """ "passed": "true" is not a pass: the workspace reads strictly, and so does the report."""
    records.full()
    path = records.ws.gates(VARIANT, ARCH)
    doc = json.loads(path.read_text())
    doc["gates"][0]["passed"] = "true"
    path.write_text(json.dumps(doc))
    cells = row(records.summary()).cells
    assert cells["size"].status == CORRUPT and "gates.0.passed" in cells["size"].detail
    path.write_text(json.dumps({**doc, "schema_version": 99}))
    assert "newer than this rapidship reads" in row(records.summary()).cells["user"].detail


def test_a_scan_decision_that_is_missing_or_failing(records):
    records.full(decision=decision(passed=False, reasons=["CVE-2099-1002 in zlib1g 1:1.2.13 (no fix published): "
                                                          "HIGH is at or above the threshold MEDIUM"],
                                   verdicts=[{"outcome": "fail", "reason": "CVE-2099-1002 ... HIGH"}]))
    summary = records.summary()
    trivy = row(summary).cells["trivy"]
    assert trivy.status == FAIL and trivy.detail.startswith("CVE-2099-1002 in zlib1g")
    (scan,) = [s for s in summary.scans if s.name == "cpu-debian12 amd64"]
    assert scan.outcome("fail") == 1 and scan.failing == ["CVE-2099-1002 ... HIGH"]
    records.ws.decision(VARIANT, ARCH).unlink()
    assert row(records.summary()).cells["trivy"].status == MISSING


def test_gates_of_another_image_than_the_build_are_stale(records):
    summary = records.full(gates=gates(image_id=OTHER_ID)).summary()
    cells = row(summary).cells
    assert all(cells[g].status == STALE for g in GATES)
    assert cells["size"].label == "STALE" and "PASS for sha256:bbbb" in cells["size"].detail
    assert summary.status == STALE


def test_a_signature_of_another_image_is_stale(records):
    assert row(records.full(sign=sign(image_id=OTHER_ID)).summary()).cells["signature"].status == STALE


def test_smoke_passes_only_when_every_run_of_the_image_passed(records):
    records.full()
    records.put(records.ws.smoke_dir() / f"{VARIANT}-{ARCH}-cpu-uid2000.json",
                smoke("FAIL", ["cpu-dask: NO SPILL: the data stayed in the memory tier"], disk=0, uid=2000))
    summary = records.summary()
    cell = row(summary).cells["smoke"]
    assert cell.status == FAIL and "1 of 2 run(s) failed" in cell.detail and "NO SPILL" in cell.detail
    runs = {r.uid: r for r in summary.smoke}
    assert runs[1001].stages[0].reached_disk and not runs[2000].stages[0].reached_disk
    assert runs[1001].stages[0].host_bytes == 500_000_000 and runs[1001].stages[0].seconds == 9.5


def test_a_corrupt_smoke_record_is_charged_to_its_image(records):
    records.full()
    (records.ws.smoke_dir() / f"{VARIANT}-{ARCH}-cpu-uid7.json").write_text("[1, 2")
    summary = records.summary()
    cell = row(summary).cells["smoke"]
    assert cell.status == CORRUPT and "cpu-uid7.json" in cell.detail
    assert [r.state.state for r in summary.smoke].count(CORRUPT) == 1


def test_smoke_runs_of_an_older_image_are_stale(records):
    assert row(records.full(smoke=smoke(ref=OTHER_ID)).summary()).cells["smoke"].status == STALE


def test_allowlist_entries_with_their_reason_and_expiry(records):
    entries = [allow("CVE-2099-1001", 10), allow("CVE-2099-1005", 45), allow("CVE-2099-1006", -3),
               allow("CVE-2099-1007", 30)]
    summary = records.full(decision=decision(allowlist=entries)).summary()
    states = {a.id: (a.state, a.days_left) for a in summary.allowlist}
    assert states == {"CVE-2099-1001": ("expiring", 10), "CVE-2099-1005": ("ok", 45),
                      "CVE-2099-1006": ("expired", -3), "CVE-2099-1007": ("expiring", 30)}
    assert [a.id for a in summary.allowlist][0] == "CVE-2099-1006"  # soonest (already expired) first
    assert summary.allowlist[1].images == ["cpu-debian12 amd64"]
    assert summary.allowlist[1].reason == "planted by the tests; not reachable in this image"


def test_sizes_against_the_budget(records):
    summary = records.full(build=built(size=5_000_000_000, zstd=3_000_000_000)).summary()
    (size,) = [s for s in summary.sizes if s.image_bytes is not None]
    assert size.cell.status == FAIL and size.cell.detail == "uncompressed over the 4.70 GB budget"
    (bytes_,) = [b for b in summary.bytes if b.state.state == "ok"]
    assert bytes_.trims_saved == 60_000_000 and bytes_.prune_saved == 500_000_000 and bytes_.prune_keep == [80, 90]
    assert [p.path for p in bytes_.trims] == ["tests/", "*.a"]


def test_versions_exports_and_signatures(records):
    summary = records.full().summary()
    (v,) = [v for v in summary.versions if v.variant == VARIANT]
    assert (v.rapids, v.cuda, v.python, v.gpu_archs) == ("26.10", "none", "3.11", "none")
    amd = v.images[0]
    assert amd.lock_sha256 == amd.label_lock_sha256 and amd.labels["rapids"] == "26.10"
    assert amd.bases[0].repo_digests == ["debian@sha256:" + "d" * 64]
    (e,) = summary.exports
    assert e.volumes[0].iso_sha256 == "8" * 64 and e.images[0].signed_digest == "" and e.key_fingerprint == ""
    (g,) = [g for g in summary.signatures if g.variant == VARIANT]
    assert g.push.state == "ok" and g.promote.state == MISSING and g.pushed_to == "127.0.0.1:5000/staging/dask:26.10-cpu"


def test_an_export_folder_without_its_record_is_missing(records):
    records.full()
    (records.root / "export-2").mkdir()
    records.exports.append(records.root / "export-2")
    summary = records.summary()
    assert [e.state.state for e in summary.exports] == ["ok", MISSING]


def test_a_built_arch_that_sign_json_does_not_sign_fails(records):
    records.full()
    records.put(records.ws.build(VARIANT, "arm64"), built().model_copy(update={"arch": "arm64"}))
    cell = row(records.summary(variants=[VARIANT]), VARIANT, "arm64").cells["signature"]
    assert cell.status == FAIL and cell.detail == "sign.json signs no arm64 image, but one was built"


def test_export_folders_from_globs_and_names(tmp_path, monkeypatch):
    from pathlib import Path

    from rapidship.report.collect import export_dirs

    for name in ("export-a", "export-b"):
        (tmp_path / "build" / name).mkdir(parents=True)
    (tmp_path / "build" / "export-file").write_text("")  # a file is no export folder
    monkeypatch.chdir(tmp_path)
    found = export_dirs(["build/export-*", "export/*", "build/export-a", "named-but-absent"])
    assert found == [Path("build/export-a"), Path("build/export-b"), Path("named-but-absent")]  # each once


def cluster_record(verdict="PASS", problems=(), **over) -> dict:
    """The fields of build/smoke/<v>-<a>-cluster<N>-uid<uid>.json the report reads (the record has more)."""
    worker = {"worker": "w0", "memory_keys": 3, "memory_bytes": 300_000_000, "disk_keys": 9, "disk_bytes": 900_000_000,
              "spill_files": 9, "spill_file_bytes": 900_000_000, "sent_bytes": 1, "rss_peak_bytes": 1, "oom_kills": 0}
    return {"variant": VARIANT, "arch": ARCH, "ref": "sha256:" + "a" * 64, "uid": 1001, "workers": 2,
            "network": "n", "network_internal": True, "memory_bytes": 2**30, "memory_limit": 2**29,
            "service_memory_bytes": 2**29, "data_bytes": 3 * 2**30, "kill_worker": False, "killed": None,
            "killed_after_s": None, "argv": {}, "containers": [], "expected": 1, "got": 1,
            "tiers": {"persisted": [worker, {**worker, "worker": "w1"}], "shuffled": [worker, worker]},
            "result_exact": verdict == "PASS", "seconds": 61.0, "job_seconds": {"persisted": 20.5, "shuffled": 30.1},
            "verdict": verdict, "problems": list(problems), "notes": [], "report": None, "logs_tail": {}, **over}


def test_cluster_smoke_records_are_runs_of_their_own_not_corrupt_single_runs(records):
    records.full()
    smoke_dir = records.ws.smoke_dir()
    records.put(smoke_dir / f"{VARIANT}-{ARCH}-cluster2-uid1001.json", cluster_record())
    summary = records.summary()
    assert not summary.corrupt
    cluster = next(r for r in summary.smoke if r.mode.startswith("cluster"))
    assert cluster.mode == "cluster x2" and cluster.cell.status == PASS
    persisted = cluster.stages[0]
    assert (persisted.name, persisted.disk_bytes, persisted.spill_files, persisted.seconds) == (
        "persisted (2 workers)", 1_800_000_000, 18, 20.5)
    assert persisted.reached_disk and row(summary).cells["smoke"].detail == "2 run(s) passed, 2 reached disk"
    records.put(smoke_dir / f"{VARIANT}-{ARCH}-cluster2-kill-uid1001.json",
                cluster_record("FAIL", ["the job did not finish after a worker was killed"], kill_worker=True))
    cell = row(records.summary()).cells["smoke"]
    assert cell.status == FAIL and "did not finish after a worker was killed" in cell.detail
    (smoke_dir / f"{VARIANT}-{ARCH}-cluster3-uid1001.json").write_text('{"variant": 1}')
    assert row(records.summary()).cells["smoke"].status == CORRUPT


def test_a_gate_record_that_contradicts_itself_is_corrupt_for_the_report_and_for_push(records):
    """passed: false with every gate listed (one twice) and passing read PASS here while push refused it."""
    from rapidship.config.matrix import load_matrix
    from rapidship.publish.push import check_gates
    from support.commands import ROOT

    records.full()
    path = records.ws.gates(VARIANT, ARCH)
    doc = json.loads(path.read_text())
    doc["passed"] = False
    doc["gates"].append(dict(doc["gates"][0]))
    path.write_text(json.dumps(doc))
    cells = row(records.summary()).cells
    assert all(cells[g].status == CORRUPT for g in GATES)
    assert "gate(s) listed twice" in cells["size"].detail
    v = load_matrix(ROOT / "variants.yaml").get(VARIANT)
    image_id = json.loads(records.ws.build(VARIANT, ARCH).read_text())["image_id"]
    problems = check_gates(records.ws, v, {a.value: image_id for a in v.arches})
    assert any("gate record of another shape" in p and "listed twice" in p for p in problems)
    doc["gates"].pop()  # no repeat, but passed still contradicts the gates
    path.write_text(json.dumps(doc))
    assert "its gates say true" in row(records.summary()).cells["size"].detail


def test_a_deliberate_negative_run_gets_its_own_record_and_never_the_verdict(records, tmp_path):
    """spill.md's --no-spill-mount example wrote the passing run's record name: the report showed
    FAIL until the pass was run again."""
    from rapidship.smoke.run import record_name, write_record
    from unit.report.samples import smoke

    records.full()
    good = smoke()
    bad = smoke(verdict="FAIL", problems=["spill dir /spill is on a read-only filesystem"])
    bad.plan.update(spill_host_dir=None)
    good.plan.update(spill_host_dir="/var/tmp/x", spill_owner=1001)
    assert record_name(bad.plan) != record_name(good.plan) and "-negative-no-spill-mount" in record_name(bad.plan)
    write_record(good, records.ws.smoke_dir())
    write_record(bad, records.ws.smoke_dir())
    assert row(records.summary()).cells["smoke"].status == PASS


def test_a_cluster_smoke_with_metrics_shows_what_each_worker_s_metrics_said(records):
    from rapidship.report.page import render
    from rapidship.smoke.scrape import OOM_KILLS

    records.full()
    scraped = {"target": "172.18.0.3:8788", "scrapes": 25, "failures": 1,
               "highest": {"rapidship_cgroup_memory_peak_bytes": 2**30, "rapidship_spill_dir_used_bytes": 1.6e9,
                           'dask_worker_spill_bytes_total{activity="disk-write"}': 1.6e10, OOM_KILLS: 1}}
    worker = {"name": "c-worker-0", "role": "worker", "memory_bytes": 2**30, "exit_code": None, "oom_killed": False,
              "metrics": scraped}
    plain = {**worker, "name": "c-scheduler", "role": "scheduler", "metrics": None}
    records.put(records.ws.smoke_dir() / f"{VARIANT}-{ARCH}-cluster2-uid1001.json",
                cluster_record(network="c-net", containers=[plain, worker]))
    summary = records.summary()
    cluster = next(r for r in summary.smoke if r.mode.startswith("cluster"))
    (w,) = cluster.scraped                         # the scheduler was not scraped: no row
    assert (w.worker, w.scrapes, w.failures, w.cgroup_peak_bytes, w.spill_written_bytes, w.oom_kills) == (
        "worker-0", 25, 1, 2**30, 1.6e10, 1)
    assert w.working_set_bytes is None             # never reported: shown as "-", not 0
    html = render(summary, {})
    assert "what each worker&#39;s /metrics said" in html or "what each worker's /metrics said" in html
    assert "25 (1 failed)" in html and "16.000 GB" in html


def test_an_export_written_anywhere_is_found_through_the_workspace_pointer(records, tmp_path):
    """The quickstart's disc is build/disc: export leaves a pointer in the workspace, report follows it."""
    from rapidship.export.write import record_location
    from rapidship.report.collect import recorded_exports
    from unit.report.samples import export

    disc = records.root / "disc"
    records.put(disc / "export.json", export())
    record_location(records.ws, disc, "0123456789abcdef")
    elsewhere = tmp_path / "media" / "site-a"
    records.put(elsewhere / "export.json", export())
    record_location(records.ws, elsewhere, "fedcba9876543210")
    found = recorded_exports(records.ws)
    assert sorted(found) == sorted([disc, elsewhere])
    # the pointer inside the workspace is relative to it: a copied workspace still finds its disc
    assert json.loads(next(records.ws.exports_dir().glob("0123*.json")).read_text())["out"] == "disc"
    records.exports.extend(found)
    assert [e.export_id for e in records.summary().exports] == ["0123456789abcdef", "0123456789abcdef"]


def test_the_release_scope_comes_from_the_push_records(records, variants):
    """push.json of cpu-debian12 names amd64: that is the release; the rest is listed once, not as NOT RUN cells."""
    summary = records.full().summary()
    assert [(r.variant, r.arch) for r in summary.rows] == [(VARIANT, ARCH)]
    assert summary.scope.source == "push records"
    out = {(o.variant, tuple(o.arches)) for o in summary.scope.out_of_scope}
    assert (VARIANT, ("arm64",)) in out and len(out) == len(variants)  # every other variant once, and arm64
    assert summary.count(MISSING) == 0
    assert not [r for r in summary.records if r.state == MISSING and "arm64" in r.path]  # out of scope: not looked for
    assert {s.variant for s in summary.signatures} == {v.variant for v in summary.versions} == {VARIANT}


def test_the_release_scope_from_flags_and_before_any_push_from_the_builds(records):
    records.put(records.ws.build(VARIANT, ARCH), built())
    summary = records.summary()
    assert summary.scope.source == "build records" and [(r.variant, r.arch) for r in summary.rows] == [(VARIANT, ARCH)]
    summary = records.summary(variants=[VARIANT, "cuda12-debian12"], arches=["amd64"])
    assert summary.scope.source == "flags"
    assert sorted((r.variant, r.arch) for r in summary.rows) == [("cpu-debian12", "amd64"), ("cuda12-debian12", "amd64")]
    cuda = row(summary, "cuda12-debian12", "amd64").cells
    assert cuda["build"].status == MISSING  # named in the release: not run is not run
    # checks only a site can run are named so: Harbor's scan, and the GPU smoke of a CUDA image
    assert cuda["harbor"].status == SITE and cuda["smoke"].status == SITE and "GPU" in cuda["smoke"].note
    assert row(summary).cells["smoke"].status == MISSING  # a CPU image's smoke runs anywhere


def test_a_scope_flag_naming_nothing_of_the_matrix_is_one_clear_error(records):
    import pytest

    from rapidship.errors import ConfigError

    with pytest.raises(ConfigError, match="--variant"):
        records.summary(variants=["nope"])
    with pytest.raises(ConfigError, match="--arch"):
        records.summary(variants=[VARIANT], arches=["s390x"])


def test_a_scan_of_another_build_is_stale_with_both_ids_side_by_side(records):
    records.full(decision=decision().model_copy(update={"image_id": OTHER_ID}))
    cell = row(records.summary()).cells["trivy"]
    assert cell.status == STALE
    assert cell.detail == f"PASS for {OTHER_ID[:19]}, built {'sha256:' + 'a' * 12}"
    records.put(records.ws.decision(VARIANT, ARCH), decision().model_copy(update={"image_id": ""}))
    assert row(records.summary()).cells["trivy"].status == STALE  # names no image: push would refuse it too


def test_every_finding_is_listed_with_its_id_and_the_sbom_path(records):
    low = [{"outcome": "below-threshold", "reason": "LOW is below MEDIUM", "kind": "vulnerability", "id": "CVE-2099-2001",
            "severity": "LOW", "target": "debian", "package": "gzip", "installed": "1.12-1", "fixed": "1.12-1+fix1"},
           {"outcome": "below-threshold", "reason": "LOW is below MEDIUM", "kind": "misconfiguration", "id": "DS026",
            "severity": "LOW", "target": "Dockerfile", "title": "No HEALTHCHECK defined"}]
    sbom = records.ws.scan_dir(VARIANT, ARCH) / "sbom.cdx.json"
    records.full(decision=decision(verdicts=low).model_copy(update={"outputs": {"sbom": "elsewhere/sbom.cdx.json"}}))
    sbom.write_text("{}")
    scan = next(s for s in records.summary().scans if (s.variant, s.arch) == (VARIANT, ARCH))
    assert [(f.id, f.severity, f.what, f.outcome) for f in scan.findings] == [
        ("CVE-2099-2001", "LOW", "gzip 1.12-1 (fixed in 1.12-1+fix1)", "below-threshold"),
        ("DS026", "LOW", "Dockerfile: No HEALTHCHECK defined", "below-threshold")]
    assert scan.sbom == str(sbom)  # found beside the decision, in this workspace


def test_a_disc_carrying_another_build_of_an_image_is_stale_side_by_side(records):
    from unit.report.samples import export

    records.full(build=built(image_id=OTHER_ID))  # rebuilt after the disc was written
    (disc,) = records.summary(variants=[VARIANT]).exports
    (image,) = disc.images
    assert image.stale == f"on the disc {'sha256:' + 'a' * 12}, built {OTHER_ID[:19]}"
    records.put(records.ws.build(VARIANT, ARCH), built())
    assert records.summary().exports[0].images[0].stale == ""
    assert export().images[0].image_id == built().image_id


def test_an_amd64_release_has_no_arm64_row_anywhere_but_the_note(records):
    """An earlier `invoke push` of every arch left arm64 in push.json, and arm64's build, smoke and
    signature are there too; the release (its record, as `invoke release --arch amd64` leaves it)
    is amd64: the page's scope is the release's arches, and arm64 is only in "not in this release"."""
    import re
    from dataclasses import replace

    from rapidship.records import ArchImage, ReleaseRecord, ReleaseStage
    from rapidship.release.plan import STAGES
    from rapidship.report.page import render
    from unit.report.samples import push

    arm = "arm64"
    records.full()
    both = push()
    both = both.model_copy(update={"arches": {**both.arches, arm: ArchImage(arch=arm, tag="t-arm64", digest="sha256:" + "7" * 64,
                                                                           size=1, media_type="m", platform={})}})
    records.put(records.ws.push(VARIANT), both)
    records.put(records.ws.build(VARIANT, arm), built().model_copy(update={"arch": arm, "image_id": OTHER_ID}))
    records.put(records.ws.smoke_dir() / f"{VARIANT}-{arm}-cpu-uid1001.json",
                replace(smoke(), plan={**smoke().plan, "arch": arm, "ref": OTHER_ID}))
    signed = sign()
    records.put(records.ws.sign(VARIANT), signed.model_copy(update={"arches": {**signed.arches, arm: signed.arches[ARCH]}}))
    records.put(records.ws.release(VARIANT), ReleaseRecord(variant=VARIANT, arches=[ARCH], started_at="2026-12-01T10:00:00+00:00",
                                                           stages=[ReleaseStage(name=s, verdict="pass") for s in STAGES]))
    for summary in (records.summary(), records.summary(variants=[VARIANT], arches=[ARCH])):  # invoke report; the chain's
        assert summary.scope.images == [(VARIANT, ARCH)]
        assert (VARIANT, [arm]) in [(o.variant, o.arches) for o in summary.scope.out_of_scope]
        assert [(r.variant, r.arch) for r in summary.smoke] == [(VARIANT, ARCH)]
        assert [i.arch for v in summary.versions for i in v.images] == [ARCH]
        assert [a.arch for s in summary.signatures for a in s.arches] == [ARCH]
        html = render(summary, {})
        body = html[html.index('<section id="matrix">'):html.index('<section id="records">')]  # the files read: all
        assert arm not in re.sub(r"<[^>]+>", "", body), re.findall(r".{80}arm64.{40}", body)
    assert records.summary().scope.source == "release records"


def test_the_image_cell_names_the_released_image_not_the_run_s_engine_name(records):
    """Under RAPIDSHIP_RUN_ID the engine's name ends in the run's id; the release pushed and signed
    registry/repository:tag@digest (push.json), and before a push the name signatures and discs use."""
    import re

    from rapidship.report.page import render

    engine = "rapidship/dask:26.10-cpu-debian12-py3.11-amd64-alice"
    records.full(build=built().model_copy(update={"ref": engine, "name": "rapidship/dask:26.10-cpu-debian12-py3.11-amd64"}))
    summary = records.summary()
    pushed = f"127.0.0.1:5000/staging/dask:t-amd64@sha256:{'f' * 64}"
    assert row(summary).ref == pushed
    cell = re.search(r'<td class="ref".*?</td>', render(summary, {}), re.S).group(0)
    assert "127.0.0.1:5000/staging/dask:t-amd64" in cell and "alice" not in re.sub(r'title="[^"]*"', "", cell)
    records.ws.push(VARIANT).unlink()
    records.ws.sign(VARIANT).unlink()
    assert row(records.summary(variants=[VARIANT], arches=[ARCH])).ref == "rapidship/dask:26.10-cpu-debian12-py3.11-amd64"


def test_each_disc_shows_its_export_verify_outcome_bound_to_its_hashes(records):
    """build/<variant>/export-verify.json (invoke release's export-verify stage) names the export and the
    ISO hashes it verified: the disc with those hashes shows it; another disc, or other hashes, does not."""
    import re

    from rapidship.records import ExportVerified
    from rapidship.report.page import render
    from unit.report.samples import IMAGE_ID

    records.full()
    iso = {"rapidship-01234567-01of01.iso": "8" * 64}

    def disc(summary):
        return summary.exports[0].verify

    assert disc(records.summary()).status == MISSING and "invoke release" in disc(records.summary()).note
    proved = ExportVerified(export_id="0123456789abcdef", iso_sha256=iso, verified_with="sha256:" + "1" * 64,
                            images={IMAGE_ID: IMAGE_ID}, seconds=2.5)
    records.put(records.ws.export_verify(VARIANT), proved)
    summary = records.summary()
    assert disc(summary).status == PASS and "1 image(s) read back with their own ids" in disc(summary).detail
    html = render(summary, {})
    section = re.search(r'<section id="exports">.*?</section>', html, re.S).group(0)
    assert re.search(r'export-verify.*?<b>PASS</b>', section, re.S) and "sha256:111111111111111" in section
    records.put(records.ws.export_verify(VARIANT), proved.model_copy(update={"iso_sha256": {iso.popitem()[0]: "9" * 64}}))
    assert disc(records.summary()).status == STALE  # it verified other bytes than this disc's
    records.put(records.ws.export_verify(VARIANT), proved.model_copy(update={"images": {IMAGE_ID: OTHER_ID}}))
    assert disc(records.summary()).status == FAIL  # an image read back with another id
    records.ws.export_verify(VARIANT).write_text("not json")
    assert disc(records.summary()).status == CORRUPT
