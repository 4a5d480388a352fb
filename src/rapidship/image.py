"""Read an image without unpacking it to disk (through the engine): its files, its layers, one snapshot.

`saved_image(ref)`: the config JSON and every layer's files, in order, from `docker save`
(deleted files included: a secret removed by a later layer still ships in the earlier one).
`final_files(ref)`: the flattened filesystem from `docker export` of a created container.
`snapshot(ref)`: inspect + history + one export, read once and shared by all gates of a run.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass, field
from typing import IO, Callable, Iterator

from rapidship.engine import ENGINE


CAPABILITY_XATTR = "SCHILY.xattr.security.capability"  # file capabilities, as tar (pax) carries them


@dataclass(frozen=True)
class FileEntry:
    layer: str  # layer id in the archive, or "final"
    path: str
    mode: int
    size: int
    is_file: bool
    is_dir: bool = False
    capabilities: bool = False  # carries security.capability (setcap): privilege without a setuid bit
    uid: int = 0
    gid: int = 0


def entry_of(f: tarfile.TarInfo, layer: str) -> FileEntry:
    return FileEntry(layer=layer, path="/" + f.name.lstrip("./"), mode=f.mode, size=f.size, is_file=f.isfile(),
                     is_dir=f.isdir(), capabilities=CAPABILITY_XATTR in (f.pax_headers or {}), uid=f.uid, gid=f.gid)


def saved_image(ref: str) -> Iterator[tuple[str, FileEntry | None, IO[bytes] | None]]:
    """Yields ("config", None, json bytes stream) and ("file", entry, content stream) items."""
    with ENGINE.save(ref) as raw:
        outer = tarfile.open(fileobj=raw, mode="r|")
        for member in outer:
            name = member.name
            if name.endswith(".json") and name not in ("manifest.json", "repositories") and "/" not in name:
                yield "config", None, outer.extractfile(member)
            elif name.endswith("layer.tar") or (name.startswith("blobs/") and member.isfile()):
                inner_fobj = outer.extractfile(member)
                if inner_fobj is None:
                    continue
                try:
                    inner = tarfile.open(fileobj=inner_fobj, mode="r|")
                except tarfile.ReadError:
                    continue  # an OCI blob that is not a layer (config, manifest)
                for f in inner:
                    entry = entry_of(f, name.split("/")[0])
                    yield "file", entry, inner.extractfile(f) if f.isfile() else None


def exported_members(ref: str) -> Iterator[tuple[tarfile.TarInfo, tarfile.TarFile]]:
    """Every tar member of the flattened image (one `docker export`), with the open archive."""
    with ENGINE.exported(ref) as raw:
        archive = tarfile.open(fileobj=raw, mode="r|")
        for member in archive:
            yield member, archive


def final_files(ref: str) -> Iterator[tuple[FileEntry, IO[bytes] | None]]:
    """Files of the flattened image; the content stream is valid until the next item."""
    for f, archive in exported_members(ref):
        yield entry_of(f, "final"), archive.extractfile(f) if f.isfile() else None


def image_config(ref: str) -> dict:
    return ENGINE.inspect(ref)


def image_history(ref: str) -> list[str]:
    return ENGINE.history(ref)


@dataclass(frozen=True)
class ImageSnapshot:
    """One read of an image shared by every gate of a run: its inspect document, its history and
    its flattened files (one `docker export`), with the contents of the paths a gate asked for."""

    ref: str
    config: dict
    history: list[str]
    files: list[FileEntry]
    contents: dict[str, bytes]
    digests: dict[str, str] = field(default_factory=dict)  # path -> sha256 hex, for files under `hash_under`
    links: dict[str, str] = field(default_factory=dict)    # path -> symlink target, under `hash_under`


def snapshot(ref: str, keep: Callable[[str], bool] = lambda _: False,
             hash_under: tuple[str, ...] = ()) -> ImageSnapshot:
    """Inspect, history and one export stream of `ref`; the bytes of files where keep(path), and
    the sha256 of every file (the target of every symlink) under the `hash_under` folders."""
    config = ENGINE.inspect(ref)
    files, contents, digests, links = [], {}, {}, {}
    for f, archive in exported_members(ref):
        entry = entry_of(f, "final")
        files.append(entry)
        hashed = entry.path.startswith(hash_under) if hash_under else False
        if f.issym() and hashed:
            links[entry.path] = f.linkname
        if not f.isfile() or not (hashed or keep(entry.path)):
            continue
        stream = archive.extractfile(f)
        assert stream is not None
        if keep(entry.path):
            contents[entry.path] = data = stream.read()
            digests.update({entry.path: hashlib.sha256(data).hexdigest()} if hashed else {})
        else:
            digest = hashlib.sha256()
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
            digests[entry.path] = digest.hexdigest()
    return ImageSnapshot(ref, config, ENGINE.history(ref), files, contents, digests, links)


# ---- the engine's layers --------------------------------------------------------------------

def chain_ids(diff_ids: tuple[str, ...] | list[str]) -> list[str]:
    """The chain ID of each prefix of a layer list (the image-spec's ChainID, as moby's layer store keys them)."""
    out: list[str] = []
    for diff_id in diff_ids:
        out.append(diff_id if not out else "sha256:" + hashlib.sha256(f"{out[-1]} {diff_id}".encode()).hexdigest())
    return out


def images() -> dict[str, list[str]]:
    """Every image of the engine: id -> its layers (diff_ids), as the engine reports them."""
    listed = ENGINE.run_cli(["images", "--quiet", "--no-trunc", "--all"])
    ids = list(dict.fromkeys(listed.stdout.split())) if listed.returncode == 0 else []
    inspected = ENGINE.run_cli(["image", "inspect", *ids]) if ids else None
    docs = json.loads(inspected.stdout) if inspected is not None and inspected.returncode == 0 else []
    return {d["Id"]: list((d.get("RootFS") or {}).get("Layers") or []) for d in docs}
