"""A delta disc's missing layers, without an engine: which docker's loader keeps by chain ID (computed
from the signed config's diff_ids, never from what the host names), which the host must give, which
nothing holds; and the loader's archive with layers from the engine's store, which ends in a block no
tar reader accepts when the store's bytes do not hash to the diff_id. The same on the real engine:
tests/integration/export/test_delta_chain.py."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from rapidship.export import hostlayers, repack
from support.archives import Image, archive_v1, sha


def test_a_chain_id_is_the_hash_of_its_parent_chain_and_its_layer():
    a, b, c = ("sha256:" + hashlib.sha256(x).hexdigest() for x in (b"a", b"b", b"c"))
    ab = "sha256:" + hashlib.sha256(f"{a} {b}".encode()).hexdigest()
    assert hostlayers.chain_ids([a, b, c]) == [a, ab, "sha256:" + hashlib.sha256(f"{ab} {c}".encode()).hexdigest()]
    assert hostlayers.chain_ids([a, c])[1] != hostlayers.chain_ids([a, b, c])[2]  # same layer, another parent


def layer(n: int) -> str:
    return "sha256:" + f"{n:x}".rjust(64, "0")


BASE = [layer(1), layer(2), layer(3), layer(4)]             # N
NEW = [layer(1), layer(2), layer(9), layer(4)]              # N+1: the third changed, the fourth the same bytes
ENGINE = hostlayers.engine_layers({"sha256:" + "e" * 64: BASE})


@pytest.mark.parametrize("for_docker, skipped, needed", [(True, 2, {layer(4)}), (False, 0, {layer(1), layer(2), layer(4)})])
def test_below_the_change_the_loader_keeps_the_engines_layers_above_it_the_host_gives_the_bytes(for_docker, skipped, needed):
    got = hostlayers.sort_missing([tuple(NEW)], lambda d: d == layer(9), ENGINE, for_docker)
    assert got.skipped == skipped and set(got.needed) == needed and got.absent == frozenset()
    assert got.needed[layer(4)] == hostlayers.chain_ids(BASE)[3]  # where its bytes are: N's chain


def test_a_layer_the_engine_holds_nowhere_is_absent():
    got = hostlayers.sort_missing([(layer(1), layer(7))], lambda d: False, ENGINE, True)
    assert got.skipped == 1 and got.needed == {} and got.absent == frozenset({layer(7)})


def test_the_engine_naming_a_layer_under_another_parent_does_not_let_the_loader_skip_it():
    # the engine holds layer 2 only on top of layer 5: the config's own chain (1, 2) is not held
    engine = hostlayers.engine_layers({"sha256:" + "f" * 64: [layer(5), layer(2)]})
    got = hostlayers.sort_missing([(layer(1), layer(2))], lambda d: d == layer(1), engine, True)
    assert got.skipped == 0 and got.needed == {layer(2): hostlayers.chain_ids([layer(5), layer(2)])[1]}


def _from_store(stored_bytes: bytes):
    """Image b with its second layer left to the engine's store, which returns `stored_bytes`."""
    b = Image("b", "base layer", "b's own")
    data = archive_v1(b)
    want = [repack.Wanted(b.id, (b.ref,), "b")]
    found = repack.scan(io.BytesIO(data), {b.id})
    del found.blobs[sha(b.layers[1])]  # as on a delta disc
    diff_id = "sha256:" + sha(b.layers[1])
    plan, problems = repack.plan(found, want, elsewhere=frozenset({diff_id}))
    assert problems == []
    plan = type(plan)(**{**vars(plan), "from_store": {diff_id: ("sha256:" + "c" * 64, len(b.layers[1]))},
                         "take": {o: h for o, h in plan.take.items() if h != sha(b.layers[1])}})
    out = io.BytesIO()
    try:
        repack.write(io.BytesIO(data), plan, out, stored=lambda chain: [stored_bytes])
    except repack.Changed as err:
        return out.getvalue(), str(err)
    return out.getvalue(), ""


def test_a_layer_from_the_store_reaches_the_loader_under_its_diff_id():
    b = Image("b", "base layer", "b's own")
    out, problem = _from_store(b.layers[1])
    assert problem == ""
    members = {m.name: m for m in tarfile.open(fileobj=io.BytesIO(out))}
    assert f"blobs/sha256/{sha(b.layers[1])}" in members and "manifest.json" in members


def test_store_bytes_that_do_not_hash_to_the_diff_id_end_the_archive_before_its_manifest():
    b = Image("b", "base layer", "b's own")
    bad = bytearray(b.layers[1])
    bad[-600] ^= 1
    out, problem = _from_store(bytes(bad))
    assert "no longer hashes to its diff_id" in problem
    assert b"manifest.json" not in out and out.endswith(b"\xff" * tarfile.BLOCKSIZE)


def test_a_disc_layer_whose_chain_the_engine_holds_everywhere_is_not_fed():
    # N+1 whole on the disc, N in the engine: the two layers below the change stay in the engine;
    # the fourth has N's bytes under a new parent, so it is fed
    got = hostlayers.held_on_disc([tuple(NEW)], lambda d: True, ENGINE)
    assert got == frozenset({layer(1), layer(2)})
    # a layer another image on the same disc needs under a chain the engine lacks is fed after all
    assert hostlayers.held_on_disc([tuple(BASE), (layer(5), layer(2))], lambda d: True, ENGINE) == \
        frozenset({layer(1), layer(3), layer(4)})
    assert hostlayers.held_on_disc([tuple(BASE)], lambda d: d != layer(1), ENGINE) == frozenset({layer(2), layer(3), layer(4)})


def test_the_loader_gets_no_bytes_of_a_layer_left_out_and_the_manifest_still_lists_it():
    b = Image("b", "base layer", "b's own")
    data = archive_v1(b)
    found = repack.scan(io.BytesIO(data), {b.id})
    base = "sha256:" + sha(b.layers[0])
    plan, problems = repack.plan(found, [repack.Wanted(b.id, (b.ref,), "b")], leave_out=frozenset({base}))
    assert problems == [] and plan.left_out == 1 and sha(b.layers[0]) not in plan.take.values()
    out = io.BytesIO()
    repack.write(io.BytesIO(data), plan, out)
    archive = tarfile.open(fileobj=io.BytesIO(out.getvalue()))
    assert f"blobs/sha256/{sha(b.layers[0])}" not in archive.getnames()
    assert f"blobs/sha256/{sha(b.layers[0])}" in archive.extractfile("manifest.json").read().decode()
