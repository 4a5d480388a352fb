"""Delta discs on real images, the real engine, xorriso and install.sh: release N+1 exported
`--since` N's export carries only the layer N lacks; imported on an engine that holds N it yields
exactly N+1's id (the missing layers taken from the engine, by content, against the config's
diff_ids); on an engine without N, one sentence names N and nothing is loaded; a delta against a
release of other images is refused at export. Unsigned images, loaded with --no-verify: the
signature path is the full disc's (test_signed_discs.py), a delta changes only where layers come from.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from support.commands import invoke

pytestmark = pytest.mark.docker

BIG, PATCH = 2_000_000, 100_000  # random bytes: zstd cannot make the full disc small


def _build(engine, ctx: Path, dockerfile: str, tag: str) -> str:
    (ctx / "Dockerfile").write_text(dockerfile)
    image, _ = engine.images.build(path=str(ctx), tag=tag, rm=True)
    return image.id


def _id(ref: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _rmi(*refs: str) -> None:
    subprocess.run(["docker", "rmi", *refs], capture_output=True, check=False)


@pytest.fixture(scope="module")
def releases(engine, tmp_path_factory):
    """N (two layers) and N+1 (N plus a small patch layer), each exported: N whole, N+1 since N."""
    prefix = f"rapidship-test-{uuid.uuid4().hex[:10]}"
    ctx = tmp_path_factory.mktemp("ctx")
    for name, size in (("shared.bin", BIG), ("n.bin", BIG), ("patch.bin", PATCH), ("other.bin", BIG)):
        (ctx / name).write_bytes(os.urandom(size))
    refs = {"n": f"{prefix}-app:1", "n1": f"{prefix}-app:2", "other": f"{prefix}-other:1"}
    ids = {"n": _build(engine, ctx, "FROM scratch\nCOPY shared.bin /shared.bin\nCOPY n.bin /n.bin\n", refs["n"])}
    ids["n1"] = _build(engine, ctx, f"FROM {refs['n']}\nCOPY patch.bin /patch.bin\n", refs["n1"])
    ids["other"] = _build(engine, ctx, "FROM scratch\nCOPY other.bin /other.bin\n", refs["other"])
    out = tmp_path_factory.mktemp("discs")
    full = json.loads(invoke("export", "--image", refs["n"], "--unsigned", "--out", str(out / "n"), "--json",
                             "--keep-dirs").stdout)
    delta = json.loads(invoke("export", "--image", refs["n1"], "--unsigned", "--out", str(out / "n1"), "--json",
                              "--keep-dirs", "--since", str(out / "n" / "export.json")).stdout)
    yield {"refs": refs, "ids": ids, "out": out, "full": full, "delta": delta}
    _rmi(*refs.values())


def _import(folder: Path) -> subprocess.CompletedProcess:
    return invoke("import", "--from", str(folder), "--no-verify", "--json", check=False)


def test_the_delta_carries_only_the_layer_the_base_lacks(releases):
    full, delta, n = releases["full"], releases["delta"], releases["refs"]["n"]
    assert full["extends"] == {} and delta["extends"]["export_id"] == full["export_id"]
    assert delta["extends"]["layers"] == sorted(full["images"][0]["layers"])  # what the host must hold
    assert [i["ref"] for i in delta["extends"]["images"]] == [n]
    assert delta["tar_bytes"] < PATCH + 64 * 1024 < 2 * BIG < full["tar_bytes"]  # the patch layer and a config
    ratio = delta["archive_bytes"] / full["archive_bytes"]
    assert ratio < 0.05, ratio
    manifest = json.loads((releases["out"] / "n1" / "volume-01" / "MANIFEST.json").read_text())
    assert manifest["extends"] == delta["extends"]


def test_imported_where_the_base_is_it_yields_exactly_the_new_release(releases):
    refs, ids = releases["refs"], releases["ids"]
    _rmi(refs["n1"])
    assert _id(refs["n"]) == ids["n"] and _id(refs["n1"]) is None
    proc = _import(releases["out"] / "n1")
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)["loaded"]
    assert [(x["ref"], x["image_id"]) for x in loaded] == [(refs["n1"], ids["n1"])]
    assert _id(refs["n1"]) == ids["n1"]


def test_export_verify_of_a_delta_takes_the_base_from_this_engine(releases):
    refs, ids = releases["refs"], releases["ids"]
    assert _id(refs["n"]) == ids["n"]
    for how in ([], ["--load"]):   # read back, and pushed into a scratch registry
        proc = invoke("export-verify", "--from", str(releases["out"] / "n1"), "--no-verify", "--json", *how)
        (verified,) = json.loads(proc.stdout)["verified"]
        assert verified["ref"] == refs["n1"] and verified["image_id"] == verified["expected_id"] == ids["n1"]
        assert verified["where"] == "read back" if not how else verified["manifest_digest"].startswith("sha256:")


def test_without_the_base_nothing_is_loaded_and_the_base_is_named(releases):
    refs, ids = releases["refs"], releases["ids"]
    _rmi(refs["n1"], refs["n"])
    assert _id(refs["n"]) is None and _id(refs["n1"]) is None
    proc = _import(releases["out"] / "n1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"this disc extends release {releases['full']['export_id'][:12]}" in said and refs["n"] in said
    assert "load that release first" in said and "nothing was loaded" in said and "Traceback" not in said
    assert _id(refs["n1"]) is None
    sh = subprocess.run(["sh", str(releases["out"] / "n1" / "volume-01" / "install.sh"), "--no-verify",
                         str(releases["out"] / "n1" / "volume-01")], capture_output=True, text=True)
    assert sh.returncode != 0 and "this disc extends release" in sh.stderr and "nothing was loaded" in sh.stderr
    assert _id(refs["n1"]) is None
    # the base release from its own disc, then the delta with install.sh
    assert _import(releases["out"] / "n").returncode == 0 and _id(refs["n"]) == ids["n"]
    sh = subprocess.run(["sh", str(releases["out"] / "n1" / "volume-01" / "install.sh"), "--no-verify",
                         str(releases["out"] / "n1" / "volume-01")], capture_output=True, text=True)
    assert sh.returncode == 0, sh.stderr
    assert "taking 2 layer(s) from this host's images" in sh.stderr and _id(refs["n1"]) == ids["n1"]


def test_a_delta_against_a_release_of_other_images_is_refused_at_export(releases, tmp_path):
    refs = releases["refs"]
    other = json.loads(invoke("export", "--image", refs["other"], "--unsigned", "--out", str(tmp_path / "o"),
                              "--json").stdout)
    proc = invoke("export", "--image", refs["n1"], "--unsigned", "--out", str(tmp_path / "d"),
                  "--since", str(tmp_path / "o" / "export.json"), check=False)
    assert proc.returncode == 2, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "--since" in said and "not a base of this release" in said and "Traceback" not in said
    assert not any((tmp_path / "d").glob("*.iso"))
    assert other["images"][0]["ref"] == refs["other"]
    missing = invoke("export", "--image", refs["n1"], "--unsigned", "--out", str(tmp_path / "e"),
                     "--since", str(tmp_path / "nowhere.json"), check=False)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
