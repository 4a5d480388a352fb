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
    with pytest.raises(GateFailure, match="metadata of two releases mixed on one disc"):
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
    t.cosign_targets(repo, keys["B"])
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
