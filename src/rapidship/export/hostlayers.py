"""The layers a delta disc leaves to the host: those the loader skips by chain ID, and those read
from the engine's layer store, by content.

Moby's loader (image/tarexport/load.go, dockerd 20.10) walks each config's diff_ids from the
bottom: for layer i it computes the chain ID of diff_ids[:i+1] and, when its layer store holds that
chain, uses it without opening the archive's file for the layer (manifest.json names the file; it
is never read). So a layer whose chain the engine holds stays out of the loader's archive. A layer
the disc lacks whose chain is new (it lies above a changed layer) must be in it: its bytes are in
the engine under another chain, and the overlay2 layer store gives them back exactly (the layer's
tar-split record, headers and sizes, with the files of its diff folder: what `docker save` does,
for that layer alone). They are hashed against the diff_id the signed config lists before the plan
takes them (pass 1) and again as they go to the loader (pass 2). Where the store cannot be read
(another driver, no permission) or does not hash right, `docker save` of the images holding the
layer still gives it, as before, by content.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from rapidship.engine import ENGINE
from rapidship.image import chain_ids, images  # noqa: F401 - the engine's layers, read where images are read

CHUNK = 1 << 20


@dataclass(frozen=True)
class Engine:
    """What the engine's images say of its layer store: the chains it holds, and for each layer
    (diff_id) one chain whose top layer it is."""

    chains: frozenset[str]
    top_of: dict[str, str]


def engine_layers(held: dict[str, list[str]]) -> Engine:
    """Pure over `images()`."""
    chains, top_of = set(), {}
    for layers in held.values():
        for diff_id, chain in zip(layers, chain_ids(layers)):
            chains.add(chain)
            top_of.setdefault(diff_id, chain)
    return Engine(frozenset(chains), top_of)


@dataclass(frozen=True)
class Sorted:
    skipped: int                # layers (positions) the loader takes from the engine by chain ID
    needed: dict[str, str]      # diff_id -> a chain of the engine whose top layer it is: its bytes go to the loader
    absent: frozenset[str]      # diff_ids neither on the disc nor in the engine


def held_on_disc(configs: list[tuple[str, ...]], on_disc: Callable[[str], bool], engine: Engine) -> frozenset[str]:
    """Pure: the layers the disc carries that docker's loader would not read, wherever a config
    lists them: their chain (from the config's own diff_ids) is in the engine. A full disc onto an
    engine that holds the release, or the lower layers of a patch, need not be fed again."""
    held, needed = set(), set()
    for diff_ids in configs:
        for diff_id, chain in zip(diff_ids, chain_ids(diff_ids)):
            if on_disc(diff_id):
                (held if chain in engine.chains else needed).add(diff_id)
    return frozenset(held - needed)


def sort_missing(configs: list[tuple[str, ...]], on_disc: Callable[[str], bool], engine: Engine,
                 skip_held_chains: bool) -> Sorted:
    """Pure: for every layer of every signed config that the disc lacks, whether the loader can skip
    it (its chain, computed from the config's own diff_ids, is in the engine; only when the loader is
    docker's), whose bytes the host must give, or that nothing here holds it."""
    skipped, needed, absent = 0, {}, set()
    for diff_ids in configs:
        for diff_id, chain in zip(diff_ids, chain_ids(diff_ids)):
            if on_disc(diff_id):
                continue
            if skip_held_chains and chain in engine.chains:
                skipped += 1
            elif diff_id in engine.top_of:
                needed[diff_id] = engine.top_of[diff_id]
            else:
                absent.add(diff_id)
    return Sorted(skipped, needed, frozenset(absent))


@dataclass(frozen=True)
class Store:
    """The engine's overlay2 layer store, where this process can read it."""

    root: Path  # the engine's DockerRootDir

    def _layer(self, chain: str) -> tuple[Path, list[dict]]:
        meta = self.root / "image" / "overlay2" / "layerdb" / "sha256" / chain[7:]
        cache_id = (meta / "cache-id").read_text().strip()
        if not cache_id or "/" in cache_id or cache_id.startswith("."):
            raise OSError(f"unusable cache-id for {chain[:19]}")
        with gzip.open(meta / "tar-split.json.gz", "rt") as fh:
            entries = [json.loads(line) for line in fh if line.strip()]
        return self.root / "overlay2" / cache_id / "diff", entries

    def size(self, chain: str) -> int:
        """The layer tar's bytes, from its tar-split record alone (no file is read)."""
        _, entries = self._layer(chain)
        return sum(len(base64.b64decode(e.get("payload") or "")) if e.get("type") == 2 else int(e.get("size") or 0)
                   for e in entries)

    def config(self, image_id: str) -> bytes:
        """The image's config as the engine stores it; OSError unless its bytes hash to the image id."""
        data = (self.root / "image" / "overlay2" / "imagedb" / "content" / "sha256" / image_id.removeprefix("sha256:")
                ).read_bytes()
        if "sha256:" + hashlib.sha256(data).hexdigest() != image_id:
            raise OSError(f"the stored config of {image_id[:19]} does not hash to its id")
        return data

    def read(self, chain: str) -> Iterator[bytes]:
        """The layer's tar, as it was loaded or built: tar-split's raw segments, and each file's
        bytes from the diff folder. Raises OSError where a file is missing or shorter."""
        diff, entries = self._layer(chain)
        for entry in entries:
            if entry.get("type") == 2:
                yield base64.b64decode(entry.get("payload") or "")
            elif entry.get("type") == 1 and (size := int(entry.get("size") or 0)):
                name = base64.b64decode(entry["name_raw"]) if entry.get("name_raw") else entry.get("name", "").encode()
                if b".." in Path(os.fsdecode(name)).parts or name.startswith(b"/"):
                    raise OSError(f"a file name of layer {chain[:19]} leaves its folder")
                with open(diff / os.fsdecode(name), "rb") as fh:
                    while size:
                        chunk = fh.read(min(size, CHUNK))
                        if not chunk:
                            raise OSError(f"a file of layer {chain[:19]} is shorter than its record")
                        size -= len(chunk)
                        yield chunk


def store() -> Store | None:
    """The engine's layer store where it is overlay2 and readable here, else None."""
    got = ENGINE.run_cli(["info", "--format", "{{.Driver}} {{.DockerRootDir}}"])
    driver, _, root = got.stdout.strip().partition(" ") if got.returncode == 0 else ("", "", "")
    layerdb = Path(root) / "image" / "overlay2" / "layerdb"
    return Store(Path(root)) if driver == "overlay2" and os.access(layerdb, os.R_OK | os.X_OK) else None


def store_reader(planned: tuple[Store, dict[str, str]]) -> Callable[[str], Iterator[bytes]]:
    """diff_id -> its bytes from the store, by the chain planned for it."""
    s, chains = planned
    return lambda diff_id: s.read(chains[diff_id])


def measured(s: Store, needed: dict[str, str], on_bytes: Callable[[int], None]) -> dict[str, tuple[str, int]]:
    """Pass 1 over the store: diff_id -> (chain, tar bytes) for each needed layer whose bytes there
    hash to its diff_id; the others are left out (and taken from `docker save`)."""
    found = {}
    for diff_id, chain in needed.items():
        digest, size = hashlib.sha256(), 0
        try:
            for chunk in s.read(chain):
                digest.update(chunk)
                size += len(chunk)
                on_bytes(len(chunk))
        except (OSError, ValueError, KeyError):
            continue
        if "sha256:" + digest.hexdigest() == diff_id:
            found[diff_id] = (chain, size)
    return found
