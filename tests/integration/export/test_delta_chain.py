"""Deltas in a chain, on the real engine: N whole, N -> N+1, N+1 -> N+2, each changing a middle
layer (so the layers above it have new chain IDs although their bytes are the base's). Applied in
order they yield exactly N+1's and N+2's ids: the layers whose chain the engine holds stay in it
(docker's loader skips them), the others are read from the engine's layer store and hashed against
the signed config's diff_ids; no `docker save`. A site that skipped N+1 gets one sentence naming
N+1, and nothing is loaded. Unsigned images, loaded with --no-verify: the signature path is the
full disc's (test_signed_discs.py); a delta changes only where layers come from.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from rapidship.export import delta, hostlayers
from support.commands import invoke

pytestmark = pytest.mark.docker

BIG, SMALL = 2_000_000, 100_000


def _id(ref: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _layers(ref: str) -> list[str]:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", ref],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def _rmi(*refs: str) -> None:
    subprocess.run(["docker", "rmi", *refs], capture_output=True, check=False)


@pytest.fixture(scope="module")
def chain(engine, tmp_path_factory):
    """N = shared, mid1, top; N+1 = shared, mid2, top, add; N+2 = shared, mid3, top, add. Exported:
    N whole, N+1 since N, N+2 since N+1."""
    prefix = f"rapidship-test-{uuid.uuid4().hex[:10]}"
    ctx = tmp_path_factory.mktemp("ctx")
    for name, size in (("shared.bin", BIG), ("top.bin", BIG), ("add.bin", BIG),
                       ("mid1.bin", SMALL), ("mid2.bin", SMALL), ("mid3.bin", SMALL)):
        (ctx / name).write_bytes(os.urandom(size))
    refs = {k: f"{prefix}-app:{k}" for k in ("n", "n1", "n2")}
    bodies = {"n": "COPY mid1.bin /mid.bin\nCOPY top.bin /top.bin\n",
              "n1": "COPY mid2.bin /mid.bin\nCOPY top.bin /top.bin\nCOPY add.bin /add.bin\n",
              "n2": "COPY mid3.bin /mid.bin\nCOPY top.bin /top.bin\nCOPY add.bin /add.bin\n"}
    ids = {}
    for key, body in bodies.items():
        (ctx / "Dockerfile").write_text("FROM scratch\nCOPY shared.bin /shared.bin\n" + body)
        image, _ = engine.images.build(path=str(ctx), tag=refs[key], rm=True)
        ids[key] = image.id
    out = tmp_path_factory.mktemp("discs")
    made, said = {}, {}
    for key, since in (("n", None), ("n1", "n"), ("n2", "n1")):
        args = ["export", "--image", refs[key], "--unsigned", "--out", str(out / key), "--json", "--keep-dirs"]
        proc = invoke(*args, *(["--since", str(out / since / "export.json")] if since else []))
        made[key], said[key] = json.loads(proc.stdout), " ".join(proc.stderr.split())
    yield {"refs": refs, "ids": ids, "out": out, "made": made, "said": said}
    _rmi(*refs.values())


def readable_store() -> hostlayers.Store:
    """The engine's layer store; CI runs as root on overlay2, where it must be readable (else fail)."""
    store = hostlayers.store()
    if store is None:
        if os.environ.get("CI"):
            pytest.fail("the engine's layer store is not readable in CI (root, overlay2 expected)")
        pytest.skip("the engine's layer store is not readable here (another driver, or not root): "
                    "export and import take docker save, as before")
    return store


def test_a_delta_export_reads_only_the_layers_it_carries_from_the_layer_store(chain):
    readable_store()
    for key, carried in (("n1", 2), ("n2", 1)):  # N+1 adds `mid2` and `add`; N+2 changes `mid` alone
        assert f"{carried} layer(s) read from the engine's layer store" in chain["said"][key], chain["said"][key]
        assert "no docker save" in chain["said"][key]


def test_the_delta_archive_from_the_layer_store_is_docker_saves_byte_for_byte(chain):
    ids = chain["ids"]
    held = frozenset(_layers(chain["refs"]["n1"]))
    archives = {}
    for from_store in (True, False):
        out = io.BytesIO()
        delta.write_archive([ids["n2"], ids["n1"]], held, out, from_store=from_store)
        archives[from_store] = out.getvalue()
    assert archives[True] == archives[False]
    names = tarfile.open(fileobj=io.BytesIO(archives[True])).getnames()
    assert [n for n in names if n.startswith("blobs/sha256/")] == [
        f"blobs/sha256/{_layers(chain['refs']['n2'])[1][7:]}", f"blobs/sha256/{ids['n2'][7:]}",
        f"blobs/sha256/{ids['n1'][7:]}"]  # the changed layer once, then the two configs


def _import(folder: Path) -> subprocess.CompletedProcess:
    return invoke("import", "--from", str(folder), "--no-verify", "--json", check=False)


