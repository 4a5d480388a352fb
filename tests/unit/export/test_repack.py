"""The archive a loader receives, without an engine: both passes of export/repack.py over archives
built here in both engines' layouts, and over every trick a courier who can write the disc might play
on a reader of the archive's own names and JSON (links, hard links, keys in other cases and Unicode
foldings, nested objects, entries and members given twice, an index.json that disagrees, data after
the end). Whatever the courier's archive says, what is written is a function of the images asked for
and the bytes that hash to them: the same archive as from the genuine disc, or a refusal."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile

import pytest
from hypothesis import given, settings, strategies as st

from rapidship.export import repack
from support.archives import Image, archive_oci, archive_v1, sha, tar


@pytest.fixture(scope="module")
def pair():
    """b and c share their first layer, as images FROM one base do."""
    return Image("b", "base layer", "b's own"), Image("c", "base layer", "c's own")


def wanted(*images: Image, tags: dict | None = None) -> list[repack.Wanted]:
    return [repack.Wanted(i.id, tuple((tags or {}).get(i.ref, [i.ref])), f"image {i.ref} ({i.id[:19]})") for i in images]


def planned(data: bytes, want: list[repack.Wanted]) -> tuple[repack.Plan, list[str]]:
    return repack.plan(repack.scan(io.BytesIO(data), {w.image_id for w in want}), want)


def written(data: bytes, plan: repack.Plan) -> bytes:
    out = io.BytesIO()
    repack.write(io.BytesIO(data), plan, out)
    return out.getvalue()


def loaded(data: bytes, *images: Image) -> dict:
    """What a loader would receive of `data`: member name -> (type, sha256), and the manifest."""
    plan, problems = planned(data, wanted(*images))
    assert problems == []
    out = tarfile.open(fileobj=io.BytesIO(written(data, plan)))
    members = {m.name: (m.type, sha(out.extractfile(m).read()) if m.isreg() else "") for m in out}
    return {"members": members, "manifest": json.loads(out.extractfile("manifest.json").read())}


# ---- what is written ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [archive_v1, archive_oci])
def test_the_written_archive_holds_exactly_the_configs_layers_and_names_asked_for(pair, layout):
    b, c = pair
    got = loaded(layout(b, c), b, c)
    blobs = {f"blobs/sha256/{sha(x)}" for x in [*b.layers, c.layers[1]]} | {f"blobs/sha256/{b.id[7:]}",
                                                                         f"blobs/sha256/{c.id[7:]}"}
    assert set(got["members"]) == blobs | {"blobs", "blobs/sha256", "manifest.json"}
    assert all(t == tarfile.REGTYPE for n, (t, _) in got["members"].items() if n.count("/") == 2 or n == "manifest.json")
    assert all(got["members"][n][1] == n.rsplit("/", 1)[1] for n in blobs)  # each file is named by its hash
    assert got["manifest"] == [{"Config": f"blobs/sha256/{i.id[7:]}", "RepoTags": [i.ref],
                                "Layers": [f"blobs/sha256/{sha(x)}" for x in i.layers]} for i in (b, c)]


def test_both_layouts_give_the_same_archive(pair):
    assert loaded(archive_v1(*pair), *pair) == loaded(archive_oci(*pair), *pair)


def test_manifest_json_is_written_last_after_every_layer(pair):
    plan, _ = planned(archive_v1(*pair), wanted(*pair))
    names = [m.name for m in tarfile.open(fileobj=io.BytesIO(written(archive_v1(*pair), plan)))]
    assert names[-1] == "manifest.json" and names[:2] == ["blobs", "blobs/sha256"]


def test_a_layer_saved_once_and_linked_is_taken_once_from_its_bytes(pair):
    plan, problems = planned(archive_v1(*pair), wanted(*pair))
    assert problems == [] and sorted(plan.take.values()) == sorted({sha(x) for p in pair for x in p.layers})
    assert plan.ignored == 2  # the link and manifest.json: nothing else of the archive is passed on


def test_an_image_not_asked_for_is_not_passed_on(pair):
    b, c = pair
    got = loaded(archive_v1(b, c), b)
    assert f"blobs/sha256/{c.id[7:]}" not in got["members"] and f"blobs/sha256/{sha(c.layers[1])}" not in got["members"]
    assert [e["RepoTags"] for e in got["manifest"]] == [[b.ref]]


# ---- what is refused ---------------------------------------------------------------------------

def test_a_swapped_layer_is_named_with_its_position(pair):
    b, c = pair
    swapped = archive_v1(b, c).replace(b"b's own", b"B's own")  # same length: a valid tar, another layer
    _, problems = planned(swapped, wanted(b, c))
    assert problems == [f"image {b.ref} ({b.id[:19]}): layer 2 of 2 (sha256:{sha(b.layers[1])[:16]}...) is not in "
                        "the archive: no member hashes to the diff_id its config lists"]


def test_an_image_whose_config_is_not_there_is_named(pair):
    b, _ = pair
    forged = Image("b", "base layer", "b's own", labels={"io.rapidship.variant": "x"})
    data = tar([("l0/layer.tar", forged.layers[0]), ("l1/layer.tar", forged.layers[1]),
                (f"{b.id[7:]}.json", forged.config)])  # another config under the signed id's name
    _, problems = planned(data, wanted(b))
    assert problems == [f"image {b.ref} ({b.id[:19]}): the archive holds no config that hashes to {b.id[:19]}"]


def test_a_config_that_lists_no_layers_strictly_is_refused():
    odd = Image("odd", "x")
    odd.config = json.dumps({"rootfs": {"diff_ids": ["sha256:" + "A" * 64]}}).encode()
    odd.id = "sha256:" + sha(odd.config)
    _, problems = planned(tar([("c.json", odd.config)]), wanted(odd))
    assert problems == [f"image {odd.ref} ({odd.id[:19]}): its config lists no layers as sha256:<64 hex> "
                        "(rootfs.diff_ids)"]
    twice = Image("twice", "x")
    twice.config = b'{"rootfs":{"diff_ids":[]},"Rootfs":{"diff_ids":["sha256:' + b"0" * 64 + b'"]}}'
    twice.id = "sha256:" + sha(twice.config)
    _, problems = planned(tar([("c.json", twice.config)]), wanted(twice))
    assert "its config is not JSON one way" in problems[0]


def test_two_images_under_one_name_are_refused(pair):
    b, c = pair
    _, problems = planned(archive_v1(b, c), wanted(b, c, tags={c.ref: [b.ref]}))
    assert problems == [f"the disc gives the name {b.ref} to two images ({b.id[:19]} and {c.id[:19]}): a loader "
                        "would keep only one"]


def test_an_archive_that_changed_between_the_passes_ends_in_a_block_no_reader_accepts(pair):
    good = archive_v1(*pair)
    plan, _ = planned(good, wanted(*pair))
    out = io.BytesIO()
    with pytest.raises(repack.Changed, match="no longer hashes to"):
        repack.write(io.BytesIO(good.replace(b"b's own", b"B's own")), plan, out)
    assert b"manifest.json" not in out.getvalue() and out.getvalue().endswith(b"\xff" * 512)
    listed = subprocess.run(["tar", "-tf", "-"], input=out.getvalue(), capture_output=True)  # docker load: the
    assert listed.returncode != 0 and b"header" in listed.stderr  # integration tests feed it to the engine
    with pytest.raises(repack.Changed, match="no longer in the archive"):
        repack.write(io.BytesIO(tar([])), plan, io.BytesIO())


# ---- the courier's tricks: the written archive is the genuine one's, whatever they say ----------

def _entries(data: bytes) -> list[dict]:
    return json.loads(tarfile.open(fileobj=io.BytesIO(data)).extractfile("manifest.json").read())


def _with(data: bytes, members: list[tuple[str, bytes | str]], drop: tuple[str, ...] = ()) -> bytes:
    """`data` with `members` appended (after its own, which are kept unless named in `drop`)."""
    source = tarfile.open(fileobj=io.BytesIO(data))
    kept = [(m.name, source.extractfile(m).read() if m.isfile() else "->" + m.linkname)
            for m in source if m.name not in drop and (m.isfile() or m.issym())]
    return tar(kept + members)


def tricks(b: Image, c: Image) -> dict[str, bytes]:
    """Each a crafted archive holding b's genuine blobs plus what a courier adds to redirect a loader."""
    evil = Image("evil", "courier's code")
    genuine = archive_v1(b, c)
    entries = _entries(genuine)
    evil_entry = {"Config": f"blobs/sha256/{evil.id[7:]}", "RepoTags": [b.ref], "Layers": ["evil/layer.tar"]}
    manifest = lambda doc: ("manifest.json", json.dumps(doc).encode())  # noqa: E731
    raw = lambda text: ("manifest.json", text.encode())  # noqa: E731
    first = json.dumps(entries[0])[1:-1]
    return {
        "a blobs symlink to the courier's directory": _with(genuine, [
            (f"elsewhere/sha256/{evil.id[7:]}", evil.config), ("evil/layer.tar", evil.layers[0]),
            manifest(entries + [evil_entry]), ("blobs", "->elsewhere")], drop=("manifest.json",)),
        "repotags in lower case": _with(genuine, [raw(json.dumps(
            [dict(entries[0], repotags=["bank/payments:prod", "debian:12"])] + entries[1:]))], drop=("manifest.json",)),
        "RepoTag\\u017f (a long s Go folds to S)": _with(genuine, [raw(
            '[{' + first + ',"RepoTag\\u017f":["bank/payments:prod"]},' + json.dumps(entries[1]) + ']')],
            drop=("manifest.json",)),
        "a nested object before RepoTags": _with(genuine, [raw(
            '[{"LayerSources":{"x":{"RepoTags":["a"]}},' + first + '},' + json.dumps(entries[1]) + ']')],
            drop=("manifest.json",)),
        "an entry given twice": _with(genuine, [manifest(entries + [dict(entries[0], RepoTags=["bank/payments:prod"])])],
                                      drop=("manifest.json",)),
        "manifest.json given twice, the courier's last": _with(genuine, [manifest([evil_entry]),
                                                                         (f"{evil.id[7:]}.json", evil.config)]),
        "./manifest.json beside manifest.json": _with(genuine, [("./manifest.json", json.dumps([evil_entry]).encode())]),
        "an index.json naming another image": _with(archive_oci(b, c, index_extra=[evil]), []),
        "a layer as a hard link to the courier's file": _with(genuine, [("evil/layer.tar", evil.layers[0]),
                                                                        ("x/layer.tar", "=>evil/layer.tar")]),
        "members after the end of the archive": genuine + tar([manifest([evil_entry])]),
        "a repositories file re-pointing a name": _with(genuine, [("repositories", json.dumps(
            {"debian": {"12": evil.id[7:]}}).encode())]),
        "member names with ../ and absolute paths": _with(genuine, [("../../etc/evil", b"x"), ("/manifest.json", b"[]")]),
    }


@pytest.mark.parametrize("trick", list(tricks(Image("b", "base layer", "b's own"), Image("c", "base layer", "c's own"))))
def test_no_trick_of_the_courier_reaches_the_loader(pair, trick):
    b, c = pair
    assert loaded(tricks(b, c)[trick], b, c) == loaded(archive_v1(b, c), b, c)


@settings(max_examples=40, deadline=None)
@given(st.permutations(list(range(7))), st.lists(st.binary(max_size=64), max_size=4))
def test_member_order_and_junk_change_nothing_a_loader_reads(order, junk):
    """Any order of the genuine members and any junk beside them: the same files, the same manifest."""
    b, c = Image("b", "base layer", "b's own"), Image("c", "base layer", "c's own")
    source = tarfile.open(fileobj=io.BytesIO(archive_v1(b, c)))
    members = [(m.name, source.extractfile(m).read() if m.isfile() else "->" + m.linkname) for m in source]
    shuffled = [members[i] for i in order] + [(f"junk/{i}", data) for i, data in enumerate(junk)]
    assert loaded(tar(shuffled), b, c) == loaded(archive_v1(b, c), b, c)
