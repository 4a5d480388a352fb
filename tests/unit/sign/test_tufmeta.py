"""TUF metadata written by sign/tufmeta.py, judged by python-tuf's own client (ngclient) reading a
copy of the repository as a disc: arbitrary installation, wrong software, extraneous images,
rollback, mix-and-match, indefinite freeze (metadata signed under a clock 30 days back), a key
below the targets threshold, and the rotation drill (release N by key A; root v2 moves the release
to key B; release N+1 by B resolves on a site that only ever held root v1; A's later release is
refused naming A and the root version that removed it)."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from rapidship.errors import GateFailure
from rapidship.sign import tufmeta as t
from rapidship.sign.keys import FileSigner

DIGEST = {n: "sha256:" + c * 64 for n, c in (("a", "a"), ("b", "b"), ("c", "c"))}
NAME = "registry.example/rapids/base:26.10-cpu-debian12-py3.11-amd64"


def key(name: str) -> t.KeySigner:
    return t.KeySigner(FileSigner(name, ec.generate_private_key(ec.SECP256R1())))


def image(digest: str) -> t.TargetFile:
    return t.target(digest, 1234, {"variant": "cpu-debian12", "arch": "amd64", "release": "26.10", "lock": "5e" * 32})


@pytest.fixture
def keys():
    return {n: key(n) for n in ("root1", "root2", "root3", "A", "B", "snap", "time")}


def make(tmp_path: Path, keys, threshold: int = 1, signers=("A",), now=None) -> t.Repo:
    k = keys
    return t.init(tmp_path / "repo", [k["root1"], k["root2"], k["root3"]], 2, [k[s] for s in signers], threshold,
                  k["snap"], k["time"], now=now)


def disc(repo: t.Repo, to: Path) -> Path:
    """What export puts on a disc: a copy of the metadata folder."""
    shutil.rmtree(to, ignore_errors=True)
    return Path(shutil.copytree(repo.meta, to))


def site(tmp_path: Path, repo: t.Repo, name: str = "site") -> Path:
    folder = tmp_path / name / "tuf"
    t.seed(folder, repo.meta / "1.root.json")
    return folder


def test_a_release_resolves_each_name_to_exactly_its_digest(tmp_path, keys):
    repo = make(tmp_path, keys)
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"])
    here = site(tmp_path, repo)
    assert t.resolve(disc(repo, tmp_path / "d1"), here, {NAME: DIGEST["a"]}) == 2
    with pytest.raises(GateFailure, match=r"the release signs manifest sha256:aaaaaaaaaaaa\.\.\., the disc carries "
                                          r"sha256:bbbbbbbbbbb"):  # arbitrary installation: another image
        t.resolve(disc(repo, tmp_path / "d2"), here, {NAME: DIGEST["b"]})
    with pytest.raises(GateFailure, match="other:1 is not a target of the release"):  # wrong software / extraneous
        t.resolve(disc(repo, tmp_path / "d3"), here, {NAME: DIGEST["a"], "other:1": DIGEST["a"]})


def test_rollback_and_mix_and_match_are_refused(tmp_path, keys):
    repo = make(tmp_path, keys)
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"])
    old = disc(repo, tmp_path / "old")
    t.release(repo, {NAME: image(DIGEST["b"])}, [keys["A"]], keys["snap"], keys["time"])
    new = disc(repo, tmp_path / "new")
    here = site(tmp_path, repo)
    assert t.resolve(new, here, {NAME: DIGEST["b"]}) == 3
    with pytest.raises(GateFailure, match="older than what this site already trusts"):
        t.resolve(old, here, {NAME: DIGEST["a"]})
    mixed = disc(repo, tmp_path / "mixed")  # the new snapshot and timestamp, the old release's targets
    shutil.copyfile(old / "targets.json", mixed / "targets.json")
    with pytest.raises(GateFailure, match=r"the disc's targets.json \(version 2\) is not the targets v3 that snapshot v3 "
                                          "binds by sha256 and length"):
        t.resolve(mixed, site(tmp_path, repo, "fresh-site"), {NAME: DIGEST["a"]})


def test_expired_metadata_is_refused_with_its_date_unless_accepted_once(tmp_path, keys):
    then = datetime.now(timezone.utc) - timedelta(days=30)  # the signer's clock: a freeze of 30 days
    repo = make(tmp_path, keys, now=then)
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"], now=then)
    expires = t.Expiry().of("timestamp", then).strftime("%Y-%m-%dT%H:%M:%SZ")
    with pytest.raises(GateFailure, match=f"the disc's timestamp metadata expired on {expires}: ask the sender for a "
                                          "disc with current metadata"):
        t.resolve(disc(repo, tmp_path / "d"), site(tmp_path, repo), {NAME: DIGEST["a"]})
    said = []
    assert t.resolve(disc(repo, tmp_path / "d"), site(tmp_path, repo, "s2"), {NAME: DIGEST["a"]}, accept_expired=True,
                     warn=said.append) == 2
    assert said and "--accept-expired" in said[0]
    t.refresh(repo, keys["snap"], keys["time"])  # the release team's fix: fresh timestamp and snapshot, same images
    assert t.resolve(disc(repo, tmp_path / "d"), site(tmp_path, repo, "s3"), {NAME: DIGEST["a"]}) == 2


def test_one_key_below_a_threshold_of_two_is_refused(tmp_path, keys):
    repo = make(tmp_path, keys, threshold=2, signers=("A", "B"))
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"])
    with pytest.raises(GateFailure, match="signatures do not reach the threshold"):
        t.resolve(disc(repo, tmp_path / "d"), site(tmp_path, repo), {NAME: DIGEST["a"]})
    t.cosign_targets(repo, keys["B"], keys["snap"], keys["time"])
    assert t.resolve(disc(repo, tmp_path / "d"), site(tmp_path, repo, "s2"), {NAME: DIGEST["a"]}) == 2


def test_the_rotation_drill(tmp_path, keys):
    repo = make(tmp_path, keys)  # root v1: release signer A
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"])
    here = site(tmp_path, repo)
    assert t.resolve(disc(repo, tmp_path / "n"), here, {NAME: DIGEST["a"]}) == 2
    new_root = [key("root4"), keys["root2"], keys["root3"]]
    assert t.rotate(repo, [keys["root1"], keys["root2"]], new_root, targets=[keys["B"]]) == 2  # A leaves
    after = tmp_path / "after"
    shutil.copytree(repo.path, after)
    t.release(repo, {NAME: image(DIGEST["b"])}, [keys["B"]], keys["snap"], keys["time"])
    only_v1 = site(tmp_path, repo, "never-saw-v2")  # a site holding root v1 alone walks the chain itself
    assert t.resolve(disc(repo, tmp_path / "n1"), only_v1, {NAME: DIGEST["b"]}) == 3
    assert (only_v1 / "root.json").read_bytes() == (repo.meta / "2.root.json").read_bytes()
    rogue = t.Repo(after)  # A signs a release after the rotation
    t.release(rogue, {NAME: image(DIGEST["c"])}, [keys["A"]], keys["snap"], keys["time"])
    with pytest.raises(GateFailure, match=f"signed by key {keys['A'].public_key.keyid[:16]}, which root version 2 "
                                          "removed from the release signers"):
        t.resolve(disc(rogue, tmp_path / "rogue"), site(tmp_path, repo, "s3"), {NAME: DIGEST["c"]})
    with pytest.raises(Exception, match="old root keys"):
        t.rotate(repo, [keys["root2"]], new_root)  # one old root key alone cannot make root v3


# ---- one stolen key must not be enough (the red team's round 5) ---------------------------------

def forged_targets(version: int, images: dict[str, str], signer: t.KeySigner, to: Path) -> None:
    """What a holder of a targets key alone writes: targets `version` naming `images`, put on the disc."""
    from tuf.api.metadata import Metadata, Targets

    md = Metadata(Targets(version=version, expires=t.Expiry().of("targets", datetime.now(timezone.utc))))
    for name, digest in images.items():
        md.signed.targets[name] = image(digest)
        md.signed.targets[name].path = name
    md.sign(signer)
    md.to_file(str(to / "targets.json"))


def test_a_revoked_targets_key_cannot_replace_a_release_under_genuine_snapshot_and_timestamp(tmp_path, keys):
    repo = make(tmp_path, keys)  # root v1: release signer A
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"])  # release N: targets v2
    here = site(tmp_path, repo)
    assert t.resolve(disc(repo, tmp_path / "n"), here, {NAME: DIGEST["a"]}) == 2
    roots = [keys["root1"], keys["root2"], keys["root3"]]
    t.rotate(repo, roots[:2], roots, targets=[keys["B"]])  # root v2 revokes A
    t.release(repo, {NAME: image(DIGEST["b"])}, [keys["B"]], keys["snap"], keys["time"])  # N+1, the fix: targets v3
    forged = disc(repo, tmp_path / "forged")  # N+1's snapshot and timestamp, A's targets v3 naming N's image
    forged_targets(3, {NAME: DIGEST["a"]}, keys["A"], forged)
    (forged / "2.root.json").unlink()
    with pytest.raises(GateFailure, match=r"the disc's targets.json \(version 3\) is not the targets v3 that snapshot "
                                          r"v3 binds by sha256 and length"):
        t.resolve(forged, here, {NAME: DIGEST["a"]})
    assert t._version(here, "targets") == 2  # the site trusts nothing of a refused disc
    assert t.resolve(disc(repo, tmp_path / "n1"), here, {NAME: DIGEST["b"]}) == 3


def test_a_snapshot_key_alone_cannot_hold_a_site_on_an_older_release(tmp_path, keys):
    from tuf.api.metadata import Metadata, MetaFile, Snapshot

    repo = make(tmp_path, keys)
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"])  # release A: targets v2
    a = disc(repo, tmp_path / "a")
    t.release(repo, {NAME: image(DIGEST["b"])}, [keys["A"]], keys["snap"], keys["time"])
    held = disc(repo, tmp_path / "held")  # B's timestamp v3 over an equal-version snapshot v3 naming A's targets
    shutil.copyfile(a / "targets.json", held / "targets.json")
    snap = Metadata(Snapshot(version=3, expires=t.Expiry().of("snapshot", datetime.now(timezone.utc)),
                             meta={"targets.json": MetaFile(2)}))
    snap.sign(keys["snap"])
    snap.to_file(str(held / "snapshot.json"))
    here = site(tmp_path, repo)
    with pytest.raises(GateFailure, match=r"the disc's snapshot.json \(version 3\) is not the snapshot v3 that "
                                          r"timestamp v3 binds by sha256 and length"):
        t.resolve(held, here, {NAME: DIGEST["a"]})
    assert t.resolve(disc(repo, tmp_path / "b"), here, {NAME: DIGEST["b"]}) == 3  # the genuine disc B loads


def test_a_disc_made_after_a_rotation_is_refused_without_that_root(tmp_path, keys):
    repo = make(tmp_path, keys)
    here = site(tmp_path, repo)
    t.rotate(repo, [keys["root1"], keys["root2"]], [key("root4"), keys["root2"], keys["root3"]])  # root keys only
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"])  # made under root v2
    hidden = disc(repo, tmp_path / "hidden")
    (hidden / "2.root.json").unlink()  # everything else still verifies under root v1
    with pytest.raises(GateFailure, match="the disc's timestamp v2 was made under root v2, but the disc's root chain "
                                          "ends at v1: 2.root.json is missing"):
        t.resolve(hidden, here, {NAME: DIGEST["a"]})
    assert not (here / "timestamp.json").exists()
    assert t.resolve(disc(repo, tmp_path / "whole"), here, {NAME: DIGEST["a"]}) == 2
    assert (here / "root.json").read_bytes() == (repo.meta / "2.root.json").read_bytes()


def test_metadata_that_names_the_role_below_by_version_only_is_refused(tmp_path, keys):
    """Discs written before snapshot and timestamp bound hashes: refused (fail closed), the fix named."""
    from tuf.api.metadata import Metadata, MetaFile, Snapshot, Timestamp

    repo = make(tmp_path, keys)
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"])
    old = disc(repo, tmp_path / "old")
    now = datetime.now(timezone.utc)
    for md, role in ((Metadata(Snapshot(version=2, expires=t.Expiry().of("snapshot", now),
                                        meta={"targets.json": MetaFile(2)})), "snap"),
                     (Metadata(Timestamp(version=2, expires=t.Expiry().of("timestamp", now),
                                         snapshot_meta=MetaFile(2))), "time")):
        md.sign(keys[role])
        md.to_file(str(old / f"{md.signed.type}.json"))
    with pytest.raises(GateFailure, match="the disc's timestamp v2 names the metadata below it by version only.*"
                                          "invoke trust.refresh"):
        t.resolve(old, site(tmp_path, repo), {NAME: DIGEST["a"]})


def test_rotate_counts_distinct_keys_of_the_current_root_and_writes_nothing_it_refuses(tmp_path, keys):
    from rapidship.errors import ConfigError

    repo = make(tmp_path, keys)
    new_root = [keys["root1"], keys["root2"], key("root4")]
    for old, said in (([keys["root1"], keys["root1"]], "the same root key is given twice"),
                      ([keys["root1"], keys["A"]], f"key {keys['A'].public_key.keyid[:16]} is not a root key of root v1")):
        with pytest.raises(ConfigError, match=said):
            t.rotate(repo, old, new_root)
        assert repo.root_version() == 1
    with pytest.raises(ConfigError, match="root v2 would not verify against root v2's own threshold"):
        t.rotate(repo, [keys["root1"], keys["root2"]], root_threshold=3)  # 3 must sign, 2 did
    with pytest.raises(ConfigError, match="a root threshold of 4 with 3 root key"):
        t.rotate(repo, [keys["root1"], keys["root2"]], root_threshold=4)
    assert repo.root_version() == 1


def test_rotate_moves_every_role_and_a_site_walks_to_it(tmp_path, keys):
    from rapidship.errors import ConfigError

    repo = make(tmp_path, keys)
    here = site(tmp_path, repo)
    new = {n: key(n) for n in ("root4", "snap2", "time2")}
    assert t.rotate(repo, [keys["root1"], keys["root2"]], [keys["root2"], keys["root3"], new["root4"]],
                    targets=[keys["B"]], snapshot=new["snap2"], timestamp=new["time2"]) == 2
    roles = repo.load("root").signed.roles
    assert roles["snapshot"].keyids == [new["snap2"].public_key.keyid]
    assert roles["timestamp"].keyids == [new["time2"].public_key.keyid]
    with pytest.raises(ConfigError, match="--snapshot-key"):  # the old online keys sign nothing any more
        t.release(repo, {NAME: image(DIGEST["b"])}, [keys["B"]], keys["snap"], keys["time"])
    t.release(repo, {NAME: image(DIGEST["b"])}, [keys["B"]], new["snap2"], new["time2"])
    assert t.resolve(disc(repo, tmp_path / "n1"), here, {NAME: DIGEST["b"]}) == 2


def test_the_fast_forward_recovery_drill(tmp_path, keys):
    """A stolen timestamp key signs timestamp v1,000,000: the site takes it (it is valid) and then
    refuses every genuine disc. The release team rotates the timestamp key; the next genuine disc
    alone frees the site: python-tuf's client judges its trusted timestamp by the new root and drops
    it, as TUF's client workflow prescribes (5.3.11)."""
    from rapidship.errors import ConfigError
    from tuf.api.metadata import Metadata

    repo = make(tmp_path, keys)
    t.release(repo, {NAME: image(DIGEST["a"])}, [keys["A"]], keys["snap"], keys["time"])
    here = site(tmp_path, repo)
    assert t.resolve(disc(repo, tmp_path / "n"), here, {NAME: DIGEST["a"]}) == 2
    ahead = disc(repo, tmp_path / "ahead")
    ts = Metadata.from_file(str(ahead / "timestamp.json"))
    ts.signed.version = 1_000_000
    ts.signatures.clear()
    ts.sign(keys["time"])  # the stolen key
    ts.to_file(str(ahead / "timestamp.json"))
    assert t.resolve(ahead, here, {NAME: DIGEST["a"]}) == 2
    assert t._version(here, "timestamp") == 1_000_000
    t.release(repo, {NAME: image(DIGEST["b"])}, [keys["A"]], keys["snap"], keys["time"])
    with pytest.raises(GateFailure, match="older than what this site already trusts"):
        t.resolve(disc(repo, tmp_path / "n1"), here, {NAME: DIGEST["b"]})
    time2 = key("time2")
    with pytest.raises(ConfigError, match="--timestamp-key"):
        t.refresh(repo, keys["snap"], time2)  # not yet the key root lists
    assert t.rotate(repo, [keys["root1"], keys["root2"]], timestamp=time2) == 2
    with pytest.raises(ConfigError, match="--timestamp-key"):
        t.refresh(repo, keys["snap"], keys["time"])  # the stolen key no longer signs for this repository
    t.refresh(repo, keys["snap"], time2)
    assert t.resolve(disc(repo, tmp_path / "n2"), here, {NAME: DIGEST["b"]}) == 3
    assert t._version(here, "timestamp") == 4 and t._version(here, "targets") == 3
