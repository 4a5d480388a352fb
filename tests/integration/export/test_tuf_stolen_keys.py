"""One stolen key must not be enough: the red team's attacks of round 5 on real discs, each refused
by `invoke import` on a site that decides by release metadata, and the recovery from a stolen
timestamp key done with the tools (`invoke trust.rotate`, `invoke trust.refresh`).

Releases N and N+1 (key A) are the conftest's; N+2 is signed by key B after `invoke trust.rotate`
revoked A. Attack metadata is written with the real keys by sign/tufmeta.py or python-tuf into a
copy of a release's trust repository and put on a copy of a genuine disc (`with_metadata`)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone

import pytest

from support.signed_discs import PASSWORD, error_of, make_disc, ok, run, with_metadata
from support.tuf_discs import LATEST, load, none_of, refused, trust_copy

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def rotated(releases, disc_registry, tmp_path_factory):
    """`invoke trust.rotate` moves the release signer from A to B (root v2), then release N+2 by B."""
    first, _ = releases
    work = tmp_path_factory.mktemp("rotated")
    ok(run(first.env, "keys.generate", "--out", str(work / "B")))
    for part in ("snapshot", "timestamp"):
        shutil.copytree(first.work / part, work / part)
    shutil.copytree(first.build / "trust", work / "build" / "trust")
    roots = [a for r in ("root1", "root2", "root3") for a in ("--root-key", str(first.work / r / "cosign.key"))]
    ok(run(first.env, "trust.rotate", *old_root_keys(first, "root1", "root2"), *roots, "--targets-key",
           str(work / "B" / "cosign.key"), "--build-dir", str(work / "build")))
    third = make_disc(work / "n2", disc_registry, first.refs["amd64"].split(":")[0], LATEST, keys=work / "B",
                      trust_from=work)
    yield third
    third.remove_images()


@pytest.fixture(autouse=True)
def each(releases, monkeypatch):
    for disc in releases:
        disc.remove_images()
    monkeypatch.setenv("RAPIDSHIP_SIGNING_PASSWORD", PASSWORD)  # the tests open the real keys with tufmeta


def old_root_keys(disc, *names):
    return [a for n in names for a in ("--old-root-key", str(disc.work / n / "cosign.key"))]


def signed(build, role: str) -> dict:
    return json.loads((build / "trust" / "metadata" / f"{role}.json").read_text())["signed"]


def test_a_revoked_targets_key_cannot_replace_a_release_under_genuine_snapshot_and_timestamp(releases, rotated,
                                                                                             tmp_path):
    """A holds only the targets key root v2 revoked: targets of N+2's version naming N's images, under
    N+2's genuine snapshot and timestamp, 2.root.json left off, for a site still at root v1."""
    from tuf.api.metadata import Metadata, Targets

    from rapidship.sign import tufmeta

    first, _ = releases
    third = rotated
    site = tmp_path / "site"
    ok(load(first, first.dirs, site))
    first.remove_images()
    repo, _ = trust_copy(third, tmp_path / "forged", first.work)
    version = signed(third.build, "targets")["version"]
    old = tufmeta.Repo(tufmeta.repo_dir(first.build)).load("targets").signed.targets
    md = Metadata(Targets(version=version, expires=tufmeta.Expiry().of("targets", datetime.now(timezone.utc)),
                          targets=dict(old)))
    md.sign(tufmeta.open_key(str(first.work / "keys" / "cosign.key"), "--key"))
    md.to_file(str(repo.meta / "targets.json"))
    (repo.meta / "2.root.json").unlink()
    dirs = with_metadata(first, tmp_path / "forged", tmp_path / "disc")
    snapshot = signed(third.build, "snapshot")["version"]
    refused(load(first, dirs, site), f"the disc's targets.json (version {version}) is not the targets v{version} that "
                                     f"snapshot v{snapshot} binds by sha256 and length")
    assert none_of(first)
    assert json.loads((site / "tuf" / "targets.json").read_text())["signed"] == signed(first.build, "targets")  # N's
    out = json.loads(ok(load(third, third.dirs, site)).stdout)  # the genuine N+2 loads, walking to root v2
    assert {x["image_id"] for x in out["loaded"]} == set(third.ids.values())


def test_a_snapshot_key_alone_cannot_hold_a_site_on_an_older_release(releases, tmp_path):
    """The snapshot key alone: a snapshot of N+1's version naming N's targets, under N+1's genuine
    timestamp; refused, and the genuine N+1 disc then loads."""
    from tuf.api.metadata import Metadata, MetaFile, Snapshot

    from rapidship.sign import tufmeta

    first, second = releases
    repo, (snapshot_key, _) = trust_copy(second, tmp_path / "held", first.work)
    shutil.copyfile(first.build / "trust" / "metadata" / "targets.json", repo.meta / "targets.json")
    version, targets = signed(second.build, "snapshot")["version"], signed(first.build, "targets")["version"]
    md = Metadata(Snapshot(version=version, expires=tufmeta.Expiry().of("snapshot", datetime.now(timezone.utc)),
                           meta={"targets.json": MetaFile(targets)}))
    md.sign(snapshot_key)
    md.to_file(str(repo.meta / "snapshot.json"))
    dirs = with_metadata(first, tmp_path / "held", tmp_path / "disc")
    site = tmp_path / "site"
    timestamp = signed(second.build, "timestamp")["version"]
    refused(load(first, dirs, site), f"the disc's snapshot.json (version {version}) is not the snapshot v{version} "
                                     f"that timestamp v{timestamp} binds by sha256 and length")
    assert none_of(first)
    out = json.loads(ok(load(second, second.dirs, site)).stdout)
    assert {x["image_id"] for x in out["loaded"]} == set(second.ids.values())


