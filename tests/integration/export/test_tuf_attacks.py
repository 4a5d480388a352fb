"""The TUF paper's attacks on real discs, each refused by `invoke import` on a site that decides by
release metadata (install.sh refuses every disc on such a site: asserted once, on the rollback).

Three real releases of the two tiny images under one name, each pushed, signed and exported by the
real tasks: N (key A, trust.init), N+1 (key A, the same trust repository) and, after
`invoke trust.rotate` moves the release to key B (root v2), N+2 (key B). The attacks that live in
the metadata (freeze, fast-forward, extraneous image, A signing after the rotation) put on a copy of
a genuine disc what export writes from a trust repository changed by sign/tufmeta.py with the real
keys (`with_metadata`); a courier's edit is an edit of the disc's files, resealed."""

from __future__ import annotations

import json
import shutil
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from support.signed_discs import (ARCHES, PASSWORD, VARIANT, copy_dirs, error_of, from_args, install, make_disc, ok,
                                  reseal, run, with_metadata)
from support.tuf_discs import LATEST, load, none_of, refused, root_v1, trust_copy

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def each(releases, monkeypatch):
    """No image of either release in the engine (their names are one), the real keys' password set."""
    for disc in releases:
        disc.remove_images()
    monkeypatch.setenv("RAPIDSHIP_SIGNING_PASSWORD", PASSWORD)  # the tests open the real keys with tufmeta


def test_push_that_signs_in_a_trust_workspace_writes_the_next_tuf_release(releases):
    first, second = releases
    targets = json.loads((second.build / "trust" / "metadata" / "targets.json").read_text())["signed"]
    before = json.loads((first.build / "trust" / "metadata" / "targets.json").read_text())["signed"]
    assert targets["version"] == before["version"] + 1
    for arch, ref in second.refs.items():  # each arch's name, bound to the digest push signed for it
        signed = second.sign["arches"][arch]["digest"].removeprefix("sha256:")
        assert targets["targets"][ref]["hashes"]["sha256"] == signed, (arch, targets["targets"].get(ref))


def test_push_that_signs_without_the_online_keys_is_refused_before_it_pushes(releases, disc_registry, tmp_path):
    first, _ = releases
    build = tmp_path / "build"
    shutil.copytree(first.build, build)
    (build / VARIANT / "push.json").unlink()
    env = {k: v for k, v in first.env.items() if not k.startswith("RAPIDSHIP_TUF_")}
    push = ["push", "--variant", VARIANT, "--registry", f"{disc_registry.host}/staging", "--build-dir", str(build),
            "--variants-file", str(first.work / "variants.yaml"), "--key", str(first.work / "keys" / "cosign.key")]
    proc = run(env, *push)
    message = error_of(proc)
    assert proc.returncode != 0 and "--snapshot-key / --timestamp-key" in message, message
    assert "RAPIDSHIP_TUF_SNAPSHOT_KEY" in message and "pushed" not in proc.stderr
    assert not (build / VARIANT / "push.json").exists()
    snapshot = str(first.work / "snapshot" / "cosign.key")  # a key root does not list for the timestamp role
    proc = run(env | {"RAPIDSHIP_TUF_SNAPSHOT_KEY": snapshot, "RAPIDSHIP_TUF_TIMESTAMP_KEY": snapshot}, *push)
    message = error_of(proc)
    assert proc.returncode == 2 and "--timestamp-key" in message and "is not the timestamp key root v1 lists" in message
    assert "pushed" not in proc.stderr and not (build / VARIANT / "push.json").exists()


def test_rollback_to_an_older_release_disc_is_refused(releases, tmp_path):
    first, second = releases
    site = tmp_path / "site"
    ok(load(second, second.dirs, site))
    first.remove_images()
    refused(load(first, first.dirs, site), "the disc's metadata is older than what this site already trusts",
            "a rollback")
    assert none_of(first)
    proc = install(first, first.dirs, "--key", str(first.pub), site=site)  # install.sh refuses on a TUF site at all
    assert proc.returncode == 1 and "this site decides by TUF release metadata" in proc.stderr, proc.stderr
    assert none_of(first)


