"""Hand-made records for the report's tests, written through the workspace as the stages write them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from rapidship.imagebuild.size_report import PathSize, SizeReport
from rapidship.export.write import ExportRecord, ImageRecord, Media, PartRecord, VolumeRecord
from rapidship.records import (ArchImage, BuiltImage, GateReport, GatesRecord, PushRecord, ScanRecord, SignedDigest,
                               SignRecord, Workspace, save)
from rapidship.report.collect import collect
from rapidship.report.summary import summarize
from rapidship.smoke.run import SmokeResult

TODAY = date(2026, 12, 1)
VARIANT, ARCH = "cpu-debian12", "amd64"
IMAGE_ID = "sha256:" + "a" * 64
OTHER_ID = "sha256:" + "b" * 64
GATES = ("size", "labels", "user", "suid", "secrets")


def built(image_id: str = IMAGE_ID, size: int = 253_510_694, zstd: int = 82_694_784) -> BuiltImage:
    return BuiltImage(variant=VARIANT, arch=ARCH, ref="rapidship/dask:26.10-cpu-debian12-py3.11-amd64", image_id=image_id,
                      size_bytes=size, zstd_bytes=zstd, layers=7, seconds=41.2, lock_sha256="e3b1" + "0" * 60,
                      base="debian:bookworm-slim", log="build/cpu-debian12/build-amd64.log",
                      extra={"bases": {"RUNTIME_BASE": {"ref": "debian:bookworm-slim", "id": "sha256:" + "c" * 64,
                                                        "repo_digests": ["debian@sha256:" + "d" * 64]}}})


def gates(image_id: str = IMAGE_ID, failing: dict[str, str] | None = None, only: tuple[str, ...] = GATES) -> GatesRecord:
    failing = failing or {}
    reports = [GateReport(gate=g, passed=g not in failing, reasons=[failing[g]] if g in failing else [],
                          details={"labels": {"io.rapidship.rapids.version": "26.10",
                                              "io.rapidship.lock.sha256": "e3b1" + "0" * 60}} if g == "labels" else {})
               for g in only]
    return GatesRecord(ref="rapidship/dask:x", image_id=image_id, arch=ARCH, passed=not failing, gates=reports)


def allow(id_: str, days: int, reason: str = "planted by the tests; not reachable in this image") -> dict:
    return {"id": id_, "reason": reason, "expires": (TODAY + timedelta(days=days)).isoformat(), "package": None}


def decision(passed: bool = True, allowlist: list[dict] | None = None, reasons: list[str] | None = None,
             verdicts: list[dict] | None = None) -> ScanRecord:
    counts = {"CRITICAL": {}, "HIGH": {"unfixed-ignored": 1}, "MEDIUM": {"allowlisted": 1}, "LOW": {"below-threshold": 2},
              "UNKNOWN": {}}
    if not passed:
        counts["HIGH"] = {"fail": 1}
    return ScanRecord(artifact="rapidship/dask:x", image_id=IMAGE_ID, variant=VARIANT, arch=ARCH, passed=passed,
                      reasons=reasons or [],
                      notes=[], counts=counts, policy={"source": "policy/trivy.yaml", "threshold": "MEDIUM",
                                                       "allowlist": allowlist or []},
                      os="debian 12.12", packages=91, trivy_version="0.59.1", db={"UpdatedAt": "2026-11-30T00:00:00Z"},
                      outputs={}, seconds=3.1, decided_on=TODAY.isoformat(), verdicts=verdicts or [])


def size_report(largest: str = "/opt/rapids/lib/python3.11/site-packages") -> SizeReport:
    return SizeReport(variant=VARIANT, arch=ARCH, ref="rapidship/dask:x", image_bytes=253_510_694, zstd_bytes=82_694_784,
                      budget_bytes=4_700_000_000, files_bytes=240_000_000, files=9000,
                      largest_dirs=[PathSize(largest, 150_000_000), PathSize("/usr/lib", 60_000_000)],
                      largest_files=[PathSize("/opt/rapids/lib/libx.so", 30_000_000)],
                      trims={"style": "pip", "before_bytes": 300_000_000, "trimmed_bytes": 60_000_000, "pyc_bytes": 1_000,
                             "patterns": {"tests/": 40_000_000, "*.a": 20_000_000}},
                      prune={"keep": [80, 90], "totals": {"saved_bytes": 500_000_000, "bytes_before": 800_000_000,
                                                          "bytes_after": 300_000_000, "with_device_code": 8, "pruned": 7,
                                                          "refused": 1, "arch_before": {"sm_80": 10, "sm_90": 20},
                                                          "arch_after": {"sm_90": 20}},
                             "files": [{"path": "/opt/rapids/lib/libcudf.so", "status": "pruned", "bytes_before": 900,
                                        "bytes_after": 200, "reason": "", "layout": "segment split"}]})


def smoke(verdict: str = "PASS", problems: list[str] | None = None, ref: str = IMAGE_ID, disk: int = 1_200_000_000,
          uid: int = 1001) -> SmokeResult:
    stage = {"name": "cpu-dask", "data_bytes": 2 * 2**30, "limits": {"memory": 2**29},
             "tiers": [{"name": "memory", "keys": 10, "bytes": 500_000_000}, {"name": "disk", "keys": 20, "bytes": disk}],
             "spill_files": 20 if disk else 0, "spill_file_bytes": disk, "result_ok": verdict == "PASS",
             "seconds": {"persist": 3.0, "total": 9.5}, "spill_tier": "disk"}
    return SmokeResult(plan={"variant": VARIANT, "arch": ARCH, "ref": ref, "mode": "cpu", "uid": uid,
                             "memory_bytes": 2**30}, argv=["docker", "run"], exit_code=0 if verdict == "PASS" else 1,
                       oom_killed=False, seconds=14.2, verdict=verdict, problems=problems or [],
                       report={"stages": [stage], "notes": []}, stderr_tail="")


def push() -> PushRecord:
    return PushRecord(variant=VARIANT, registry="127.0.0.1:5000", repository="staging/dask", tag="26.10-cpu",
                      index_digest="sha256:" + "e" * 64, index_media_type="application/vnd.oci.image.index.v1+json",
                      arches={ARCH: ArchImage(arch=ARCH, tag="t-amd64", digest="sha256:" + "f" * 64, size=1, media_type="m",
                                              platform={})}, gates_skipped=False, pushed_at="2026-12-01T10:00:00Z", seconds=3)


def sign(image_id: str = IMAGE_ID) -> SignRecord:
    return SignRecord(variant=VARIANT, registry="127.0.0.1:5000", repository="staging/dask", tag="26.10-cpu",
                      key_fingerprint="sha256:" + "1" * 64, key_reference="cosign.key",
                      index=SignedDigest(digest="sha256:" + "e" * 64, signature="sha256:" + "2" * 64),
                      arches={ARCH: SignedDigest(digest="sha256:" + "f" * 64, signature="sha256:" + "3" * 64,
                                                 attestations="sha256:" + "4" * 64, image_id=image_id,
                                                 predicates={"https://slsa.dev/provenance/v1": "x"})},
                      content_digests={}, signed_at="2026-12-01T10:05:00Z", seconds=1.0)


def export(unsigned: bool = True) -> ExportRecord:
    image = ImageRecord(ref="rapidship/dask:x", tags=[], image_id=IMAGE_ID, repo_digests=[], arch=ARCH, os="linux",
                        size_bytes=253_510_694, layers=[], variant=VARIANT, unsigned=unsigned)
    return ExportRecord(export_id="0123456789abcdef", created="2026-12-01T10:10:00+00:00", tool_version="0.1.0",
                        media=Media("dvd", 4_700_000_000), images=[image],
                        parts=[PartRecord("images.tar.zst.000", 0, 1, 0, 82_000_000, "9" * 64)], archive_bytes=82_000_000,
                        archive_sha256="9" * 64, tar_bytes=253_000_000,
                        volumes=[VolumeRecord(1, "rapidship-01234567-01of01.iso", 83_000_000, "8" * 64, {})])


@dataclass
class Records:
    """A workspace under tmp_path with the records a test wants; `summary()` reads it as the report does."""

    root: Path
    variants: list
    exports: list[Path] = field(default_factory=list)

    @property
    def ws(self) -> Workspace:
        return Workspace(self.root)

    def put(self, path: Path, value) -> Path:
        return save(path, value)

    def full(self, **over) -> "Records":
        """Every stage of cpu-debian12 amd64 recorded and passing."""
        ws = self.ws
        self.put(ws.build(VARIANT, ARCH), over.get("build", built()))
        self.put(ws.gates(VARIANT, ARCH), over.get("gates", gates()))
        self.put(ws.decision(VARIANT, ARCH), over.get("decision", decision(allowlist=[allow("CVE-2099-1001", 10)])))
        self.put(ws.size(VARIANT, ARCH), over.get("size", size_report()))
        self.put(ws.smoke_dir() / f"{VARIANT}-{ARCH}-cpu-uid1001.json", over.get("smoke", smoke()))
        self.put(ws.push(VARIANT), push())
        self.put(ws.sign(VARIANT), over.get("sign", sign()))
        out = self.root / "export-1"
        self.put(out / "export.json", over.get("export", export()))
        self.exports.append(out)
        return self

    def summary(self, variants: list[str] | None = None, arches: list[str] | None = None):
        return summarize(collect(self.ws, self.variants, self.exports), today=TODAY,
                         generated_at="2026-12-01T12:00:00+00:00", commit="0" * 40, variants=variants, arches=arches)
