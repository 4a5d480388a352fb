"""What a patch of one distribution costs on a delta disc, for every distribution of a built image.

A delta disc carries the layers the site lacks (export/delta.py). If only distribution D changed,
the layers that change are the ones holding D's files, and the layers holding rapidship's records
of the env (layers.json, trims.json, dedupe.json, prune.json: sizes and versions, so they change
with any package). The table gives, for each distribution, those layers' zstd bytes ("carried"),
D's own files alone in one tar, zstd-compressed ("own"), and carried / own, worst first. Goal:
carried <= 1.25 x own + 2 MB for every distribution (docs/export.md). Beside it, "re-fed": the tar
bytes of the unchanged layers above the lowest changed one, which a site's engine writes again on
import because their chain IDs change with any layer below (imagebuild/layer_order.py orders for it).
Over a year (`yearly`): each layer's updates a year (the normaliser's record of it in the image's
history) times the tar bytes above it, for the image's order and for the best order of the same
layers, and what an update of the base (every Debian package) and a security fix of one re-feed.

Pure core: `cost_table` (sizes in, rows out). Edge: `measure(ref)` reads the image once from
`docker save`: the dist-info RECORDs name each file's distribution (the builder's own reading,
builder/layer_record.py), every layer is zstd-compressed as the disc compresses it (`zstd -3`), and
so is each distribution's set of files.
"""

from __future__ import annotations

import json
import posixpath
import re
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from rapidship.builder.layer_record import canonical, conda_paths, metadata_name, owner_of, record_paths
from rapidship.imagebuild.normalise import SPLIT_MARK, ZstdCount, layer_member, layer_steps, save_to
from rapidship.imagebuild.layer_order import COPIED, read_comment
from rapidship.render.layer_plan import best_order, yearly_refeed

GOAL_RATIO = 1.25
GOAL_SLACK_BYTES = 2_000_000
GOAL = f"carried <= {GOAL_RATIO} x own + {GOAL_SLACK_BYTES / 1e6:.0f} MB"
ENV_RECORDS = frozenset(f"opt/rapidship/{name}.json" for name in ("layers", "trims", "dedupe", "prune"))
ZSTD_LEVEL = 3  # what a disc uses (the build record's zstd_bytes: normalise.ZstdCount, export)
_DIST_INFO = re.compile(r"^(.*/site-packages)/([^/]+\.dist-info)/(RECORD|METADATA)$")
_CONDA_META = re.compile(r"^(.*)/conda-meta/[^/]+\.json$")


@dataclass(frozen=True)
class LayerCost:
    index: int         # position in the image, 0 = the base's first
    label: str         # the plan's layer name where a COPY of it made the layer, else the step
    zstd_bytes: int
    distributions: tuple[str, ...]
    env_records: bool  # holds a record that changes with any distribution
    tar_bytes: int = 0
    rate: float = -1.0  # updates a year the normaliser ordered it by (its history comment; -1: none recorded)
    family: str = ""    # layer_order.Rate.family: debian, dpkg-state, env, env-records, project


@dataclass(frozen=True)
class Cost:
    distribution: str
    layers: tuple[int, ...]  # the layers a patch of it re-ships, its own and the records'
    carried_bytes: int
    own_bytes: int
    refed_bytes: int = 0  # unchanged layers above the lowest changed one: written again on import

    @property
    def ratio(self) -> float:
        return self.carried_bytes / self.own_bytes if self.own_bytes else float("inf")

    @property
    def within_goal(self) -> bool:
        return within_goal(self.carried_bytes, self.own_bytes)

    def to_json(self) -> dict:
        return asdict(self) | {"ratio": round(self.ratio, 3), "within_goal": self.within_goal}


def within_goal(carried: int, own: int) -> bool:
    return carried <= GOAL_RATIO * own + GOAL_SLACK_BYTES


def cost_table(own: dict[str, int], lies_in: dict[str, set[int]], layer_bytes: dict[int, int],
               every_patch: set[int], layer_tar: dict[int, int] | None = None) -> list[Cost]:
    """Pure: each distribution's own zstd bytes, the layers its files lie in, each layer's zstd bytes
    and the layers every patch changes (and each layer's tar bytes) -> one row per distribution, the
    worst ratio first."""
    rows = []
    for name, own_bytes in own.items():
        layers = tuple(sorted(lies_in.get(name, set()) | every_patch))
        refed = sum(n for i, n in (layer_tar or {}).items() if layers and i > layers[0] and i not in layers)
        rows.append(Cost(name, layers, sum(layer_bytes[i] for i in layers), own_bytes, refed))
    return sorted(rows, key=lambda r: (-r.ratio, r.distribution))


