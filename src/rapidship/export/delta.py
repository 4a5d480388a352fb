"""Delta discs: release N+1 carrying only the layers release N's disc did not.

`invoke export --since PREVIOUS` (an export.json, an export's folder, a volume or an ISO of it)
reads the images PREVIOUS shipped and their layers (MANIFEST.json / export.json list each image's
rootfs diff_ids: export.verify.previous_release). Pure core: `plan_delta` pairs each image with PREVIOUS's image of the same variant
and arch (or the same name), refuses a PREVIOUS that is not a base of this release (no such image,
no layer in common), and says what the host must already hold: the `extends` block of the disc's
MANIFEST.json (PREVIOUS's export id, its images, the layers expected on the host). Edge:
`write_archive` writes the docker-archive of the disc (configs, the layers PREVIOUS lacks, a
manifest.json naming all layers), reading only those layers from the engine's layer store
(export/hostlayers.py), each hashed against its diff_id as it goes; else from one `docker save`.

The importer never trusts `extends` for what it loads: every layer is found by its content hash
among the diff_ids of a signed config (export/repack.py), or, for docker's loader, left to the engine
by the chain ID those diff_ids give (export/hostlayers.py).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterable

from rapidship.engine import ENGINE
from rapidship.errors import ConfigError, RapidshipError
from rapidship.export import repack
from rapidship.imagebuild.normalise import layer_member


@dataclass(frozen=True)
class Delta:
    held: frozenset[str]  # diff_ids the host already has (PREVIOUS's), left off the disc
    extends: dict         # MANIFEST.json's `extends`


def _key(image: dict) -> tuple[str, str]:
    """What an image is a release of: its variant, else its repository (the name without its tag); and its arch."""
    ref = image.get("ref", "")
    repository = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
    return (image.get("variant") or repository, image.get("arch", ""))


def plan_delta(images: list[dict], previous_id: str, previous_created: str, previous: list[dict]) -> Delta:
    """What of `images` PREVIOUS already delivered. Every image must have its counterpart in PREVIOUS
    (same variant and arch, or the same repository and arch) sharing at least one layer: a delta on anything else
    would ship a disc no site holding PREVIOUS could load, or one no smaller than a full disc."""
    by_key = {_key(i): i for i in previous}
    problems, expected = [], set()
    held = frozenset(d for i in previous for d in i["layers"])
    for image in images:
        base = by_key.get(_key(image))
        what = f"{image['ref']} ({image.get('arch', '')})"
        if base is None:
            problems.append(f"{what}: the previous release has no image of {_key(image)[0]} for {image.get('arch', '')}")
            continue
        shared = [d for d in image["layers"] if d in held]
        if not shared:
            problems.append(f"{what}: shares no layer with the previous release's {base['ref']} ({base['image_id'][:19]})")
        expected.update(shared)
    if problems:
        raise ConfigError("--since", "not a base of this release: " + "; ".join(problems),
                          "pass the disc or export.json of the release the sites already hold, of the same variants")
    extends = {"export_id": previous_id, "created": previous_created,
               "images": [{k: i.get(k, "") for k in ("ref", "image_id", "arch", "variant")} for i in previous],
               "layers": sorted(expected)}
    return Delta(held, extends)


def write_archive(image_ids: list[str], held: frozenset[str], out: IO[bytes], workdir: Path | None = None,
                  on_bytes: Callable[[int], None] = lambda _: None, say: Callable[[str], None] = lambda _: None,
                  from_store: bool = True) -> int:
    """The disc's docker-archive: each config, each layer not `held` (once), and a manifest.json that
    names every layer (a loader given this archive alone finds some missing and loads nothing).
    Read from the engine's layer store where it can be (only the layers the disc carries are read),
    else from one `docker save` of the images (or with `from_store` False). The same bytes either way.
    Returns the bytes written."""
    from rapidship.export import hostlayers

    planned = _from_store(image_ids, held) if from_store else None
    if planned is not None:
        say(f"delta: {len(planned[1])} layer(s) read from the engine's layer store, each hashed against the "
            "diff_id its config lists; no docker save")
        return _archive(planned[0], planned[1], out, hostlayers.store_reader(planned[2]), on_bytes)
    with tempfile.TemporaryDirectory(prefix="rapidship-delta-", dir=workdir) as tmp:
        saved = Path(tmp) / "saved.tar"
        got = ENGINE.run_cli(["save", "-o", str(saved), *image_ids])
        if got.returncode != 0:
            raise RapidshipError("docker save", f"failed: {got.stderr.strip()[-300:]}", "check the engine and the images")
        say(f"delta: the layers taken from docker save of {len(image_ids)} image(s) (the engine's layer store "
            "could not give them)")
        with tarfile.open(saved) as outer:
            entries = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
            images = [(outer.extractfile(e["Config"]).read(), e) for e in entries]  # type: ignore[union-attr]
            order = {i: n for n, i in enumerate(image_ids)}  # as asked, whatever order the engine saved in
            images.sort(key=lambda ce: order.get("sha256:" + hashlib.sha256(ce[0]).hexdigest(), len(order)))
            layers = {}
            for config, entry in images:
                diff_ids = _diff_ids(config, len(entry["Layers"]))
                for diff_id, name in zip(diff_ids, entry["Layers"]):
                    if diff_id not in held:
                        layers.setdefault(diff_id, layer_member(outer, name))
            return _archive([(c, tuple(e.get("RepoTags") or ())) for c, e in images], {d: m.size for d, m in
                            layers.items()}, out, lambda d: _member_chunks(outer, layers[d]), on_bytes)


def _diff_ids(config: bytes, count: int | None = None) -> tuple[str, ...]:
    diff_ids = repack.diff_ids(config)
    if isinstance(diff_ids, str) or (count is not None and len(diff_ids) != count):
        raise RapidshipError("docker save", f"an image config the engine saved is unusable: {diff_ids}",
                             "check the engine")
    return tuple(diff_ids)


def _member_chunks(outer: tarfile.TarFile, member: tarfile.TarInfo):
    stream = outer.extractfile(member)
    assert stream is not None
    while chunk := stream.read(1 << 20):
        yield chunk


def _from_store(image_ids: list[str], held: frozenset[str]):
    """(configs with their names, diff_id -> tar bytes, diff_id -> chain) of every layer the disc
    carries, read from the engine's layer store; None where any of it cannot be (docker save then)."""
    from rapidship.export import hostlayers

    store = hostlayers.store()
    if store is None:
        return None
    try:
        images, sizes, chains = [], {}, {}
        for image_id in image_ids:
            config = store.config(image_id)
            diff_ids = _diff_ids(config)
            for diff_id, chain in zip(diff_ids, hostlayers.chain_ids(diff_ids)):
                if diff_id not in held and diff_id not in sizes:
                    sizes[diff_id], chains[diff_id] = store.size(chain), chain
            images.append((config, ()))  # by id, as `docker save ID` lists them: the disc names each image
    except (OSError, ValueError, KeyError, RapidshipError):
        return None
    return images, sizes, (store, chains)