def test_an_indefinite_freeze_ends_in_a_refusal_with_the_date(releases, tmp_path):
    from rapidship.sign import tufmeta

    first, _ = releases
    then = datetime.now(timezone.utc) - timedelta(days=30)  # the last metadata the courier let through
    repo, online = trust_copy(first, tmp_path / "b")
    tufmeta.refresh(repo, *online, now=then)
    dirs = with_metadata(first, tmp_path / "b", tmp_path / "disc")
    first.remove_images()
    expires = tufmeta.Expiry().of("timestamp", then).strftime("%Y-%m-%dT%H:%M:%SZ")
    refused(load(first, dirs, tmp_path / "site"), f"the disc's timestamp metadata expired on {expires}",
            "ask the sender for a disc with current metadata", "--accept-expired")
    assert none_of(first)
    proc = ok(load(first, dirs, tmp_path / "site", "--accept-expired"))
    assert "WARNING: --accept-expired" in proc.stderr
    out = json.loads(proc.stdout)
    assert out["accepted_expired"] is True and {x["image_id"] for x in out["loaded"]} == set(first.ids.values())


def test_fast_forward_metadata_is_refused_and_leaves_the_site_able_to_update(releases, tmp_path):
    first, second = releases
    site = tmp_path / "site"
    ok(load(first, first.dirs, site))
    trusted = json.loads((site / "tuf" / "timestamp.json").read_text())["signed"]["version"]
    dirs = copy_dirs(second.dirs, tmp_path / "ff")
    for volume in dirs:  # a courier pushes the versions far ahead, so that no genuine disc is newer
        for role in ("timestamp", "snapshot"):
            doc = json.loads((volume / "tuf" / f"{role}.json").read_text())
            doc["signed"]["version"] = 10**9
            (volume / "tuf" / f"{role}.json").write_text(json.dumps(doc))
        reseal(volume)
    second.remove_images()
    refused(load(second, dirs, site), "the disc's release metadata is not trusted")
    assert none_of(second)
    assert json.loads((site / "tuf" / "timestamp.json").read_text())["signed"]["version"] == trusted
    out = json.loads(ok(load(second, second.dirs, site)).stdout)  # the genuine next release still loads
    assert {x["image_id"] for x in out["loaded"]} == set(second.ids.values())


def test_images_of_one_release_under_another_releases_metadata_are_refused(releases, tmp_path):
    from rapidship.sign import tufmeta

    first, second = releases
    dirs = with_metadata(first, second.build, tmp_path / "mixed")  # release N's images, release N+1's metadata
    first.remove_images()
    message = refused(load(first, dirs, tmp_path / "site"), "2 problems")
    signed = tufmeta.Repo(tufmeta.repo_dir(second.build)).load("targets").signed.targets
    for arch in ARCHES:
        digest = signed[first.refs[arch]].hashes["sha256"]
        assert f"{first.refs[arch]}: the release signs manifest sha256:{digest[:12]}" in message, message
    assert none_of(first)
    repo, _ = trust_copy(second, tmp_path / "b", first.work)  # N+1's snapshot and timestamp, N's targets, on N's disc
    shutil.copyfile(first.build / "trust" / "metadata" / "targets.json", repo.meta / "targets.json")
    dirs = with_metadata(first, tmp_path / "b", tmp_path / "mixed-metadata")
    versions = {r: json.loads((second.build / "trust" / "metadata" / f"{r}.json").read_text())["signed"]["version"]
                for r in ("snapshot", "targets")}
    refused(load(first, dirs, tmp_path / "site2"), f"the disc's targets.json (version {versions['targets'] - 1}) is not "
            f"the targets v{versions['targets']} that snapshot v{versions['snapshot']} binds by sha256 and length")
    assert none_of(first)