def yearly(layers: list[LayerCost], rates: dict[str, int] | None = None) -> dict:
    """Pure: the image's layers (bottom first), each with the updates a year the normaliser recorded
    (layer_order.py; for an image normalised before it: `rates`, the plan's by name, the env's
    records every patch, other layers none) -> the tar bytes a site's engine is expected to write
    again in a year, in this order and in the best order of the same layers, and what an update of
    the base re-feeds (every Debian layer changed; recorded before: every layer from the env's lowest
    up), and a security fix of the Debian layer updated most often."""
    rates = rates or {}
    every = sum(rates.values())
    chain = [(layer.rate if layer.rate >= 0 else every if layer.env_records else rates.get(layer.label, 0), layer.tar_bytes)
             for layer in layers]
    plan, best = yearly_refeed(chain), yearly_refeed(best_order(chain))
    debian = {layer.index for layer in layers if layer.family in ("debian", "dpkg-state")}
    if not debian:
        planned = [layer.index for layer in layers if layer.label in rates]
        debian = {layer.index for layer in layers if planned and layer.index < planned[0]}
    out = {"plan_bytes": round(plan), "best_order_bytes": round(best), "ratio": round(plan / best, 4) if best else 1.0,
           "base_update_refed_bytes": refed(layers, debian)}
    fixes = [layer for layer in layers if layer.family == "debian"]
    if fixes:
        most = max(fixes, key=lambda layer: (layer.rate, -layer.index))
        states = {layer.index for layer in layers if layer.family == "dpkg-state"}
        out |= {"debian_fix": most.label, "debian_fix_refed_bytes": refed(layers, {most.index} | states)}
    return out


def refed(layers: list[LayerCost], changed: set[int]) -> int:
    """Pure: the tar bytes of the unchanged layers above the lowest changed one."""
    return sum(layer.tar_bytes for layer in layers if changed and layer.index > min(changed) and layer.index not in changed)


def per_year_words(year: dict) -> str:
    """Pure: `yearly`'s figures in the one sentence the size report and the report page both say."""
    gb = lambda n: f"{n / 1e9:.3f} GB"  # noqa: E731
    return (f"re-fed on import in a year of patches (each layer's releases x the bytes above it): "
            f"{gb(year['plan_bytes'])} in this order, {gb(year['best_order_bytes'])} in the best order of the same "
            f"layers ({year['ratio']:.3f}x); an update of the base re-feeds {gb(year['base_update_refed_bytes'])}"
            + (f", a fix of {year['debian_fix']} {gb(year['debian_fix_refed_bytes'])}" if year.get("debian_fix") else ""))


def summary(rows: list[Cost], layers: list[LayerCost], rates: dict[str, int] | None = None) -> dict:
    """Pure: the table as a record (the size report's `delta_cost`); with the plan's rates, `yearly`."""
    misses = [r for r in rows if not r.within_goal]
    return {"goal": GOAL, "distributions": len(rows), "misses": len(misses),
            "worst": rows[0].to_json() if rows else None, "rows": [r.to_json() for r in rows],
            "layers": [asdict(layer) for layer in layers]} | (
                {"per_year": yearly(layers, rates)} if rates or any(layer.rate >= 0 for layer in layers) else {})


# ---- edge: the image through docker save, layers and distributions through zstd -----------------

def _owners(outer: tarfile.TarFile, names: list[str]) -> tuple[dict[Path, str], dict[int, dict[Path, str]]]:
    """Every file a RECORD or a conda-meta record in the image names -> its distribution (canonical),
    read from the layers; conda-meta decides where both name a file, as the builder's reading does.
    Beside it, what each layer's own records name: a file two packages ship (NVIDIA's wheels share
    paths) lies once, in the lower one's layer, and is that one's there (`owner_here`)."""
    texts: dict[tuple[str, str], dict[str, str]] = {}
    conda: list[tuple[str, dict, int]] = []
    where: dict[tuple[str, str], int] = {}
    for index, name in enumerate(names):
        inner = tarfile.open(fileobj=outer.extractfile(layer_member(outer, name)), mode="r|")
        for member in inner:
            path = member.name.lstrip("./")
            found, meta = _DIST_INFO.match(path), _CONDA_META.match(path)
            if (found or meta) and member.isfile():
                data = inner.extractfile(member).read().decode("utf-8", "surrogateescape")  # type: ignore[union-attr]
                if found:
                    texts.setdefault((found.group(1), found.group(2)), {})[found.group(3)] = data
                    where[(found.group(1), found.group(2))] = index
                else:
                    conda.append((meta.group(1), json.loads(data), index))  # type: ignore[union-attr]
    owned: dict[Path, str] = {}
    by_layer: dict[int, dict[Path, str]] = {}
    for (site, folder), parts in sorted(texts.items()):
        name = canonical(metadata_name(parts.get("METADATA", ""), folder.rsplit("-", 1)[0]))
        paths = dict.fromkeys(record_paths(Path(site), parts.get("RECORD", "")), name)
        owned.update(paths)
        by_layer.setdefault(where[(site, folder)], {}).update(paths)
    for prefix, record, index in conda:
        paths = {path: canonical(name) for path, name in conda_paths(Path(prefix), record).items()}
        owned.update(paths)
        by_layer.setdefault(index, {}).update(paths)
    return owned, by_layer


