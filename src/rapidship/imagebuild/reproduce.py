"""`invoke reproduce`: rebuild an image from the inputs its build record names, and say whether the
result is the image id asked about, or name each config field and file that differs.

Pure core: `input_problems` (what of the recorded inputs this checkout or engine does not hold) and
`differences` (two images, field by field and layer by layer). Edge: `listing` reads an image's
config and every layer's files from `docker save`.
"""

from __future__ import annotations

import json
import re
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rapidship.engine import ENGINE
from rapidship.errors import RapidshipError
from rapidship.imagebuild.normalise import layer_files, layer_member
from rapidship.records import BuiltImage

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class FileFacts:
    kind: str
    mode: str
    owner: str
    size: int
    sha256: str
    link: str
    mtime: int
    xattrs: str


@dataclass(frozen=True)
class Listing:
    config: dict
    layers: list[dict[str, FileFacts]]
    steps: list[str]  # the Dockerfile step that made each layer (history), for messages


# ---- the recorded inputs (pure) ----------------------------------------------------------------

def input_problems(record: BuiltImage, head: str, dirty: bool, lock_sha256: str,
                   base_ids: dict[str, str]) -> list[str]:
    """What stands between this checkout and engine and a rebuild from `record`'s inputs."""
    problems = []
    revision, epoch = record.extra.get("revision", ""), record.extra.get("source_date_epoch")
    if not isinstance(epoch, int) or not revision:
        problems.append("the build record names no source revision and SOURCE_DATE_EPOCH (made before reproducible "
                        "builds): rebuild it with invoke build, then reproduce that")
        return problems
    if head != revision:
        problems.append(f"the image was built from commit {revision[:12]}, this checkout is at {head[:12] or 'none'}: "
                        f"git checkout {revision[:12]}")
    elif dirty:
        problems.append("this checkout has uncommitted changes to tracked files: commit or stash them")
    if lock_sha256 != record.lock_sha256:
        problems.append(f"the lock renders to {lock_sha256[:12]} here, the image was built from {record.lock_sha256[:12]}")
    for key, used in sorted((record.extra.get("bases") or {}).items()):
        here = base_ids.get(key, "")
        if used.get("id") and here != used["id"]:
            problems.append(f"{key} {used.get('ref')} is {here[:19] or 'not in the engine'}, the image was built on "
                            f"{used['id'][:19]}: load that base (it is an input, like the lock)")
    return problems


def engine_base_ids(record: BuiltImage) -> dict[str, str]:
    """Edge: the id the engine holds now under each base ref the build record names ("" when none)."""
    return {key: (ENGINE.try_inspect(used.get("ref", "")) or {}).get("Id", "")
            for key, used in (record.extra.get("bases") or {}).items()}


# ---- two images (pure) -------------------------------------------------------------------------

def _flat(doc: object, at: str = "") -> dict[str, object]:
    if isinstance(doc, dict):
        out: dict[str, object] = {}
        for k, v in doc.items():
            out.update(_flat(v, f"{at}.{k}" if at else str(k)))
        return out
    if isinstance(doc, list) and doc and any(isinstance(x, (dict, list)) for x in doc):
        out = {}
        for i, v in enumerate(doc):
            out.update(_flat(v, f"{at}[{i}]"))
        return out
    return {at: doc}


def differences(shipped: Listing, rebuilt: Listing, limit: int = 60) -> list[str]:
    """One line per config field and per file that differs ('shipped' is the image asked about)."""
    lines = []
    a, b = _flat(shipped.config), _flat(rebuilt.config)
    for key in sorted(a.keys() | b.keys()):
        if key.startswith("rootfs.diff_ids") or a.get(key) == b.get(key):
            continue
        lines.append(f"config {key}: {a.get(key, '(absent)')!r} shipped, {b.get(key, '(absent)')!r} rebuilt")
    if len(shipped.layers) != len(rebuilt.layers):
        lines.append(f"layers: {len(shipped.layers)} shipped, {len(rebuilt.layers)} rebuilt")
    for i, (x, y) in enumerate(zip(shipped.layers, rebuilt.layers)):
        step = (shipped.steps[i] if i < len(shipped.steps) else "")[:60]
        times: set[tuple[int, int]] = set()  # mtime-only differences: another epoch, said once per layer
        for path in sorted(x.keys() | y.keys()):
            p, q = x.get(path), y.get(path)
            if p == q:
                continue
            where = f"layer {i + 1} ({step}) /{path}"
            if p is None or q is None:
                lines.append(f"{where}: only in the {'rebuilt' if p is None else 'shipped'} image")
                continue
            fields = [k for k in FileFacts.__dataclass_fields__ if getattr(p, k) != getattr(q, k)]
            if fields == ["mtime"]:
                times.add((p.mtime, q.mtime))
                continue
            lines.append(f"{where}: " + "; ".join("content differs" if k == "sha256" else
                                                  f"{k} {getattr(p, k)!r} shipped, {getattr(q, k)!r} rebuilt"
                                                  for k in fields))
        if times:
            lines.append(f"layer {i + 1} ({step}): mtimes differ ({', '.join(f'{a} shipped, {b} rebuilt' for a, b in sorted(times)[:3])}"
                         + (", ..." if len(times) > 3 else "") + ")")
    if len(lines) > limit:
        lines = lines[:limit] + [f"... and {len(lines) - limit} more"]
    return lines


# ---- reading an image (edge) -------------------------------------------------------------------

def listing(ref: str, workdir: Path | None = None) -> Listing:
    with tempfile.TemporaryDirectory(prefix="rapidship-listing-", dir=workdir) as tmp:
        saved = Path(tmp) / "saved.tar"
        got = ENGINE.run_cli(["save", "-o", str(saved), ref])
        if got.returncode != 0:
            raise RapidshipError(ref, f"docker save failed: {got.stderr.strip()[-300:]}", "check that the image is in the engine")
        with tarfile.open(saved) as outer:
            manifest = json.load(outer.extractfile("manifest.json"))[0]  # type: ignore[arg-type]
            config = json.load(outer.extractfile(manifest["Config"]))  # type: ignore[arg-type]
            layers = []
            for name in manifest["Layers"]:
                with tarfile.open(fileobj=outer.extractfile(layer_member(outer, name)), mode="r|") as layer:
                    layers.append({m.name.lstrip("./"): FileFacts(
                        kind=m.type.decode(errors="replace"), mode=f"{m.mode:04o}", owner=f"{m.uid}:{m.gid}",
                        size=m.size if m.isfile() else 0, sha256=digest, link=m.linkname, mtime=int(m.mtime),
                        xattrs=",".join(sorted(k for k in m.pax_headers if k.startswith("SCHILY.xattr."))))
                        for m, digest in layer_files(layer)})
    steps = [h.get("created_by", "") for h in config.get("history") or [] if not h.get("empty_layer")]
    return Listing(config, layers, steps)
