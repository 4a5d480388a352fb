"""A delta disc's archive written from an engine's layer store, without an engine: a store laid out
as overlay2 keeps it (imagedb config, layerdb tar-split record and cache-id, diff folder) gives each
carried layer back byte for byte, reads no layer the disc leaves to the host, and a file changed in
the store stops the export naming the layer. The same against `docker save` on the real engine:
tests/integration/export/test_delta_chain.py."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from rapidship.errors import RapidshipError
from rapidship.export import delta, hostlayers


def layer_tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def lay_out(root: Path, layers: list[bytes]) -> str:
    """An overlay2 store under `root` holding one image of `layers`; returns its id."""
    diff_ids = [sha(t) for t in layers]
    for n, (tar_bytes, chain) in enumerate(zip(layers, hostlayers.chain_ids(diff_ids))):
        meta = root / "image/overlay2/layerdb/sha256" / chain[7:]
        diff = root / "overlay2" / f"cache{n}" / "diff"
        meta.mkdir(parents=True)
        diff.mkdir(parents=True)
        (meta / "cache-id").write_text(f"cache{n}")
        entries, pos = [], 0
        for member in tarfile.open(fileobj=io.BytesIO(tar_bytes)):
            entries.append({"type": 2, "payload": base64.b64encode(tar_bytes[pos:member.offset_data]).decode()})
            entries.append({"type": 1, "name": member.name, "size": member.size})
            (diff / member.name).write_bytes(tar_bytes[member.offset_data:member.offset_data + member.size])
            pos = member.offset_data + member.size
        entries.append({"type": 2, "payload": base64.b64encode(tar_bytes[pos:]).decode()})
        with gzip.open(meta / "tar-split.json.gz", "wt") as fh:
            fh.write("".join(json.dumps(e) + "\n" for e in entries))
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    content = root / "image/overlay2/imagedb/content/sha256"
    content.mkdir(parents=True)
    (content / sha(config)[7:]).write_bytes(config)
    return sha(config)


LAYERS = [layer_tar({"base.bin": b"b" * 5000}), layer_tar({"mid.bin": b"m" * 700, "x": b""}),
          layer_tar({"top.bin": b"t" * 3000})]


@pytest.fixture
def store(tmp_path, monkeypatch):
    image = lay_out(tmp_path, LAYERS)
    s = hostlayers.Store(tmp_path)
    monkeypatch.setattr(hostlayers, "store", lambda: s)
    return s, image


def test_the_store_gives_each_layer_back_byte_for_byte_and_sizes_it_from_its_record(store):
    s, _ = store
    for tar_bytes, chain in zip(LAYERS, hostlayers.chain_ids([sha(t) for t in LAYERS])):
        assert s.size(chain) == len(tar_bytes)
        assert b"".join(s.read(chain)) == tar_bytes


def test_the_archive_carries_only_the_layers_the_host_lacks(store):
    _, image = store
    said, out = [], io.BytesIO()
    delta.write_archive([image], frozenset({sha(LAYERS[0])}), out, say=said.append)
    archive = tarfile.open(fileobj=io.BytesIO(out.getvalue()))
    blobs = {m.name.rsplit("/", 1)[1]: archive.extractfile(m).read() for m in archive if m.isfile()
             and m.name.startswith("blobs/sha256/")}
    assert blobs == {sha(LAYERS[1])[7:]: LAYERS[1], sha(LAYERS[2])[7:]: LAYERS[2],
                     image[7:]: blobs[image[7:]]} and sha(blobs[image[7:]]) == image
    manifest = json.loads(archive.extractfile("manifest.json").read())
    assert manifest[0]["Layers"] == [f"blobs/sha256/{sha(t)[7:]}" for t in LAYERS]  # names all, carries two
    assert said == ["delta: 2 layer(s) read from the engine's layer store, each hashed against the diff_id its "
                    "config lists; no docker save"]


def test_a_file_changed_in_the_store_stops_the_export_naming_the_layer(store):
    s, image = store
    (s.root / "overlay2/cache2/diff/top.bin").write_bytes(b"T" * 3000)  # same size, other bytes
    with pytest.raises(RapidshipError) as caught:
        delta.write_archive([image], frozenset({sha(LAYERS[0])}), io.BytesIO())
    assert sha(LAYERS[2])[:19] in caught.value.problem and "is not the layer its config lists" in caught.value.problem


def test_a_stored_config_that_does_not_hash_to_its_id_is_not_read_from_the_store(store):
    s, image = store
    path = s.root / "image/overlay2/imagedb/content/sha256" / image[7:]
    path.write_bytes(path.read_bytes().replace(b"amd64", b"arm64"))
    assert delta._from_store([image], frozenset()) is None  # docker save then, which the engine checks