def test_a_disc_made_after_a_rotation_is_refused_without_that_root(releases, tmp_path):
    """Root keys rotated (root1 out, root4 in), snapshot and timestamp refreshed under root v2: the
    same disc with 2.root.json left off would keep the site on root v1."""
    from rapidship.sign import tufmeta

    first, second = releases
    repo, online = trust_copy(second, tmp_path / "b", first.work)
    roots = [tufmeta.open_key(str(first.work / r / "cosign.key"), r) for r in ("root1", "root2", "root3")]
    tufmeta.rotate(repo, roots[:2], [*roots[1:], tufmeta.KeySigner(_new_key())])
    tufmeta.refresh(repo, *online)
    (repo.meta / "2.root.json").unlink()
    dirs = with_metadata(second, tmp_path / "b", tmp_path / "disc")
    timestamp = json.loads((repo.meta / "timestamp.json").read_text())["signed"]["version"]
    refused(load(second, dirs, tmp_path / "site"), f"the disc's timestamp v{timestamp} was made under root v2, but the "
                                                   "disc's root chain ends at v1: 2.root.json is missing")
    assert none_of(second)


def _new_key():
    from cryptography.hazmat.primitives.asymmetric import ec

    from rapidship.sign.keys import FileSigner

    return FileSigner("root4", ec.generate_private_key(ec.SECP256R1()))


def test_trust_rotate_counts_distinct_keys_of_the_current_root(releases, tmp_path):
    first, _ = releases
    build = tmp_path / "build"
    shutil.copytree(first.build / "trust", build / "trust")
    new_root = ["--root-key", str(first.work / "root2" / "cosign.key")]
    foreign = ["--old-root-key", str(first.work / "keys" / "cosign.key")]
    for old, said in ((old_root_keys(first, "root1"), "1 of the 2 old root keys"),
                      (old_root_keys(first, "root1", "root1"), "the same root key is given twice"),
                      (old_root_keys(first, "root1") + foreign, "is not a root key of root v1")):
        proc = run(first.env, "trust.rotate", *old, *new_root, "--build-dir", str(build))
        message = error_of(proc)
        assert proc.returncode == 2 and "--old-root-key" in message and said in message, message
        assert not (build / "trust" / "metadata" / "2.root.json").exists()


def test_the_fast_forward_recovery_drill(releases, tmp_path):
    """A stolen timestamp key signs timestamp v1,000,000 over N's genuine snapshot; the site takes it
    and refuses N+1. The release team rotates the timestamp key and refreshes with the new one; the
    site recovers from that next disc alone (python-tuf drops the timestamp the new root does not
    sign, TUF's client workflow 5.3.11)."""
    from tuf.api.metadata import Metadata

    first, second = releases
    site = tmp_path / "site"
    ok(load(first, first.dirs, site))
    repo, (_, stolen) = trust_copy(first, tmp_path / "thief")
    md = Metadata.from_file(str(repo.meta / "timestamp.json"))
    md.signed.version = 1_000_000
    md.signatures.clear()
    md.sign(stolen)
    md.to_file(str(repo.meta / "timestamp.json"))
    first.remove_images()
    ok(load(first, with_metadata(first, tmp_path / "thief", tmp_path / "ahead"), site))  # valid: the key is genuine
    second.remove_images()
    refused(load(second, second.dirs, site), "older than what this site already trusts")
    assert none_of(second)
    team = tmp_path / "team" / "build"  # the release team's workspace at N+1
    shutil.copytree(second.build / "trust", team / "trust")
    ok(run(first.env, "keys.generate", "--out", str(tmp_path / "timestamp2")))
    new = str(tmp_path / "timestamp2" / "cosign.key")
    refresh = ["trust.refresh", "--snapshot-key", str(first.work / "snapshot" / "cosign.key"), "--build-dir", str(team)]
    proc = run(first.env, *refresh, "--timestamp-key", new)
    assert proc.returncode == 2 and "--timestamp-key" in error_of(proc) and "is not the timestamp key" in proc.stderr
    proc = ok(run(first.env, "trust.rotate", *old_root_keys(first, "root1", "root2"), "--timestamp-key", new,
                  "--build-dir", str(team)))
    assert "invoke trust.refresh" in proc.stderr
    proc = run(first.env, *refresh, "--timestamp-key", str(first.work / "timestamp" / "cosign.key"))
    assert proc.returncode == 2 and "is not the timestamp key root v2 lists" in error_of(proc), proc.stderr
    ok(run(first.env, *refresh, "--timestamp-key", new))
    out = json.loads(ok(load(second, with_metadata(second, team, tmp_path / "next"), site)).stdout)
    assert {x["image_id"] for x in out["loaded"]} == set(second.ids.values())
    assert json.loads((site / "tuf" / "timestamp.json").read_text())["signed"]["version"] < 1_000_000
