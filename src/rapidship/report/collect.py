"""The edge of the report: read every record of every variant x arch through the workspace.

Nothing here stops at a bad record. Each read gives a `Got`: the value, or the record's state
(missing: that stage has not run; corrupt: the workspace's validation refused it, with its
message), so the page can show exactly which record is missing or broken and never a pass for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from rapidship.imagebuild.size_report import SizeReport
from rapidship.config.matrix import Variant
from rapidship.export.write import ExportRecord
from rapidship.records import (BuiltImage, ClusterSmokeRecord, ContentRecord, ExportVerified, GatesRecord, PromoteRecord,
                               PushRecord,
                               RecordError, ReleaseRecord, Rendered, ScanRecord, SignRecord, Workspace, load)
from rapidship.report.model import CORRUPT, MISSING, RecordState
from rapidship.smoke.run import SmokeResult

T = TypeVar("T")
HARBOR_GATE = "harbor-gate.json"  # build/<variant>/harbor-gate.json, written by `invoke harbor.scan`
EXPORT_RECORD = "export.json"
# build/smoke/<v>-<a>-cluster<N>[-kill]-uid<uid>.json: the multi-container cluster smoke (smoke.cluster)
CLUSTER_FILE = re.compile(r"-cluster\d+(-kill)?-uid\d+\.json$")


class HarborGate(BaseModel):
    """build/<variant>/harbor-gate.json: the verdict of Harbor's scan of each pushed arch."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    variant: str
    passed: bool
    scans: list[dict[str, Any]]


@dataclass(frozen=True)
class Got(Generic[T]):
    state: RecordState
    value: T | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class ImageRecords:
    build: Got[BuiltImage]
    gates: Got[GatesRecord]
    decision: Got[ScanRecord]
    size: Got[SizeReport]
    content: Got[ContentRecord]
    sbom: str = ""  # the scan's CycloneDX SBOM where it is now ("" when none is there)


@dataclass(frozen=True)
class VariantRecords:
    render: Got[Rendered]
    push: Got[PushRecord]
    promote: Got[PromoteRecord]
    sign: Got[SignRecord]
    harbor: Got[HarborGate]
    release: Got[ReleaseRecord] | None = None  # invoke release's record (None: the chain never ran here)
    export_verify: Got[ExportVerified] | None = None  # what its export-verify stage proved of a disc (None: never ran)


@dataclass(frozen=True)
class Records:
    root: str
    variants: list[Variant]
    images: dict[tuple[str, str], ImageRecords]
    per_variant: dict[str, VariantRecords]
    smoke: list[Got[SmokeResult]]
    exports: list[Got[ExportRecord]]
    cluster: tuple[Got[ClusterSmokeRecord], ...] = ()


def read(path: Path, kind: type[T], writer: str, what: str) -> Got[T]:
    """One record, never an exception: ok, missing (no file) or corrupt (the workspace says why)."""
    if not path.exists():
        return Got(RecordState(str(path), what, MISSING, f"no {what}: run {writer}", writer))
    try:
        value = load(path, kind, writer, what)
    except RecordError as err:
        return Got(RecordState(str(path), what, CORRUPT, err.problem, writer))
    except OSError as err:  # a directory where the record goes, no permission
        return Got(RecordState(str(path), what, CORRUPT, f"{what} cannot be read ({err.strerror or err})", writer))
    return Got(RecordState(str(path), what, "ok", "", writer), value)