def test_an_image_the_release_does_not_sign_is_refused(releases, tmp_path):
    from rapidship.sign import tufmeta

    first, _ = releases
    repo, online = trust_copy(first, tmp_path / "b")
    amd64 = repo.load("targets").signed.targets[first.refs["amd64"]]
    signer = tufmeta.open_key(str(first.work / "keys" / "cosign.key"), "--key")
    tufmeta.release(repo, {amd64.path: amd64}, [signer], *online)  # a release of the amd64 image alone
    dirs = with_metadata(first, tmp_path / "b", tmp_path / "extra")  # its disc also carries the arm64 image
    first.remove_images()
    refused(load(first, dirs, tmp_path / "site"), f"{first.refs['arm64']} is not a target of the release")
    assert none_of(first)


def test_the_rotation_drill(releases, disc_registry, tmp_path):
    from rapidship.sign import tufmeta

    first, _ = releases
    env, work = first.env, first.work
    for role in ("B", "root4"):
        ok(run(env, "keys.generate", "--out", str(tmp_path / role)))
    rotated = tmp_path / "rotated"
    for part in ("snapshot", "timestamp"):
        shutil.copytree(work / part, rotated / part)
    shutil.copytree(first.build / "trust", rotated / "build" / "trust")
    new_root = [a for k in (work / "root2", work / "root3", tmp_path / "root4")
                for a in ("--root-key", str(k / "cosign.key"))]
    proc = run(env, "trust.rotate", "--old-root-key", str(work / "root1" / "cosign.key"), *new_root,
               "--targets-key", str(tmp_path / "B" / "cosign.key"), "--build-dir", str(rotated / "build"))
    assert proc.returncode == 2 and "--old-root-key" in error_of(proc) and "1 of the 2 old root keys" in proc.stderr
    assert not (rotated / "build" / "trust" / "metadata" / "2.root.json").exists()
    proc = ok(run(env, "trust.rotate", "--old-root-key", str(work / "root1" / "cosign.key"), "--old-root-key",
                  str(work / "root2" / "cosign.key"), *new_root, "--targets-key", str(tmp_path / "B" / "cosign.key"),
                  "--build-dir", str(rotated / "build")))
    assert "root v2" in proc.stderr
    site = tmp_path / "site"  # a site that was handed root v1 and loaded release N (key A)
    ok(load(first, first.dirs, site))
    third = make_disc(tmp_path / "n2", disc_registry, first.refs["amd64"].split(":")[0], LATEST,
                      keys=tmp_path / "B", trust_from=rotated)
    try:
        assert {p.name for p in (third.dirs[0] / "tuf").iterdir()} >= {"1.root.json", "2.root.json"}
        third.remove_images()
        out = json.loads(ok(load(first, third.dirs, site, key=third.pub)).stdout)  # N+2, key B, walks to root v2
        assert {x["image_id"] for x in out["loaded"]} == set(third.ids.values())
        v2 = third.build / "trust" / "metadata" / "2.root.json"
        assert (site / "tuf" / "root.json").read_bytes() == v2.read_bytes()
        repo, online = trust_copy(third, tmp_path / "rogue", rotated)  # A signs a release after the rotation
        a = tufmeta.open_key(str(work / "keys" / "cosign.key"), "--key")
        old = tufmeta.Repo(tufmeta.repo_dir(first.build)).load("targets").signed.targets
        tufmeta.release(repo, dict(old), [a], *online)
        dirs = with_metadata(first, tmp_path / "rogue", tmp_path / "rogue-disc")
        first.remove_images()
        refused(load(first, dirs, site), f"signed by key {a.public_key.keyid[:16]}, which root version 2 removed "
                                         "from the release signers (revoked)")
        assert none_of(first)
    finally:
        third.remove_images()


