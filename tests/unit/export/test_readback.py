"""export-verify's read-back (export/readback.py), without an engine: the archive repack writes from a
disc is read back by name and gives each tag its image; an archive that names a layer it does not
hold, swaps two layers, names a config by another's hash, holds a name twice or has no manifest is
refused, whatever the writer believed. A writer that fails is reported as itself."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from rapidship.errors import GateFailure
from rapidship.export import readback, repack
from rapidship.export.verify import Checked
from support.archives import Image, archive_v1, sha, tar


@pytest.fixture(scope="module")
def pair():
    return Image("b", "base layer", "b's own"), Image("c", "base layer", "c's own")


def written(data: bytes, *images: Image) -> bytes:
    want = [repack.Wanted(i.id, (i.ref,), i.ref) for i in images]
    plan, problems = repack.plan(repack.scan(io.BytesIO(data), {w.image_id for w in want}), want)
    assert problems == []
    out = io.BytesIO()
    repack.write(io.BytesIO(data), plan, out)
    return out.getvalue()


def ids_of(archive: bytes) -> tuple[dict[str, str], list[str]]:
    return readback.images_of(*readback.read_archive(io.BytesIO(archive)))


def blob(data: bytes) -> str:
    return f"{repack.BLOBS}/{sha(data)}"


def entry(image: Image, layers: list[bytes] | None = None, config: str | None = None) -> dict:
    return {"Config": config or f"{repack.BLOBS}/{image.id[7:]}", "RepoTags": [image.ref],
            "Layers": [blob(x) for x in (image.layers if layers is None else layers)]}


def archive(members: list[tuple[str, bytes]], manifest: list[dict] | None) -> bytes:
    return tar(members + ([("manifest.json", json.dumps(manifest).encode())] if manifest is not None else []))


def test_the_written_archive_reads_back_as_each_tag_s_image(pair):
    b, c = pair
    assert ids_of(written(archive_v1(b, c), b, c)) == ({b.ref: b.id, c.ref: c.id}, [])


def test_layers_out_of_the_config_s_order_are_refused(pair):
    b, _ = pair
    members = [(blob(x), x) for x in b.layers] + [(f"{repack.BLOBS}/{b.id[7:]}", b.config)]
    assert ids_of(archive(members, [entry(b)])) == ({b.ref: b.id}, [])   # the control: the same, in order
    ids, problems = ids_of(archive(members, [entry(b, layers=b.layers[::-1])]))
    assert ids == {} and "not the config's rootfs.diff_ids" in problems[0]


def test_a_layer_the_archive_lacks_or_holds_under_another_name_is_refused(pair):
    b, c = pair
    config = (f"{repack.BLOBS}/{b.id[7:]}", b.config)
    ids, problems = ids_of(archive([(blob(b.layers[0]), b.layers[0]), config], [entry(b)]))
    assert ids == {} and blob(b.layers[1]) in problems[0]
    # b's second layer's name over c's bytes: a loader reading by name would take the wrong layer
    ids, problems = ids_of(archive([(blob(b.layers[0]), b.layers[0]), (blob(b.layers[1]), c.layers[1]), config],
                                   [entry(b)]))
    assert ids == {} and "not a member whose sha256 is its name" in problems[0]


def test_a_config_under_another_image_s_name_is_refused(pair):
    b, c = pair
    members = [(blob(x), x) for x in b.layers] + [(f"{repack.BLOBS}/{c.id[7:]}", b.config)]
    ids, problems = ids_of(archive(members, [entry(b, config=f"{repack.BLOBS}/{c.id[7:]}")]))
    assert ids == {} and c.id[7:] in problems[0]


def test_a_name_twice_or_no_manifest_is_refused(pair):
    b, _ = pair
    members = [(blob(x), x) for x in b.layers] + [(f"{repack.BLOBS}/{b.id[7:]}", b.config)]
    with pytest.raises(tarfile.ReadError, match="twice"):
        ids_of(archive(members + [(blob(b.layers[0]), b.layers[1])], [entry(b)]))
    assert ids_of(archive(members, None)) == ({}, ["the archive has no readable manifest.json"])
    assert ids_of(archive(members, [{"Config": 1}]))[1] == ["manifest.json entry 0 lacks Config, Layers or RepoTags"]


def checked() -> Checked:
    return Checked(export_id="e" * 16, manifest={"images": []}, volumes={})


def test_read_back_through_a_pipe_gives_the_ids_and_refuses_a_torn_archive(pair):
    b, c = pair
    good = written(archive_v1(b, c), b, c)
    assert readback.read_back(checked(), None, lambda out: out.write(good)) == {b.ref: b.id, c.ref: c.id}
    with pytest.raises(GateFailure, match="not a readable tar"):
        readback.read_back(checked(), None, lambda out: out.write(good[: len(good) // 2] + b"\xff" * 512))


def test_the_writer_s_own_failure_is_what_is_reported(pair):
    def write(out):
        out.write(b"\0" * 512)
        raise repack.Changed("archive member 3 no longer hashes to sha256:abc...")

    with pytest.raises(repack.Changed, match="member 3"):
        readback.read_back(checked(), None, write)
