"""A signed delta disc: two releases of the same two images (amd64, arm64) sharing a first layer,
pushed, signed with one key and exported through the real tasks; the newer one exported `--since`
the older's export. With signatures verified against the key: on an engine holding the older
release, `invoke import` loads exactly the newer release's signed ids; on an engine without it,
`invoke import` and install.sh name the release and load nothing.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from support.signed_discs import (ARCHES, MEDIA, VARIANT, error_of, from_args, image_id, install, make_disc, ok, run,
                                  unique_name)

pytestmark = pytest.mark.docker
OLD, NEW = "2026-11-01T00:00:00+00:00", "2026-12-01T00:00:00+00:00"


def test_a_signed_delta_loads_exactly_the_signed_ids_where_the_base_is_and_nothing_elsewhere(
        engine, disc_registry, tmp_path):
    name = unique_name()
    shared = {arch: os.urandom(600_000) for arch in ARCHES}
    old = make_disc(tmp_path / "old", disc_registry, name, created=OLD, shared=shared)
    new = make_disc(tmp_path / "new", disc_registry, name, created=NEW, keys=old.work / "keys", shared=shared)
    try:
        record = json.loads(ok(run(new.env, "export", "--variant", VARIANT, "--variants-file",
                                   str(new.work / "variants.yaml"), "--build-dir", str(new.build), "--media",
                                   str(MEDIA), "--out", str(tmp_path / "delta"), "--keep-dirs", "--json",
                                   "--since", str(old.out / "export.json"))).stdout)
        assert record["extends"]["export_id"] == old.record["export_id"]
        assert len(record["extends"]["layers"]) == 2  # the shared layer of each arch
        assert record["archive_bytes"] < new.record["archive_bytes"] / 3
        assert {i["image_id"] for i in record["images"]} == set(new.ids.values())
        dirs = [tmp_path / "delta" / f"volume-{v['number']:02d}" for v in record["volumes"]]

        # the older release in the engine (by id: the newer took its names), the newer not
        subprocess.run(["docker", "rmi", "-f", *new.ids.values()], capture_output=True)
        assert all(image_id(i) for i in old.ids.values()) and not any(image_id(i) for i in new.ids.values())
        proc = ok(run(new.env, "import", *from_args(dirs), "--key", str(new.pub), "--json"))
        loaded = json.loads(proc.stdout)["loaded"]
        assert sorted((x["ref"], x["image_id"]) for x in loaded) == sorted((new.refs[a], new.ids[a]) for a in ARCHES)
        assert all(image_id(new.refs[a]) == new.ids[a] for a in ARCHES)

        # an engine with neither release: one sentence naming the older one, nothing loaded
        subprocess.run(["docker", "rmi", "-f", *new.ids.values(), *old.ids.values()], capture_output=True)
        refused = run(new.env, "import", *from_args(dirs), "--key", str(new.pub))
        said = " ".join(error_of(refused).split())
        assert refused.returncode == 1 and f"this disc extends release {old.record['export_id'][:12]}" in said
        assert "load that release first" in said and "nothing was loaded" in said
        sh = install(new, dirs, "--key", str(new.pub))
        assert sh.returncode != 0 and "this disc extends release" in sh.stderr, sh.stderr
        assert not any(image_id(i) for i in [*new.ids.values(), *old.ids.values()])
    finally:
        old.remove_images()
        new.remove_images()
