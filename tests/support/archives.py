"""Tiny images and the docker-archives engines write of them, built in memory (no engine).

`Image`: layer tars and a config with the labels verification reads (the release among them).
`archive_v1`: what `docker save` of engine 20.10 writes (`<hex>.json` configs, `<id>/layer.tar`, a
layer shared by two images saved once and then linked); `archive_oci`: what newer engines write
(`blobs/sha256/<hex>` for everything, manifest.json and index.json).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

from rapidship.sign import formats as f

VARIANT, LOCK = "cpu-debian12", "ab" * 32
CREATED = "2026-12-01T00:00:00+00:00"
LABELS = {"io.rapidship.variant": VARIANT, "io.rapidship.lock.sha256": LOCK,
          "org.opencontainers.image.created": CREATED, "org.opencontainers.image.revision": "c0ffee" * 6 + "cafe"}


def tar(members: list[tuple[str, bytes | str]]) -> bytes:
    """A tar of (name, bytes) files, (name, '->target') symlinks and (name, '=>target') hard links."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if isinstance(data, str):
                info.type = tarfile.SYMTYPE if data.startswith("->") else tarfile.LNKTYPE
                info.linkname = data[2:]
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Image:
    """A tiny image: layer tars, its config (with the labels the provenance is checked against)."""

    def __init__(self, name: str, *layer_texts: str, labels: dict | None = None) -> None:
        self.ref = f"site/{name}:1"
        self.layers = [tar([(f"layer-{i}.txt", text.encode())]) for i, text in enumerate(layer_texts)]
        self.config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": labels or LABELS},
                                  "rootfs": {"type": "layers", "diff_ids": ["sha256:" + sha(x) for x in self.layers]}},
                                 separators=(",", ":")).encode()
        self.id = "sha256:" + sha(self.config)
        self.manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                                    "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                                               "size": len(self.config), "digest": self.id},
                                    "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                                                "size": len(x), "digest": "sha256:" + sha(x)} for x in self.layers]},
                                   indent=3).encode()
        self.digest = f.sha256(self.manifest)


def archive_v1(*images: Image, extra: list | None = None, tags: dict | None = None) -> bytes:
    """docker save of engine 20.10: <hex>.json configs, <id>/layer.tar (a layer saved once, then linked)."""
    members, entries, saved = [], [], {}
    for image in images:
        paths = []
        for layer in image.layers:
            lid = sha(image.id.encode() + layer)
            if sha(layer) in saved:
                members.append((f"{lid}/layer.tar", f"->../{saved[sha(layer)]}/layer.tar"))
            else:
                members.append((f"{lid}/layer.tar", layer))
                saved[sha(layer)] = lid
            paths.append(f"{lid}/layer.tar")
        members.append((f"{image.id[7:]}.json", image.config))
        entries.append({"Config": f"{image.id[7:]}.json", "RepoTags": (tags or {}).get(image.ref, [image.ref]),
                        "Layers": paths})
    return tar(members + (extra or []) + [("manifest.json", json.dumps(entries).encode())])


def archive_oci(*images: Image, index_extra: list[Image] = ()) -> bytes:
    """docker save of newer engines: blobs/sha256/<hex> for everything, manifest.json and index.json."""
    members, entries, index = {}, [], []
    for image in [*images, *index_extra]:
        for layer in image.layers:
            members[f"blobs/sha256/{sha(layer)}"] = layer
        members[f"blobs/sha256/{image.id[7:]}"] = image.config
        oci = json.dumps({"schemaVersion": 2, "mediaType": f.OCI_MANIFEST,
                          "config": {"mediaType": f.OCI_CONFIG, "digest": image.id, "size": len(image.config)},
                          "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "size": len(x),
                                      "digest": "sha256:" + sha(x)} for x in image.layers]}).encode()
        members[f"blobs/sha256/{sha(oci)}"] = oci
        index.append({"mediaType": f.OCI_MANIFEST, "digest": "sha256:" + sha(oci), "size": len(oci)})
        if image in images:
            entries.append({"Config": f"blobs/sha256/{image.id[7:]}", "RepoTags": [image.ref],
                            "Layers": [f"blobs/sha256/{sha(x)}" for x in image.layers]})
    doc = {"schemaVersion": 2, "mediaType": f.OCI_INDEX, "manifests": index}
    return tar([*members.items(), ("index.json", json.dumps(doc).encode()),
                ("manifest.json", json.dumps(entries).encode()), ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')])


def extended_header(kind: bytes, declared: int) -> bytes:
    """The 512-byte header of a pax ('x'), global pax ('g') or GNU long-name ('L') member that
    declares `declared` bytes of records after it (what a courier crafts; the records are not here)."""
    info = tarfile.TarInfo("././@PaxHeader" if kind != b"L" else "././@LongLink")
    info.type, info.size = kind, declared
    return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "strict")[-512:]


class Zeros(io.RawIOBase):
    """`head`, then `n` zero bytes, then `tail`, produced as read (never held): a header's declared
    records cost the reader what it keeps of them, not this stream."""

    def __init__(self, head: bytes, n: int, tail: bytes = b"") -> None:
        self.head, self.n, self.tail, self.read_bytes = head, n, tail, 0

    def readable(self) -> bool:
        return True

    def readinto(self, view) -> int:
        if self.head:
            got = min(len(view), len(self.head))
            view[:got], self.head = self.head[:got], self.head[got:]
        elif self.n:
            got = min(len(view), self.n)
            view[:got] = bytes(got)
            self.n -= got
        else:
            got = min(len(view), len(self.tail))
            view[:got], self.tail = self.tail[:got], self.tail[got:]
        self.read_bytes += got
        return got
