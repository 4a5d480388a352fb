"""What the gates need of one layer, noted where its bytes are written, kept under its diff_id.

A layer is content-addressed: its diff_id is the sha256 of its tar. The normaliser writes every
layer of an image and hashes it as it goes; while the bytes pass it also notes each member (path,
type, mode, size, owners, file capabilities, link target) and the sha256 of every file under the
content roots. The facts are kept as build/layers/sha256-<hex>.json, named by the diff_id computed
from those bytes, never by a name the layer was given.

`invoke gates` then reads an image's facts through its config's diff_ids (the engine's inspect of
the image id the build record names), lays them bottom to top as the image spec's changesets say
(a `.wh.` entry removes a path of the layers below, `.wh..wh..opq` hides a folder's lower
content, a non-folder replacing a folder takes its children away) and judges that flattened tree,
the one `docker export` streams, without reading the image again. An image with a layer that has
no facts (one normalised elsewhere: a CI runner's daemonless build) is read whole, as before.
Facts never vouch for another layer: a file whose diff_id is not the one asked for is not used.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Iterable

from rapidship.image import CAPABILITY_XATTR, FileEntry
from rapidship.records import Record, RecordError, load, save

WHITEOUT, OPAQUE = ".wh.", ".wh..wh..opq"
# one member: path (absolute, no trailing slash), kind, mode, size, uid, gid, capabilities, link
# target (symlink or hard link), sha256 of its data ('' outside the roots, or not a file)
Member = tuple[str, str, int, int, int, int, bool, str, str]
KINDS = {"file": "f", "dir": "d", "symlink": "l", "hardlink": "h", "other": "o"}


class LayerFacts(Record):
    """build/layers/sha256-<hex>.json: one layer's members, as the normaliser wrote them."""

    diff_id: str
    roots: list[str]
    members: list[Member]
    needles: str = ""  # the keyed fingerprint of the secret needles its files were searched for ('' none)
    found: list[tuple[str, str]] = []  # (needle name, path) of each file a needle was found in


LayerHits = list[tuple[str, str]] | None  # (needle name, where); None: the layers must be read for them


def layer_hits(layers: list[LayerFacts], fingerprint: str) -> LayerHits:
    """Pure: every needle found in any layer (deleted files too: each layer's own files), where
    each layer was searched for exactly these needles; None where one was not."""
    if not fingerprint or any(f.needles != fingerprint for f in layers):
        return None
    return [(name, f"layer {f.diff_id[7:19]} {path}") for f in layers for name, path in f.found]


def path_of(name: str) -> str:
    """A tar member's name as an absolute path ('./a/b/', 'a/b' -> '/a/b')."""
    return "/" + "/".join(p for p in name.split("/") if p not in ("", "."))


def kind_of(m: tarfile.TarInfo) -> str:
    return (KINDS["file"] if m.isfile() else KINDS["dir"] if m.isdir() else KINDS["symlink"] if m.issym()
            else KINDS["hardlink"] if m.islnk() else KINDS["other"])


def member(m: tarfile.TarInfo, sha256: str = "") -> Member:
    """Pure: the facts of one tar member (`sha256`: of its data, where hashed)."""
    return (path_of(m.name), kind_of(m), m.mode, m.size if m.isfile() else 0, m.uid, m.gid,
            CAPABILITY_XATTR in (m.pax_headers or {}), m.linkname if (m.issym() or m.islnk()) else "", sha256)


def hashed(path: str, roots: Iterable[str]) -> bool:
    return path.startswith(tuple(roots))


# ---- the flattened tree (pure) ---------------------------------------------------------------

def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/") if folder != "/" else path != "/"


def flatten(layers: list[LayerFacts]) -> dict[str, Member]:
    """The image's tree (path -> member), its layers applied bottom to top."""
    tree: dict[str, Member] = {}
    for layer in layers:
        gone: list[str] = []   # whiteouts and opaque folders act on the layers below this one
        hidden: list[str] = []
        for m in layer.members:
            base = m[0].rsplit("/", 1)[-1]
            if base == OPAQUE:
                hidden.append(m[0].rsplit("/", 1)[0] or "/")
            elif base.startswith(WHITEOUT):
                gone.append(m[0].rsplit("/", 1)[0] + "/" + base[len(WHITEOUT):])
        if gone or hidden:
            for path in list(tree):
                if path in gone or any(_under(path, g) for g in gone) or any(_under(path, h) for h in hidden):
                    del tree[path]
        for m in layer.members:
            if m[0].rsplit("/", 1)[-1].startswith(WHITEOUT) or m[0] == "/":
                continue
            lower = tree.get(m[0])
            if lower is not None and lower[1] == KINDS["dir"] and m[1] != KINDS["dir"]:
                for path in [p for p in tree if _under(p, m[0])]:
                    del tree[path]
            tree[m[0]] = m
    return tree


def view(tree: dict[str, Member], roots: tuple[str, ...]) -> tuple[list[FileEntry], dict[str, str], dict[str, str]]:
    """Pure: what one read of the flattened image gives the gates (image.snapshot's fields): every
    entry, the sha256 of each file under `roots` and the target of each symlink there."""
    files, digests, links = [], {}, {}
    for path, (_, kind, mode, size, uid, gid, caps, link, sha) in sorted(tree.items()):
        files.append(FileEntry(layer="final", path=path, mode=mode, size=size, is_file=kind == KINDS["file"],
                               is_dir=kind == KINDS["dir"], capabilities=caps, uid=uid, gid=gid))
        if kind == KINDS["file"] and hashed(path, roots):
            digests[path] = sha
        elif kind == KINDS["symlink"] and hashed(path, roots):
            links[path] = link
    return files, digests, links


# ---- the store (thin I/O) --------------------------------------------------------------------

def facts_path(root: Path, diff_id: str) -> Path:
    return root / "layers" / (diff_id.replace(":", "-") + ".json")


def keep(root: Path, facts: LayerFacts) -> Path:
    """Save (atomically: a reader sees the old facts or the new) over any earlier facts of the
    layer: the newest search for needles wins."""
    return save(facts_path(root, facts.diff_id), facts)


def key_path(root: Path) -> Path:
    """The workspace's own key for the needles' fingerprint (needles.fingerprint)."""
    return root / "layers" / "needles.key"


def read(root: Path, diff_ids: list[str], roots: tuple[str, ...]) -> list[LayerFacts] | str:
    """Each layer's facts in order, or why they cannot be used (the first layer lacking them)."""
    out = []
    for i, diff_id in enumerate(diff_ids):
        path = facts_path(root, diff_id)
        if not path.is_file():
            return f"layer {i} ({diff_id[:19]}) has no facts in {path.parent}"
        try:
            facts = load(path, LayerFacts, "invoke build (its normaliser notes each layer)", "layer facts")
        except RecordError as err:
            return str(err)
        if facts.diff_id != diff_id:
            return f"{path} holds the facts of {facts.diff_id[:19]}, not of layer {i} ({diff_id[:19]})"
        if not set(roots) <= set(facts.roots):
            return f"{path} hashed {facts.roots}, not {list(roots)}"
        out.append(facts)
    return out
