"""TUF on real discs: a workspace with a trust repository (invoke trust.init), signed and exported
through the real tasks, carries the release metadata (every root version) on every volume; a site
that was given root v1 once loads it only when python-tuf's client resolves each image name to its
digest, and refuses a disc whose metadata was changed; install.sh, which cannot run a TUF client,
refuses on such a site with one sentence."""

from __future__ import annotations

import json

import pytest

from support.signed_discs import ARCHES, copy_dirs, error_of, from_args, install, make_disc, ok, reseal, run, unique_name

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def tuf_disc(engine, disc_registry, tmp_path_factory):
    disc = make_disc(tmp_path_factory.mktemp("tuf"), disc_registry, unique_name(), trust=True)
    yield disc
    disc.remove_images()


def test_a_site_with_the_trust_root_loads_what_the_release_metadata_resolves(tuf_disc, tmp_path):
    disc = tuf_disc
    disc.remove_images()
    root = disc.build / "trust" / "metadata" / "1.root.json"
    for volume in disc.dirs:
        assert {p.name for p in (volume / "tuf").iterdir()} == {"1.root.json", "targets.json", "snapshot.json",
                                                                "timestamp.json"}
    site = {"RAPIDSHIP_SITE_DIR": str(tmp_path / "site")}
    proc = ok(run(disc.env | site, "import", *from_args(disc.isos), "--key", str(disc.pub), "--trust-root", str(root),
                  "--json"))
    out = json.loads(proc.stdout)
    assert out["release_metadata"] == "release metadata: targets version 2" and out["accepted_expired"] is False
    assert {x["image_id"] for x in out["loaded"]} == set(disc.ids.values())
    assert (tmp_path / "site" / "tuf" / "targets.json").exists()  # the site now trusts this release's metadata
    proc = install(disc, disc.dirs, "--key", str(disc.pub), site=tmp_path / "site")
    assert proc.returncode == 1 and "this site decides by TUF release metadata" in proc.stderr, proc.stderr


def test_changed_release_metadata_is_refused(tuf_disc, tmp_path):
    disc = tuf_disc
    disc.remove_images()
    dirs = copy_dirs(disc.dirs, tmp_path)
    for volume in dirs:  # a courier's edit: another digest for the amd64 name, the volume resealed
        doc = json.loads((volume / "tuf" / "targets.json").read_text())
        for target in doc["signed"]["targets"].values():
            target["hashes"]["sha256"] = "0" * 64
        (volume / "tuf" / "targets.json").write_text(json.dumps(doc))
        reseal(volume)
    proc = run(disc.env | {"RAPIDSHIP_SITE_DIR": str(tmp_path / "site")}, "import", *from_args(dirs), "--key",
               str(disc.pub), "--trust-root", str(disc.build / "trust" / "metadata" / "1.root.json"))
    message = error_of(proc)
    assert proc.returncode == 1 and "the disc's release metadata is not trusted" in message, message
    assert disc.nothing_loaded()
