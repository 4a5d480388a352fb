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
    said = "the disc's targets.json (version 2) is not the targets v2 that snapshot v2 binds by sha256 and length"
    assert proc.returncode == 1 and said in message, message
    assert disc.nothing_loaded()


def test_a_disc_with_release_metadata_on_a_site_without_a_trust_root_says_it_was_checked_by_key_alone(tuf_disc,
                                                                                                      tmp_path):
    """Another account's $HOME, no --site: no trust root found. The import still checks by key, but
    says on the terminal and in its result that the release metadata went unchecked; --no-verify
    on a site that decides by TUF says that it skips the release metadata too."""
    disc = tuf_disc
    disc.remove_images()
    bare = tmp_path / "no-root-site"
    for task in ("export-verify", "import"):
        proc = ok(run(disc.env | {"RAPIDSHIP_SITE_DIR": str(bare)}, task, *from_args(disc.dirs), "--key", str(disc.pub),
                      "--json"))
        said = (f"the disc carries release metadata (tuf/), but this site holds no trust root ({bare}/tuf/root.json): "
                "the images were checked by key alone")
        assert "WARNING: " + said in " ".join(proc.stderr.split()), proc.stderr
        out = json.loads(proc.stdout)
        assert out["release_metadata"].startswith("release metadata NOT checked: " + said), out
        assert out["accepted_expired"] is False
    disc.remove_images()
    site = {"RAPIDSHIP_SITE_DIR": str(tmp_path / "tuf-site")}
    root = disc.build / "trust" / "metadata" / "1.root.json"
    proc = ok(run(disc.env | site, "import", *from_args(disc.dirs), "--no-verify", "--trust-root", str(root)))
    assert f"and the release metadata this site decides by ({tmp_path / 'tuf-site' / 'tuf'})" in " ".join(
        proc.stderr.split()), proc.stderr