def _archive(images: list[tuple[bytes, tuple[str, ...]]], sizes: dict[str, int], out: IO[bytes],
             chunks: Callable[[str], Iterable[bytes]], on_bytes: Callable[[int], None]) -> int:
    """Write the archive: each layer of `sizes` once (in the order the configs list them, its bytes
    from `chunks` and hashed against its diff_id as they go), each config, the manifest."""
    written = 0

    def put(data: bytes | memoryview) -> None:
        nonlocal written
        out.write(data)
        written += len(data)

    put(repack.member_header("blobs/", 0, True) + repack.member_header(repack.BLOBS + "/", 0, True))
    done: set[str] = set()
    listed = []
    for config, tags in images:
        diff_ids = _diff_ids(config)
        for diff_id in diff_ids:
            if diff_id not in sizes or diff_id in done:
                continue
            done.add(diff_id)
            put(repack.member_header(f"{repack.BLOBS}/{diff_id[7:]}", sizes[diff_id]))
            digest, size = hashlib.sha256(), 0
            for chunk in chunks(diff_id):
                digest.update(chunk)
                size += len(chunk)
                put(chunk)
                on_bytes(len(chunk))
            if size != sizes[diff_id] or "sha256:" + digest.hexdigest() != diff_id:
                raise RapidshipError("invoke export", f"layer {diff_id[:19]} read from the engine is not the layer "
                                     "its config lists (its bytes hash or count otherwise)",
                                     "the engine's layer store changed or is damaged: run the export again, and "
                                     "if it repeats, rebuild or re-pull the image")
            put(repack.padding(sizes[diff_id]))
        image_id = "sha256:" + hashlib.sha256(config).hexdigest()
        put(repack.member_header(f"{repack.BLOBS}/{image_id[7:]}", len(config)) + config + repack.padding(len(config)))
        listed.append(repack.Planned(image_id, config, diff_ids, tags))
    manifest = repack.manifest_json(tuple(listed))
    put(repack.member_header("manifest.json", len(manifest)) + manifest + repack.padding(len(manifest)))
    put(bytes(2 * tarfile.BLOCKSIZE))
    out.flush()
    return written