def collect(ws: Workspace, variants: list[Variant], export_dirs: list[Path]) -> Records:
    images: dict[tuple[str, str], ImageRecords] = {}
    per_variant: dict[str, VariantRecords] = {}
    for v in variants:
        vid = v.id
        for arch in (a.value for a in v.arches):
            flags = f"--variant {vid} --arch {arch}"
            decision = read(ws.decision(vid, arch), ScanRecord, f"invoke scan {flags}", "scan decision")
            images[(vid, arch)] = ImageRecords(
                build=read(ws.build(vid, arch), BuiltImage, f"invoke build {flags}", "build record"),
                gates=read(ws.gates(vid, arch), GatesRecord, f"invoke gates {flags}", "gate record"),
                decision=decision, sbom=_sbom(ws.scan_dir(vid, arch), decision),
                size=read(ws.size(vid, arch), SizeReport, f"invoke size-report {flags}", "size report"),
                content=read(ws.content(vid, arch), ContentRecord, f"invoke gates {flags}", "content manifest"))
        per_variant[vid] = VariantRecords(
            render=read(ws.render(vid), Rendered, f"invoke render --variant {vid}", "render record"),
            push=read(ws.push(vid), PushRecord, f"invoke push --variant {vid}", "push record"),
            promote=read(ws.promote(vid), PromoteRecord, f"invoke promote --variant {vid}", "promote record"),
            sign=read(ws.sign(vid), SignRecord, f"invoke sign --variant {vid}", "sign record"),
            harbor=read(ws.variant_dir(vid) / HARBOR_GATE, HarborGate, f"invoke harbor.scan --variant {vid}",
                        "Harbor gate record"),
            release=read(ws.release(vid), ReleaseRecord, f"invoke release --variant {vid}", "release record")
            if ws.release(vid).exists() else None,
            export_verify=read(ws.export_verify(vid), ExportVerified, f"invoke release --variant {vid}",
                               "export-verify record") if ws.export_verify(vid).exists() else None)
    smoke_dir = ws.smoke_dir()
    smoke_files = sorted(p for p in smoke_dir.glob("*.json") if not p.name.startswith(".")) if smoke_dir.is_dir() else []
    smoke = [read(p, SmokeResult, "invoke smoke", "smoke record") for p in smoke_files if not CLUSTER_FILE.search(p.name)]
    cluster = tuple(read(p, ClusterSmokeRecord, "invoke smoke --cluster N", "cluster smoke record")
                    for p in smoke_files if CLUSTER_FILE.search(p.name))
    exports = [read(d / EXPORT_RECORD, ExportRecord, f"invoke export --out {d}", "export record")
               for d in export_dirs]
    return Records(root=str(ws.root), variants=list(variants), images=images, per_variant=per_variant,
                   smoke=smoke, exports=exports, cluster=cluster)


def _sbom(scan_dir: Path, decision: Got[ScanRecord]) -> str:
    """The SBOM beside the decision in this workspace (it may have been copied), else where the scan wrote it."""
    recorded = (decision.value.outputs.get("sbom") or "") if decision.ok else ""
    if not recorded:
        return ""
    here = scan_dir / Path(recorded).name
    return str(here) if here.is_file() else recorded if Path(recorded).is_file() else ""


def recorded_exports(ws: Workspace) -> list[Path]:
    """The --out folders `invoke export` left pointers to (build/exports/<id>.json). A pointer that
    cannot be read, or whose folder is gone, is passed over: the folder, not the pointer, is the record."""
    import json

    found: list[Path] = []
    for pointer in sorted(ws.exports_dir().glob("*.json")) if ws.exports_dir().is_dir() else []:
        try:
            out = json.loads(pointer.read_text()).get("out")
        except (OSError, ValueError, AttributeError):
            continue
        folder = ws.root / out if isinstance(out, str) and out else None
        if folder is not None and (folder / EXPORT_RECORD).is_file() and folder not in found:
            found.append(folder)
    return found


def export_dirs(patterns: list[str]) -> list[Path]:
    """Export folders named by the flags: folders or glob patterns (build/export-*, export/*), each once.
    A folder named outright that holds no export.json is kept (the page shows it as missing)."""
    import glob

    found: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        for match in map(Path, matches):
            if not (match.exists() and not match.is_dir()) and match not in found:
                found.append(match)
    return found
