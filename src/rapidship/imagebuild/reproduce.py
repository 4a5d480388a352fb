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
from rapidship.imagebuild.normalise import layer_files, layer_member, layer_steps
from rapidship.imagebuild.base import package_differences
from rapidship.records import BaseRecord, BuiltImage

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

def input_problems(record: BuiltImage, head: str, dirty: bool, lock_sha256: str) -> list[str]:
    """What stands between this checkout and a rebuild from `record`'s inputs (bases: base_args)."""
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
    return problems


def base_args(record: BuiltImage, made_here: dict[str, BaseRecord | None],
              engine_ids: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The bases a rebuild from `record` takes (stage -> engine name), and what stands in the way.
    Each recorded base is an input by its id: the base this run made (its base record) when it is
    that id, else the recorded name while the engine still holds that id there. A base made here
    from an archive that has moved on is another id: the package versions that differ are named."""
    args, problems = {}, []
    for key, used in sorted((record.extra.get("bases") or {}).items()):
        want, mine = used.get("id", ""), made_here.get(key)
        if not want:
            continue
        if mine is not None and mine.image_id == want:
            args[key] = mine.ref
        elif engine_ids.get(key) == want:
            args[key] = used["ref"]
        elif mine is not None:
            problems.append(f"{key}: this run's base {mine.ref} is {mine.image_id[:19]}, the image was built on "
                            f"{want[:19]}: {base_drift(used.get('inputs') or {}, mine.inputs.model_dump(mode='json'))}")
        else:
            problems.append(f"{key} {used.get('ref')} is {engine_ids.get(key, '')[:19] or 'not in the engine'}, the image "
                            f"was built on {want[:19]}: load that base or make it (invoke base): it is an input, like "
                            "the lock")
    return args, problems


def base_drift(then: dict, now: dict) -> str:
    """Pure: why a base made now is not the one recorded: the package versions that differ (the
    archive moved on), else the other inputs that differ."""
    if not then:
        return "the build record names no inputs of its base (made before base records): rebuild the image"
    if changed := package_differences(then.get("packages") or {}, now.get("packages") or {}):
        return (f"the archive has moved on since {then.get('archive_date') or 'the build'} ({len(changed)} package "
                f"versions differ: {'; '.join(changed)}): make the base from a mirror of that archive state")
    others = [f"{k} {then.get(k)!r} then, {now.get(k)!r} now" for k in ("mirror", "suite", "include", "tool")
              if then.get(k) != now.get(k)]
    return "the same package versions, made otherwise: " + ("; ".join(others) or "the inputs recorded agree")


def recorded_bases(ws, variant, arch, record: BuiltImage) -> tuple[dict[str, str], list[str]]:
    """Edge: `base_args` over what this engine holds under each recorded base ref and the bases this
    run made (its base records): the one reading of "the bases a rebuild from `record` takes"."""
    from rapidship.config.matrix import run_id
    from rapidship.imagebuild.base import read_base
    from rapidship.imagebuild.buildkit import stage_bases

    engine_ids = {key: (ENGINE.try_inspect(used.get("ref", "")) or {}).get("Id", "")
                  for key, used in (record.extra.get("bases") or {}).items()}
    made_here = {key: read_base(ws, ref, base_arch.value, run_id())
                 for key, (ref, base_arch) in stage_bases(variant, arch).items()}
    return base_args(record, made_here, engine_ids)


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
    steps = layer_steps(config)
    return Listing(config, layers, steps)