def test_verify_and_promote_accept_an_image_only_when_tuf_resolves_it_to_that_digest(releases, tmp_path):
    """Against the registry: a site that holds a trust root (--trust-root once, or kept in the site
    directory) verifies and promotes release N's image only by N's metadata; N+1's signs other digests."""
    first, second = releases
    pushed = json.loads((first.build / VARIANT / "push.json").read_text())
    image = f"{pushed['registry']}/{pushed['repository']}@{pushed['arches']['amd64']['digest']}"
    site = {"RAPIDSHIP_SITE_DIR": str(tmp_path / "site")}

    def verify(build, *flags):
        return run(first.env | site, "verify", "--image", image, "--key", str(first.pub), "--build-dir", str(build),
                   *flags)

    proc = ok(verify(first.build, "--trust-root", root_v1(first)))
    assert "TUF: 2 signed name(s) resolve to their digests in release targets v2" in proc.stderr, proc.stderr
    newer = tufmeta_targets(second)[f"{pushed['registry']}/{pushed['repository']}:{pushed['arches']['amd64']['tag']}"]
    message = error_of(verify(second.build))  # the root the site holds decides, no flag needed
    said = f"the release signs manifest sha256:{newer[:12]}..., the registry carries {image[-71:-52]}"
    assert said in message, message
    site = {"RAPIDSHIP_SITE_DIR": str(tmp_path / "no-root")}
    ok(verify(second.build))  # a site without a trust root decides by the key alone

    def promote(site_dir, *flags):
        return run(first.env | {"RAPIDSHIP_SITE_DIR": str(site_dir)}, "promote", "--variant", VARIANT, "--to",
                   f"{pushed['registry']}/rel-{uuid.uuid4().hex[:6]}", "--key", str(first.pub), "--build-dir",
                   str(first.build), "--trust-root", root_v1(first), *flags)

    proc = promote(tmp_path / "s2", "--tuf-metadata", str(second.build / "trust" / "metadata"))
    assert proc.returncode == 1 and "the release signs manifest" in error_of(proc), proc.stderr
    assert "copied" not in proc.stderr
    proc = ok(promote(tmp_path / "s3"))  # the workspace's own release metadata
    assert "TUF: 2 signed name(s) resolve to their digests in release targets v2" in proc.stderr, proc.stderr


def tufmeta_targets(disc) -> dict[str, str]:
    """name -> sha256 hex of the release the disc's workspace trust repository signs last."""
    from rapidship.sign import tufmeta

    targets = tufmeta.Repo(tufmeta.repo_dir(disc.build)).load("targets").signed.targets
    return {n: t.hashes["sha256"] for n, t in targets.items()}


def test_on_a_tuf_site_the_targets_version_orders_releases_not_the_labels(releases, disc_registry, tmp_path):
    """A release that goes back to an older commit on purpose (a revert), signed as targets N+2:
    a site deciding by TUF loads it over N+1; a site deciding by the key alone refuses the older
    commit (sign/release.refusal: one rule, TUF's version authoritative where the site has a root)."""
    first, second = releases
    cont = tmp_path / "cont"
    for part in ("snapshot", "timestamp"):
        shutil.copytree(first.work / part, cont / part)
    shutil.copytree(second.build / "trust", cont / "build" / "trust")
    revert = make_disc(tmp_path / "revert", disc_registry, first.refs["amd64"].split(":")[0],
                       "2026-11-30T00:00:00+00:00", keys=first.work / "keys", trust_from=cont)
    try:
        tuf_site, key_site = tmp_path / "tuf-site", tmp_path / "key-site"
        ok(load(second, second.dirs, tuf_site))
        revert.remove_images()
        out = json.loads(ok(load(revert, revert.dirs, tuf_site)).stdout)
        assert {x["image_id"] for x in out["loaded"]} == set(revert.ids.values())
        assert out["release_metadata"] == "release metadata: targets version 4"
        second.remove_images()
        revert.remove_images()
        env = second.env | {"RAPIDSHIP_SITE_DIR": str(key_site)}
        ok(run(env, "import", *from_args(second.dirs), "--key", str(second.pub)))
        proc = run(env, "import", *from_args(revert.dirs), "--key", str(revert.pub))
        assert proc.returncode == 1 and "(a rollback)" in error_of(proc), proc.stderr
        assert none_of(revert)
    finally:
        revert.remove_images()
