"""The archive a loader receives: written here, from the images to load and the bytes that hash to them.

`docker load` unpacks the courier's whole archive and follows its links; Go reads its JSON with
case-folded keys; containerd and newer engines load what index.json names; skopeo reads the tar
in place. Rather than prove that each of them reads the courier's archive as a checker did, none
of them gets it. The archive is read twice, by content only:

  pass 1 (`scan`): every regular member is hashed, in stream order; its name, and every link,
    directory, device, manifest.json, index.json or `repositories` member, is never consulted.
    A member small enough to be a config is held only until its hash shows it is one of the
    configs asked for (the signed image ids).
  `plan` (pure): for each image to load, its config by content (its digest is the image id), the
    layers its config lists (rootfs.diff_ids, read strictly) by content, and the names to give it
    (the signed names the disc's record uses); one line per problem.
  pass 2 (`write`): the archive decompressed again; each planned member is copied, hashed again as
    it goes, into a new docker-archive of regular files `blobs/sha256/<hex>` and a `manifest.json`
    made here (Config, RepoTags, Layers), written last. A member that no longer hashes as in pass
    1 (the disc changed between the passes) ends the output with a block no tar reader accepts,
    before manifest.json, so a loader reading it creates nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from dataclasses import dataclass, field
from typing import IO, Callable, ContextManager, Iterable, Iterator

from rapidship import oci_json
from rapidship.export.tarstream import TarStream

CONFIG_MAX = 4 << 20  # an image config is a few KiB; a larger member is hashed, never held
BLOBS = "blobs/sha256"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_POISON = b"\xff" * tarfile.BLOCKSIZE  # a header whose checksum no tar reader accepts


class Changed(Exception):
    """Pass 2 did not read what pass 1 read: the archive changed under the import."""


@dataclass(frozen=True)
class Blob:
    ordinal: int  # the member's position in the archive (every member counts)
    size: int


@dataclass
class Scan:
    """Pass 1: what the archive holds, by content."""

    blobs: dict[str, Blob] = field(default_factory=dict)     # sha256 hex -> first regular member holding it
    configs: dict[str, bytes] = field(default_factory=dict)  # image id -> the member that hashes to it
    members: int = 0
    not_files: int = 0  # links, directories, devices: never read, never passed on


@dataclass(frozen=True)
class Wanted:
    """One image to load: its id (from the verified signature, or the disc's record), its names."""

    image_id: str
    tags: tuple[str, ...]
    label: str  # how messages name it


@dataclass(frozen=True)
class Planned:
    image_id: str
    config: bytes
    diff_ids: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    images: tuple[Planned, ...]
    take: dict[int, str]   # member ordinal -> the sha256 hex it must hash to
    sizes: dict[int, int]  # member ordinal -> its bytes
    ignored: int = 0       # members of the courier's archive that reach no loader (its metadata among them)
    # a delta disc: layers the disc lacks, from a second archive (`docker save` of the host's images)
    held_take: dict[int, str] = field(default_factory=dict)
    held_sizes: dict[int, int] = field(default_factory=dict)
    held_images: tuple[str, ...] = ()  # the host's images that archive is saved from
    # a delta disc: layers read from the engine's layer store (export/hostlayers.py): diff_id -> (chain, bytes)
    from_store: dict[str, tuple[str, int]] = field(default_factory=dict)
    skipped: int = 0  # layers the disc lacks that docker's loader takes from the engine by chain ID
    left_out: int = 0  # layers the disc carries, not fed: docker's loader holds their chains

    @property
    def held_layers(self) -> set[str]:
        return set(self.held_take.values())

    @property
    def layer_bytes(self) -> int:
        return sum(self.sizes.values()) + sum(self.held_sizes.values()) + sum(n for _, n in self.from_store.values())


# ---- pass 1 --------------------------------------------------------------------------------------

def scan(stream: IO[bytes], config_ids: set[str]) -> Scan:
    """Hash every regular member of a tar stream; keep the members that hash to `config_ids`.
    Raises tarfile.TarError when the stream is not a tar."""
    found = Scan()
    tar = TarStream(stream)
    for ordinal, regular, size in tar.members():
        found.members += 1
        if not regular:
            found.not_files += 1
            continue
        digest, held = hashlib.sha256(), []
        keep = size <= CONFIG_MAX
        for chunk in tar.data():
            digest.update(chunk)
            if keep:
                held.append(bytes(chunk))
        hexdigest = digest.hexdigest()
        found.blobs.setdefault(hexdigest, Blob(ordinal, size))
        if keep and "sha256:" + hexdigest in config_ids:
            found.configs.setdefault("sha256:" + hexdigest, b"".join(held))
    return found


# ---- the plan (pure) -----------------------------------------------------------------------------

def diff_ids(config: bytes) -> tuple[str, ...] | str:
    """The layer list of a config, strictly (as the image-spec has it), or the problem with it."""
    try:
        doc = oci_json.parse(config)
    except oci_json.Ambiguous as err:
        return f"its config is not JSON one way ({err})"
    rootfs = doc.get("rootfs") if isinstance(doc, dict) else None
    listed = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(listed, list) or not listed or not all(isinstance(d, str) and _DIGEST.match(d) for d in listed):
        return "its config lists no layers as sha256:<64 hex> (rootfs.diff_ids)"
    return tuple(listed)


def plan(found: Scan, wanted: list[Wanted], held: Scan | None = None,
         elsewhere: frozenset[str] = frozenset(), leave_out: frozenset[str] = frozenset()) -> tuple[Plan, list[str]]:
    """Every image's config and layers by content (a layer the archive lacks from `held`, the host's
    own archive, when given; none for the diff_ids `elsewhere`, which the host gives another way:
    export/hostlayers.py, nor for those to `leave_out`, whose chains the loader holds); problems
    name the image and what is missing."""
    images: list[Planned] = []
    take: dict[int, str] = {}
    sizes: dict[int, int] = {}
    held_take: dict[int, str] = {}
    held_sizes: dict[int, int] = {}
    problems: list[str] = []
    for want in wanted:
        config = found.configs.get(want.image_id)
        if config is None:
            problems.append(f"{want.label}: the archive holds no config that hashes to {want.image_id[:19]}")
            continue
        layers = diff_ids(config)
        if isinstance(layers, str):
            problems.append(f"{want.label}: {layers}")
            continue
        for i, diff_id in enumerate(layers, 1):
            if diff_id in leave_out:
                continue
            blob = found.blobs.get(diff_id[7:])
            kept = held.blobs.get(diff_id[7:]) if held is not None and blob is None else None
            if blob is None and diff_id in elsewhere:
                continue
            if kept is not None:
                held_take[kept.ordinal], held_sizes[kept.ordinal] = diff_id[7:], kept.size
            elif blob is None:
                problems.append(f"{want.label}: layer {i} of {len(layers)} ({diff_id[:23]}...) is not in the "
                                "archive: no member hashes to the diff_id its config lists")
            else:
                take[blob.ordinal], sizes[blob.ordinal] = diff_id[7:], blob.size
        images.append(Planned(want.image_id, config, layers, want.tags))
    named: dict[str, str] = {}
    for image in images:
        for tag in image.tags:
            if named.setdefault(tag, image.image_id) != image.image_id:
                problems.append(f"the disc gives the name {tag} to two images ({named[tag][:19]} and "
                                f"{image.image_id[:19]}): a loader would keep only one")
    ignored = found.members - len(take) - len({i.image_id for i in images}) - len(leave_out & {"sha256:" + h for h in found.blobs})
    return Plan(tuple(images), take, sizes, ignored, held_take, held_sizes, left_out=len(leave_out)), problems


def missing_layers(found: Scan, wanted: list[Wanted]) -> set[str]:
    """The diff_ids the configs of `wanted` list and the archive does not hold (what a delta disc
    expects the host to have)."""
    out = set()
    for want in wanted:
        layers = diff_ids(found.configs[want.image_id]) if want.image_id in found.configs else ()
        out.update(d for d in layers if isinstance(layers, tuple) and d[7:] not in found.blobs)
    return out


def manifest_json(images: tuple[Planned, ...]) -> bytes:
    """The archive's manifest.json: exactly these configs, names and layers, nothing else."""
    return json.dumps([{"Config": f"{BLOBS}/{i.image_id[7:]}", "RepoTags": list(i.tags),
                        "Layers": [f"{BLOBS}/{d[7:]}" for d in i.diff_ids]} for i in images]).encode()


# ---- pass 2 --------------------------------------------------------------------------------------

def member_header(name: str, size: int, directory: bool = False) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = (0, 0o755, 0) if directory else (size, 0o644, 0)
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    return info.tobuf(tarfile.PAX_FORMAT)


def padding(size: int) -> bytes:
    return b"\0" * (-size % tarfile.BLOCKSIZE)


def write(stream: IO[bytes], p: Plan, out: IO[bytes], on_bytes: Callable[[int], None] = lambda _: None,
          held: Callable[[], ContextManager[IO[bytes]]] | None = None,
          stored: Callable[[str], Iterable[bytes]] | None = None) -> None:
    """Copy the planned members of the tar `stream` (and, for a delta disc, of the host's archive
    `held` opens and the layers `stored` reads from the engine's layer store by chain) into `out` as
    a new docker-archive. Raises Changed (after poisoning `out`) when a member or a stored layer no
    longer hashes as planned or is missing."""
    try:
        _write(stream, p, out, on_bytes, held, stored)
    except (Changed, tarfile.TarError) as err:
        out.write(_POISON)
        out.flush()
        raise Changed(str(err)) from None


def _copy(stream: IO[bytes], take: dict[int, str], sizes: dict[int, int], out: IO[bytes],
          on_bytes: Callable[[int], None]) -> None:
    done: set[int] = set()
    tar = TarStream(stream)
    for ordinal, regular, size in tar.members():
        want = take.get(ordinal)
        if want is None:
            continue
        if not regular or size != sizes[ordinal]:
            raise Changed(f"archive member {ordinal} is no longer the layer sha256:{want[:16]}...")
        out.write(member_header(f"{BLOBS}/{want}", size))
        digest = hashlib.sha256()
        for chunk in tar.data():
            digest.update(chunk)
            out.write(chunk)
            on_bytes(len(chunk))
        if digest.hexdigest() != want:
            raise Changed(f"archive member {ordinal} no longer hashes to sha256:{want[:16]}...")
        out.write(padding(size))
        done.add(ordinal)
    if missing := sorted(set(take) - done):
        raise Changed(f"{len(missing)} planned layer member(s) are no longer in the archive")


def _read_stored(stored: Callable[[str], Iterable[bytes]], chain: str, diff_id: str) -> Iterator[bytes]:
    """The store's bytes, its read errors as Changed (a write error to the loader stays what it is)."""
    chunks = iter(stored(chain))
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            return
        except OSError as err:
            raise Changed(f"the engine's layer {diff_id[:23]}... can no longer be read ({err})") from None
        yield chunk


def _copy_stored(p: Plan, stored: Callable[[str], Iterable[bytes]] | None, out: IO[bytes],
                 on_bytes: Callable[[int], None]) -> None:
    if p.from_store and stored is None:
        raise Changed("the plan takes layers from the engine's layer store, and it was not given")
    for diff_id, (chain, size) in p.from_store.items():
        out.write(member_header(f"{BLOBS}/{diff_id[7:]}", size))
        digest, left = hashlib.sha256(), size
        for chunk in _read_stored(stored, chain, diff_id):  # type: ignore[arg-type]
            if len(chunk) > left:
                raise Changed(f"the engine's layer {diff_id[:23]}... grew since it was read")
            digest.update(chunk)
            out.write(chunk)
            on_bytes(len(chunk))
            left -= len(chunk)
        if left or "sha256:" + digest.hexdigest() != diff_id:
            raise Changed(f"the engine's layer {diff_id[:23]}... no longer hashes to its diff_id")
        out.write(padding(size))


def _write(stream: IO[bytes], p: Plan, out: IO[bytes], on_bytes: Callable[[int], None],
           held: Callable[[], ContextManager[IO[bytes]]] | None,
           stored: Callable[[str], Iterable[bytes]] | None) -> None:
    out.write(member_header("blobs/", 0, True) + member_header(BLOBS + "/", 0, True))
    _copy(stream, p.take, p.sizes, out, on_bytes)
    if p.held_take:
        if held is None:
            raise Changed("the plan takes layers from the host's images, and none were given")
        with held() as host:
            _copy(host, p.held_take, p.held_sizes, out, on_bytes)
    _copy_stored(p, stored, out, on_bytes)
    written: set[str] = set()
    for image in p.images:
        if image.image_id not in written:
            written.add(image.image_id)
            out.write(member_header(f"{BLOBS}/{image.image_id[7:]}", len(image.config)) + image.config
                      + padding(len(image.config)))
    manifest = manifest_json(p.images)
    out.write(member_header("manifest.json", len(manifest)) + manifest + padding(len(manifest)))
    out.write(b"\0" * (2 * tarfile.BLOCKSIZE))
    out.flush()
