"""The records render / build / gates / scan leave for images a test made itself, each naming the
image's real id, as push, sign, promote and export demand (one writer for every such test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from rapidship.records import BuiltImage, ContentRecord, GateReport, GatesRecord, Rendered, ScanRecord, Workspace
from rapidship.sign.provenance import IMAGE_ID_PROPERTY


def sbom(image_id: str, components: list[dict] | None = None) -> dict:
    """A CycloneDX SBOM as trivy writes it for an image: metadata.component names the image id."""
    return {"bomFormat": "CycloneDX", "specVersion": "1.6",
            "metadata": {"component": {"type": "container", "name": "image",
                                       "properties": [{"name": IMAGE_ID_PROPERTY, "value": image_id}]}},
            "components": components or [{"type": "file", "name": "payload.bin"}]}


def write_gated(build: Path, variant: str, images: dict[str, tuple[str, str]], *, lock: str, passed: bool = True,
                policy: dict | None = None, extra: dict | None = None,
                content: Callable[[str, str, str], ContentRecord] | None = None) -> Workspace:
    """`images`: arch -> (ref, image id). `content(arch, ref, image_id)` makes the content manifest
    (default: an empty one of that image)."""
    ws = Workspace(build)
    ws.save(ws.render(variant), Rendered(variant=variant, out_dir=str(build / variant),
                                         dockerfile=str(build / variant / "Dockerfile"), dockerfile_sha256="ab" * 32,
                                         lock_sha256=lock))
    for arch, (ref, image_id) in images.items():
        ws.save(ws.build(variant, arch), BuiltImage(variant=variant, arch=arch, ref=ref, image_id=image_id,
                                                    size_bytes=1, zstd_bytes=1, layers=1, seconds=0.1,
                                                    lock_sha256=lock, base="scratch", log="build.log",
                                                    extra=extra or {}))
        ws.save(ws.gates(variant, arch), GatesRecord(ref=ref, image_id=image_id, arch=arch, passed=passed,
                                                     gates=[GateReport(gate="size", passed=passed)]))
        ws.save(ws.decision(variant, arch), ScanRecord(
            artifact=ref, image_id=image_id, variant=variant, arch=arch, passed=passed, reasons=[], notes=[],
            counts={"HIGH": {"fail": 0}}, policy=policy or {}, os="debian 12", packages=1, trivy_version="0.59.1",
            db={}, outputs={}, seconds=0.0, decided_on="2026-12-01"))
        ws.save(ws.content(variant, arch), content(arch, ref, image_id) if content else ContentRecord(
            variant=variant, arch=arch, image_id=image_id, roots=["/opt/rapids/"], digest="sha256:" + "0" * 64,
            files=0, bytes=0, entries=[]))
        (ws.scan_dir(variant, arch) / "sbom.cdx.json").write_text(json.dumps(sbom(image_id)))
    return ws


def engine_id(ref: str) -> str:
    import subprocess

    return subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True,
                          check=True).stdout.strip()
