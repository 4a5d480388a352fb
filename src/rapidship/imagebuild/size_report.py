"""Built image -> SizeReport: where the bytes are, what the trims saved, sizes against the budget.

Pure core: `summarize(entries, ...)` (file list in, report out). Thin edge: `image_entries` streams
`docker export` of a stopped container through tarfile (no file lands on disk; layers.snapshot), and
`read_trims` picks /opt/rapidship/trims.json (written by the builder's measure_trims) out of the
same stream. Uncompressed size is the engine's image size (what the size gate checks); the zstd
size comes from the build record (the normalised archive through `zstd -3`, what a disc carries).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable

from rapidship.errors import RapidshipError
from rapidship.image import snapshot
from rapidship.records import Workspace

TRIMS_PATH = "opt/rapidship/trims.json"
PRUNE_PATH = "opt/rapidship/prune.json"  # the builder's device-code prune record (absent: nothing pruned)
LAYERS_PATH = "opt/rapidship/layers.json"  # the env's layer plan with what each layer holds (builder/layer_record.py)


@dataclass(frozen=True)
class Entry:
    path: str  # relative to /, no leading slash
    size: int


@dataclass(frozen=True)
class PathSize:
    path: str
    bytes: int


@dataclass
class SizeReport:
    variant: str
    arch: str
    ref: str
    image_bytes: int
    zstd_bytes: int | None
    budget_bytes: int
    files_bytes: int
    files: int
    largest_dirs: list[PathSize]
    largest_files: list[PathSize]
    trims: dict = field(default_factory=dict)
    prune: dict = field(default_factory=dict)  # kept archs, bytes before/after per file and per arch
    layers: dict = field(default_factory=dict)  # the env's layer plan: each layer, why, its distributions
    delta_cost: dict = field(default_factory=dict)  # --delta-cost: imagebuild/delta_cost.summary

    @property
    def headroom_bytes(self) -> int:
        return self.budget_bytes - self.image_bytes

    @property
    def within_budget(self) -> bool:
        return self.image_bytes <= self.budget_bytes

    def to_json(self) -> dict:
        return asdict(self) | {"headroom_bytes": self.headroom_bytes, "within_budget": self.within_budget}


def summarize(entries: Iterable[Entry], *, variant: str, arch: str, ref: str, image_bytes: int,
              zstd_bytes: int | None, budget_bytes: int, trims: dict | None = None, top: int = 25,
              depth: int = 8, prune: dict | None = None, layers: dict | None = None) -> SizeReport:
    """Pure: regular files -> totals, the largest directories (up to `depth` levels) and files.

    A directory is listed only where it is not just its single largest child (so the list reads
    nvidia/cublas, libcudf/lib64 ... instead of every ancestor of the same bytes).
    """
    dirs: dict[str, int] = {}
    files: list[PathSize] = []
    total = 0
    for entry in entries:
        total += entry.size
        files.append(PathSize("/" + entry.path, entry.size))
        parts = PurePosixPath(entry.path).parts[:-1]
        for level in range(1, min(len(parts), depth) + 1):
            key = "/" + "/".join(parts[:level])
            dirs[key] = dirs.get(key, 0) + entry.size
    biggest_child: dict[str, int] = {}
    for path, size in dirs.items():
        parent = path.rsplit("/", 1)[0]
        if parent:
            biggest_child[parent] = max(biggest_child.get(parent, 0), size)
    largest = sorted(dirs.items(), key=lambda kv: (-kv[1], kv[0]))
    # A directory that is (almost) all one child says nothing its child does not.
    shown = [PathSize(path, size) for path, size in largest if biggest_child.get(path, 0) < 0.99 * size]
    files.sort(key=lambda p: (-p.bytes, p.path))
    return SizeReport(variant=variant, arch=arch, ref=ref, image_bytes=image_bytes, zstd_bytes=zstd_bytes,
                      budget_bytes=budget_bytes, files_bytes=total, files=len(files), largest_dirs=shown[:top],
                      largest_files=files[:top], trims=trims or {}, prune=prune_summary(prune, top),
                      layers=layers_summary(layers))


def layers_summary(record: dict | None) -> dict:
    """Pure: the plan of an image's layers.json; {} for an image split before plans (parts by kind)."""
    if not record or "layers" not in record:
        return {}
    return {k: record.get(k) for k in ("budget", "group_bytes", "sizes")} | {"layers": [
        {"name": layer["name"], "why": layer["why"], "files": layer.get("files", 0), "bytes": layer.get("bytes", 0),
         "releases_per_year": layer.get("releases_per_year", 0),
         "distributions": [f"{d['name']} {d['version']}" for d in layer["distributions"]]}
        for layer in record["layers"]]}


def prune_summary(record: dict | None, top: int = 25) -> dict:
    """Pure: the parts of a prune record a size report shows (totals, by arch, the largest files)."""
    if not record:
        return {}
    totals = record.get("totals", {})
    files_ = sorted(record.get("files", []), key=lambda f: f.get("bytes_after", 0) - f.get("bytes_before", 0))
    census = record.get("census") or {}   # images built before the census have none
    return {"keep": record.get("keep"), "totals": totals,
            "files": [{k: f.get(k) for k in ("path", "status", "bytes_before", "bytes_after", "reason", "layout")}
                      for f in files_[:top]],
            **({"left": {k: v for k, v in census.items() if k != "left"} |
                {"sections": [{"path": f["path"], "copies": len(f["copies"]), "section": name, "bytes": sec["bytes"],
                               "by_arch": sec["by_arch"], "why": sec["why"]}
                              for f in census.get("left", []) for name, sec in f["sections"].items()][:top]}}
               if census else {})}


def image_entries(ref: str, keep: set[str] = frozenset({TRIMS_PATH, PRUNE_PATH, LAYERS_PATH})) -> tuple[list[Entry], dict[str, bytes]]:
    """Regular files of the image's filesystem (one `docker export`), plus the bytes of `keep` paths."""
    image = snapshot(ref, keep=lambda path: path.lstrip("/") in keep)
    entries = [Entry(f.path.lstrip("/"), f.size) for f in image.files if f.is_file]
    return entries, {path.lstrip("/"): data for path, data in image.contents.items()}


def report(ref: str, *, variant: str, arch: str, image_bytes: int, zstd_bytes: int | None, budget_bytes: int,
           top: int = 25) -> SizeReport:
    entries, kept = image_entries(ref)
    trims = _record(kept, TRIMS_PATH, ref)
    prune = _record(kept, PRUNE_PATH, ref)
    return summarize(entries, variant=variant, arch=arch, ref=ref, image_bytes=image_bytes, zstd_bytes=zstd_bytes,
                     budget_bytes=budget_bytes, trims=trims, top=top, prune=prune, layers=_record(kept, LAYERS_PATH, ref))


def _record(kept: dict[str, bytes], path: str, ref: str) -> dict:
    if path not in kept:
        return {}
    try:
        value = json.loads(kept[path])
    except ValueError:
        raise RapidshipError(f"{ref}:/{path}", "is not valid JSON", "rebuild the image (invoke build)") from None
    if not isinstance(value, dict):
        raise RapidshipError(f"{ref}:/{path}", "is not a JSON object", "rebuild the image (invoke build)")
    return value


def write_report(ws: Workspace, rep: SizeReport) -> Path:
    return ws.save(ws.size(rep.variant, rep.arch), rep)