def test_the_layers_above_a_changed_one_share_bytes_not_chains(chain):
    n, n1 = _layers(chain["refs"]["n"]), _layers(chain["refs"]["n1"])
    assert n[2] == n1[2] and n[1] != n1[1]  # `top`: the same diff_id, under another parent
    assert hostlayers.chain_ids(n)[2] != hostlayers.chain_ids(n1)[2]
    store = hostlayers.store()
    if store is not None:  # the chain IDs computed here are the engine's own keys
        assert all((store.root / "image/overlay2/layerdb/sha256" / c[7:]).is_dir() for c in hostlayers.chain_ids(n1))
    assert chain["made"]["n1"]["extends"]["export_id"] == chain["made"]["n"]["export_id"]
    assert chain["made"]["n2"]["extends"]["export_id"] == chain["made"]["n1"]["export_id"]


def _imported_with(disc, from_host: int):
    """Import `disc`; it says one layer stays in the engine by chain ID and `from_host` come from the
    engine's layer store (or, where the store cannot be read, from docker save, as before)."""
    proc = _import(disc)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    store = f"{from_host} read from its layer store and 0 from docker save" if hostlayers.store() is not None \
        else f"0 read from its layer store and {from_host}"
    assert f"1 layer(s) the engine holds by chain ID stay in it; {store}" in said, said
    return proc


def test_two_deltas_applied_in_order_yield_each_release(chain):
    refs, ids, out = chain["refs"], chain["ids"], chain["out"]
    _rmi(refs["n1"], refs["n2"])
    assert _id(refs["n"]) == ids["n"] and _id(refs["n1"]) is None and _id(refs["n2"]) is None
    _imported_with(out / "n1", from_host=1)
    assert _id(refs["n1"]) == ids["n1"]
    second = _imported_with(out / "n2", from_host=2)
    assert [(x["ref"], x["image_id"]) for x in json.loads(second.stdout)["loaded"]] == [(refs["n2"], ids["n2"])]
    assert _id(refs["n2"]) == ids["n2"]


def test_export_verify_of_the_second_delta_takes_every_layer_it_lacks_from_the_store(chain):
    refs, ids = chain["refs"], chain["ids"]
    assert _id(refs["n1"]) == ids["n1"]
    proc = invoke("export-verify", "--from", str(chain["out"] / "n2"), "--no-verify", "--json")
    said = " ".join(proc.stderr.split())
    # a registry has no chains: shared, top and add all come from the store
    assert "0 layer(s) the engine holds by chain ID stay in it; 3 read from its layer store" in said, said
    (verified,) = json.loads(proc.stdout)["verified"]
    assert verified["image_id"] == verified["expected_id"] == ids["n2"]


def test_a_layer_that_does_not_hash_to_its_diff_id_is_not_taken_from_the_store(chain):
    store = readable_store()
    n1 = _layers(chain["refs"]["n1"])
    chains = hostlayers.chain_ids(n1)
    got = hostlayers.measured(store, {n1[3]: chains[3], n1[2]: chains[3]}, lambda _: None)
    assert list(got) == [n1[3]]  # `add`'s bytes, asked for as `top`, are refused
    assert got[n1[3]][0] == chains[3] and got[n1[3]][1] > BIG


def test_a_site_that_skipped_a_release_is_told_which_and_nothing_is_loaded(chain):
    refs, ids, made = chain["refs"], chain["ids"], chain["made"]
    _rmi(refs["n1"], refs["n2"])
    assert _id(refs["n"]) == ids["n"] and _id(refs["n1"]) is None
    proc = _import(chain["out"] / "n2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"this disc extends release {made['n1']['export_id'][:12]}" in said and refs["n1"] in said, said
    assert "1 of its layers are in no image of this engine" in said and "nothing was loaded" in said
    assert "Traceback" not in said
    assert _id(refs["n2"]) is None and _id(refs["n1"]) is None
    assert _id(refs["n"]) == ids["n"]  # what the site held, it still holds


def test_a_full_disc_onto_an_engine_that_holds_its_chains_feeds_the_loader_none_of_them(chain):
    refs, ids = chain["refs"], chain["ids"]
    assert _id(refs["n"]) == ids["n"]
    proc = _import(chain["out"] / "n")
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "3 layers of the disc the engine holds by chain ID (the same bytes below) not fed to the loader" in said, said
    assert [(x["ref"], x["image_id"]) for x in json.loads(proc.stdout)["loaded"]] == [(refs["n"], ids["n"])]


def test_the_same_disc_onto_an_engine_without_them_feeds_every_layer(chain):
    refs, ids = chain["refs"], chain["ids"]
    _rmi(*refs.values())
    assert _id(refs["n"]) is None
    proc = _import(chain["out"] / "n")
    assert proc.returncode == 0, proc.stderr
    assert "not fed to the loader" not in " ".join(proc.stderr.split())
    assert _id(refs["n"]) == ids["n"]