def owner_here(path: Path, index: int, owned: dict[Path, str], by_layer: dict[int, dict[Path, str]]) -> str | None:
    """The distribution a file of layer `index` belongs to: one whose record lies in that layer and
    names it, else whichever names it (a record in another layer: a file linked down)."""
    return owner_of(path, by_layer.get(index, {})) or owner_of(path, owned)


def _label(created_by: str) -> str:
    """The plan's layer a COPY names, the package (group) a base or runtime package layer holds, else the step."""
    copied = COPIED.search(created_by)
    if copied:
        return copied.group(1)
    if SPLIT_MARK in created_by:
        return created_by.rsplit(SPLIT_MARK, 1)[1]
    if created_by.startswith("mmdebstrap ") and "): " in created_by:  # the base's layers (imagebuild/base.py)
        return created_by.rsplit("): ", 1)[1]
    return " ".join(created_by.replace("/bin/sh -c ", "").split())[:60]


def measure(ref: str, workdir: Path | None = None) -> tuple[list[Cost], list[LayerCost]]:
    """The table for the image `ref`, from one `docker save` (each layer read twice from that file)."""
    with tempfile.TemporaryDirectory(prefix="rapidship-delta-cost-", dir=workdir) as tmp:
        with tarfile.open(save_to(ref, Path(tmp), "delta cost of")) as outer:
            manifest = json.load(outer.extractfile("manifest.json"))[0]  # type: ignore[arg-type]
            config = json.load(outer.extractfile(manifest["Config"]))  # type: ignore[arg-type]
            steps = layer_steps(config)
            ordered = [read_comment(h) or {} for h in config.get("history") or [] if not h.get("empty_layer")]
            names = manifest["Layers"]
            owned, by_layer = _owners(outer, names)
            own_bytes: dict[str, int] = {}
            lies_in: dict[str, set[int]] = {}
            layers: list[LayerCost] = []
            for index, name in enumerate(names):
                member = layer_member(outer, name)
                whole = ZstdCount(ZSTD_LEVEL)
                stream = outer.extractfile(member)
                assert stream is not None
                while chunk := stream.read(1 << 20):
                    whole.write(chunk)
                # each distribution's files of this layer, one tar each; a distribution in two layers
                # (none is, as planned) is counted as its two pieces
                own: dict[str, tuple[ZstdCount, tarfile.TarFile]] = {}
                records = False
                inner = tarfile.open(fileobj=outer.extractfile(member), mode="r|")
                for f in inner:
                    path = posixpath.normpath(f.name.lstrip("./")) if f.name.strip("./") else ""
                    records = records or path in ENV_RECORDS
                    owner = None if f.isdir() else owner_here(Path(path), index, owned, by_layer)
                    if owner is None:
                        continue
                    lies_in.setdefault(owner, set()).add(index)
                    if owner not in own:
                        proc = ZstdCount(ZSTD_LEVEL)
                        own[owner] = (proc, tarfile.open(fileobj=proc, mode="w|", format=tarfile.PAX_FORMAT))  # type: ignore[call-overload]
                    own[owner][1].addfile(f, inner.extractfile(f) if f.isfile() else None)
                for owner, (proc, writer) in own.items():
                    writer.close()
                    own_bytes[owner] = own_bytes.get(owner, 0) + proc.close()
                label = _label(steps[index]) if index < len(steps) else ""
                said = ordered[index] if index < len(ordered) else {}
                layers.append(LayerCost(index, label, whole.close(), tuple(sorted(own)), records, member.size,
                                        float(said.get("releases_per_year", -1)), said.get("family", "")))
    every_patch = {layer.index for layer in layers if layer.env_records}
    return cost_table(own_bytes, lies_in, {layer.index: layer.zstd_bytes for layer in layers}, every_patch,
                      {layer.index: layer.tar_bytes for layer in layers}), layers
