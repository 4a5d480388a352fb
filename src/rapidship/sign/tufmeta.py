"""TUF (The Update Framework 1.0) metadata for releases, written and read with python-tuf.

The repository is a folder `metadata/` of `N.root.json` (every root version: the chain a site walks),
`targets.json`, `snapshot.json` and `timestamp.json`. Roles and what each protects:
  root       which keys hold every role, and how many must sign (default 2 of 3 offline keys);
             a new root (`rotate`) is signed by a threshold of the old root keys and of the new;
  targets    the release: per image name, its manifest digest and length, with custom fields
             (variant, arch, release label, lock hash, image id); threshold configurable;
  snapshot   which targets.json is current, by version, sha256 and length (no mix of two releases'
             metadata, no targets signed by another key under it);
  timestamp  which snapshot.json is current, by version, sha256 and length, and short-lived: a
             courier who withholds the next disc leaves the site with metadata that expires (an
             indefinite freeze ends in a refusal).
Snapshot and timestamp also name the root version they were made under (ROOT_FIELD): a disc made
after a rotation is refused without the root that rotation wrote, so no courier keeps a site on the
old root's keys.
Keys are the signing keys rapidship already uses (password-protected cosign.key files, or a
PKCS#11 / KMS reference through the signer command): `KeySigner` lends one to python-tuf.

`resolve` is the site's side: python-tuf's own client (ngclient) reads a disc's metadata as a local
repository, from the site's trusted metadata (`--site DIR`/tuf, seeded once with the trusted root),
and each image must resolve, under the name it is loaded as, to exactly its digest. TUF's version
numbers are the rollback rule for metadata: ngclient refuses any role older than the site holds.
Metadata that names the role below it by version only (discs written before the hashes were) is
refused: the release team's `invoke trust.refresh` writes current snapshot and timestamp.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from securesystemslib.signer import Signature, Signer, SSlibKey
from tuf.api.exceptions import UnsignedMetadataError
from tuf.api.metadata import (Metadata, MetaFile, Role, Root, Snapshot, TargetFile, Targets, Timestamp)
from tuf.api.serialization.json import JSONSerializer

from rapidship.errors import ConfigError, GateFailure
from rapidship.sign.keys import Signer as KeyFile

ROLES = ("root", "targets", "snapshot", "timestamp")
METADATA = "metadata"
ROOT_FIELD = "x-rapidship-root-version"  # in snapshot and timestamp: the root version they were made under


@dataclass(frozen=True)
class Expiry:
    """How long each role's metadata is valid after it is signed (days), by policy."""

    root: int = 365
    targets: int = 90
    snapshot: int = 30
    timestamp: int = 7

    def of(self, role: str, now: datetime) -> datetime:
        return (now + timedelta(days=getattr(self, role))).replace(microsecond=0)


class KeySigner(Signer):
    """A rapidship key (sign/keys.py: ECDSA P-256, DER signatures) as a securesystemslib signer."""

    def __init__(self, key: KeyFile) -> None:
        self._key = key
        self._public = SSlibKey.from_crypto(key.public_key())

    @property
    def public_key(self) -> SSlibKey:
        return self._public

    def sign(self, payload: bytes) -> Signature:
        return Signature(self._public.keyid, self._key.sign(payload).hex())

    @classmethod
    def from_priv_key_uri(cls, priv_key_uri, public_key, secrets_handler=None):  # pragma: no cover - keys come
        raise NotImplementedError("rapidship opens keys through sign/keys.open_signer")  # through open_signer


def repo_dir(build_root: Path | str) -> Path:
    """The workspace's trust repository: build/trust (invoke trust.init writes it, sign and export read it)."""
    return Path(build_root) / "trust"


def open_key(ref: str, flag: str) -> KeySigner:
    from rapidship.sign.keys import open_signer

    return KeySigner(open_signer(ref, flag))


SNAPSHOT_KEY_ENV, TIMESTAMP_KEY_ENV = "RAPIDSHIP_TUF_SNAPSHOT_KEY", "RAPIDSHIP_TUF_TIMESTAMP_KEY"


def online_signers(repo: "Repo", snapshot_key: str | None, timestamp_key: str | None) -> tuple[Signer, Signer] | None:
    """The snapshot and timestamp keys a release needs, when the workspace has a trust repository
    (flags, else $RAPIDSHIP_TUF_SNAPSHOT_KEY / $RAPIDSHIP_TUF_TIMESTAMP_KEY); opened before anything is pushed."""
    if not repo.root_version():
        return None
    snapshot_key = snapshot_key or os.environ.get(SNAPSHOT_KEY_ENV)
    timestamp_key = timestamp_key or os.environ.get(TIMESTAMP_KEY_ENV)
    if not snapshot_key or not timestamp_key:
        raise ConfigError("--snapshot-key / --timestamp-key", f"{repo.path} is a trust repository: every release "
                          "is a TUF release, whose snapshot and timestamp must be signed too",
                          "pass --snapshot-key and --timestamp-key (the online keys invoke trust.init was given), "
                          f"or set {SNAPSHOT_KEY_ENV} and {TIMESTAMP_KEY_ENV}")
    signers = open_key(snapshot_key, "--snapshot-key"), open_key(timestamp_key, "--timestamp-key")
    _online_listed(repo.load("root").signed, *signers)
    return signers


DISC = "tuf"  # the folder of every volume that carries the repository's metadata


def disc_files(build_root: Path | str) -> dict[str, bytes]:
    """tuf/<name> -> bytes of every metadata file (every root version: the chain), when there is a repository."""
    meta = repo_dir(build_root) / METADATA
    return {f"{DISC}/{p.name}": p.read_bytes() for p in sorted(meta.glob("*.json"))} if meta.is_dir() else {}


def keyid(signer: Signer) -> str:
    return signer.public_key.keyid


@dataclass
class Repo:
    """A TUF repository folder (the build side)."""

    path: Path
    serializer: JSONSerializer = field(default_factory=lambda: JSONSerializer(compact=False))

    @property
    def meta(self) -> Path:
        return self.path / METADATA

    def load(self, role: str) -> Metadata:
        name = f"{self.root_version()}.root.json" if role == "root" else f"{role}.json"
        try:
            return Metadata.from_file(str(self.meta / name))
        except FileNotFoundError:
            raise ConfigError(str(self.path), f"no {name}: not a rapidship trust repository",
                              "create it with invoke trust.init, or pass the folder it made") from None

    def root_version(self) -> int:
        versions = [int(p.name.split(".")[0]) for p in self.meta.glob("*.root.json") if p.name.split(".")[0].isdigit()]
        return max(versions, default=0)

    def write(self, md: Metadata, role: str) -> bytes:
        """The role's file, atomically; returns its bytes (what the role above binds by hash)."""
        self.meta.mkdir(parents=True, exist_ok=True)
        name = f"{md.signed.version}.root.json" if role == "root" else f"{role}.json"
        data = md.to_bytes(self.serializer)
        tmp = self.meta / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.meta / name)
        return data


def _sign(md: Metadata, signers: list[Signer]) -> None:
    for s in signers:
        md.sign(s, append=True)


def init(path: Path, root: list[Signer], root_threshold: int, targets: list[Signer], targets_threshold: int,
         snapshot: Signer, timestamp: Signer, expiry: Expiry = Expiry(), now: datetime | None = None) -> Repo:
    """Root v1 (every root key signs), and empty targets, snapshot and timestamp v1."""
    now = now or datetime.now(timezone.utc)
    if root_threshold > len(root) or targets_threshold > len(targets) or min(root_threshold, targets_threshold) < 1:
        raise ConfigError("--root-threshold / --targets-threshold", "a threshold above the keys given, or below 1",
                          "give at least as many keys as the threshold (root: say 2 of 3)")
    repo = Repo(path)
    if repo.root_version():
        raise ConfigError(str(path), "already holds a trust root", "rotate it (invoke trust.rotate), never init again")
    r = Root(expires=expiry.of("root", now), consistent_snapshot=False)
    for role, signers, threshold in (("root", root, root_threshold), ("targets", targets, targets_threshold),
                                     ("snapshot", [snapshot], 1), ("timestamp", [timestamp], 1)):
        for s in signers:
            r.add_key(s.public_key, role)
        r.roles[role].threshold = threshold
    md = Metadata(r)
    _sign(md, root)
    repo.write(md, "root")
    release(repo, {}, targets, snapshot, timestamp, expiry, now)
    return repo


def target(digest: str, length: int, custom: dict) -> TargetFile:
    return TargetFile(length, {"sha256": digest.removeprefix("sha256:")}, "", unrecognized_fields={"custom": custom})


def release(repo: Repo, images: dict[str, TargetFile], targets: list[Signer], snapshot: Signer, timestamp: Signer,
            expiry: Expiry = Expiry(), now: datetime | None = None, keep: bool = False) -> int:
    """targets N+1 holding `images` (name -> target; with `keep`, added to what the last release
    holds), signed by `targets` (a second signer adds theirs with `cosign_targets`), then snapshot
    and timestamp N+1. Returns the targets version."""
    now = now or datetime.now(timezone.utc)
    _online_listed(repo.load("root").signed, snapshot, timestamp)  # before targets N+1 is written
    old = None if not (repo.meta / "targets.json").exists() else repo.load("targets")
    t = Targets(version=(old.signed.version + 1) if old else 1, expires=expiry.of("targets", now),
                targets=({**old.signed.targets} if old and keep else {}))
    for name, tf in images.items():
        tf.path = name
        t.targets[name] = tf
    md = Metadata(t)
    _sign(md, targets)
    repo.write(md, "targets")
    refresh(repo, snapshot, timestamp, expiry, now)
    return t.version


def cosign_targets(repo: Repo, signer: Signer, snapshot: Signer, timestamp: Signer) -> None:
    """A second release signer adds a signature to the current targets (a threshold of two people);
    the file changed, so snapshot and timestamp bind it again."""
    md = repo.load("targets")
    md.sign(signer, append=True)
    repo.write(md, "targets")
    refresh(repo, snapshot, timestamp)


def bound(version: int, data: bytes) -> MetaFile:
    """How a role names the file below it: version, sha256 and length of exactly those bytes."""
    return MetaFile(version, len(data), {"sha256": hashlib.sha256(data).hexdigest()})


def _online_listed(root: Root, snapshot: Signer, timestamp: Signer) -> None:
    """The online keys must be the ones root lists: whatever another key signs, every site refuses."""
    for role, signer in (("snapshot", snapshot), ("timestamp", timestamp)):
        if keyid(signer) not in root.roles[role].keyids:
            raise ConfigError(f"--{role}-key", f"key {keyid(signer)[:16]} is not the {role} key root v{root.version} "
                              "lists: every site would refuse what it signs",
                              f"pass the {role} key of the current root (after invoke trust.rotate --{role}-key, "
                              "the new one)")


def refresh(repo: Repo, snapshot: Signer, timestamp: Signer, expiry: Expiry = Expiry(),
            now: datetime | None = None) -> None:
    """snapshot and timestamp N+1 over the current targets (also what keeps a quiet site fresh),
    each binding the file below it by hash and length and naming the current root version."""
    now = now or datetime.now(timezone.utc)
    root = repo.load("root").signed
    _online_listed(root, snapshot, timestamp)
    made_under = {ROOT_FIELD: root.version}
    targets = repo.load("targets").signed.version
    old_snap = repo.load("snapshot").signed.version if (repo.meta / "snapshot.json").exists() else 0
    snap = Metadata(Snapshot(version=old_snap + 1, expires=expiry.of("snapshot", now),
                             meta={"targets.json": bound(targets, (repo.meta / "targets.json").read_bytes())},
                             unrecognized_fields=dict(made_under)))
    _sign(snap, [snapshot])
    snap_bytes = repo.write(snap, "snapshot")
    old_ts = repo.load("timestamp").signed.version if (repo.meta / "timestamp.json").exists() else 0
    ts = Metadata(Timestamp(version=old_ts + 1, expires=expiry.of("timestamp", now),
                            snapshot_meta=bound(snap.signed.version, snap_bytes), unrecognized_fields=dict(made_under)))
    _sign(ts, [timestamp])
    repo.write(ts, "timestamp")


def rotate(repo: Repo, old_root: list[Signer], new_root: list[Signer] | None = None, root_threshold: int | None = None,
           targets: list[Signer] | None = None, targets_threshold: int | None = None, snapshot: Signer | None = None,
           timestamp: Signer | None = None, expiry: Expiry = Expiry(), now: datetime | None = None) -> int:
    """Root N+1: each role given (`new_root`, `targets`, `snapshot`, `timestamp`) is held by exactly
    the keys given, a key left out is revoked; a role not given keeps its keys. Signed by distinct
    keys of the current root (a threshold of them) and by the new root keys; python-tuf checks both
    thresholds, as a site will, before anything is written. Returns the new root version."""
    now = now or datetime.now(timezone.utc)
    old, md = repo.load("root"), repo.load("root")
    r = md.signed
    _old_root_signers(old.signed, old_root)
    for role, signers in (("root", new_root), ("targets", targets), ("snapshot", snapshot and [snapshot]),
                          ("timestamp", timestamp and [timestamp])):
        if signers is None:
            continue
        for kid in list(r.roles[role].keyids):
            r.revoke_key(kid, role)
        for s in signers:
            r.add_key(s.public_key, role)
    r.roles["root"].threshold = root_threshold or r.roles["root"].threshold
    r.roles["targets"].threshold = targets_threshold or r.roles["targets"].threshold
    for role, flag in (("root", "--root-threshold"), ("targets", "--targets-threshold")):
        held = len(r.roles[role].keyids)
        if not 1 <= r.roles[role].threshold <= held:
            raise ConfigError(flag, f"a {role} threshold of {r.roles[role].threshold} with {held} {role} key(s)",
                              f"give at least as many distinct --{role}-key as the threshold, and a threshold of 1 or more")
    r.version += 1
    r.expires = expiry.of("root", now)
    new = Metadata(r)
    _sign(new, [*{keyid(s): s for s in [*old_root, *(new_root or [])]}.values()])
    for judge, which in ((old, f"root v{old.signed.version}'s"), (new, f"root v{r.version}'s own")):
        try:
            judge.verify_delegate("root", new)
        except UnsignedMetadataError as err:
            raise ConfigError("--old-root-key / --root-key", f"root v{r.version} would not verify against {which} "
                              f"threshold ({err}); nothing was written",
                              "sign with a threshold of the current root keys and with every new root key") from None
    repo.write(new, "root")
    return r.version


def _old_root_signers(root: Root, old_root: list[Signer]) -> None:
    """A threshold of *distinct* keys of the current root, and no other key."""
    kids = [keyid(s) for s in old_root]
    foreign = [k for k in kids if k not in root.roles["root"].keyids]
    threshold = root.roles["root"].threshold
    if foreign:
        raise ConfigError("--old-root-key", f"key {foreign[0][:16]} is not a root key of root v{root.version}",
                          "pass the current root's key holders' keys (a new root key goes to --root-key)")
    if len(set(kids)) < len(kids):
        raise ConfigError("--old-root-key", "the same root key is given twice: it counts once",
                          f"bring {threshold} different root keys of root v{root.version}")
    if len(kids) < threshold:
        raise ConfigError("--old-root-key", f"{len(kids)} of the {threshold} old root keys a new root needs",
                          "bring a threshold of the current root's key holders to the ceremony")


# ---- the site's side ---------------------------------------------------------------------------

class _DiscFetcher:
    """python-tuf's fetcher over a folder (the disc's metadata): a missing file is a 404."""

    def __new__(cls, folder: Path):
        from tuf.api.exceptions import DownloadHTTPError
        from tuf.ngclient import FetcherInterface

        class Fetcher(FetcherInterface):
            def _fetch(self, url: str):
                name = url.rsplit("/", 1)[-1]
                path = folder / name
                if "/" in name or not path.is_file():
                    raise DownloadHTTPError(f"{name} is not on the disc", 404)
                return iter([path.read_bytes()])

        return Fetcher()


def seed(site_tuf: Path, trusted_root: Path) -> None:
    """The site's trusted metadata starts from the root handed over out of band, once."""
    if (site_tuf / "root.json").exists():
        return
    site_tuf.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(trusted_root, site_tuf / "root.json")


def _expired_sentence(disc: Path, role: str) -> str:
    try:
        expires = json.loads((disc / f"{role}.json").read_text())["signed"]["expires"]
    except (OSError, ValueError, KeyError):
        expires = "an unknown date"
    ask = ("a disc with current metadata (the release team runs invoke trust.refresh: a new timestamp and "
           "snapshot, no new images)")
    return (f"the disc's {role} metadata expired on {expires}: ask the sender for {ask}, or accept it once "
            "with --accept-expired")


def revoked_sentence(disc: Path, site_tuf: Path) -> str:
    """When targets fail to verify: name a key that signed them and that a root in the chain removed."""
    try:
        signed_by = set(json.loads((disc / "targets.json").read_text())["signatures"][i]["keyid"]
                        for i in range(len(json.loads((disc / "targets.json").read_text())["signatures"])))
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    roots = sorted((int(p.name.split(".")[0]), p) for p in disc.glob("*.root.json") if p.name.split(".")[0].isdigit())
    held: set[str] = set()
    for version, path in roots:
        try:
            keys = set(json.loads(path.read_text())["signed"]["roles"]["targets"]["keyids"])
        except (OSError, ValueError, KeyError):
            return ""
        gone = (held - keys) & signed_by
        if gone:
            return (f"the disc's release is signed by key {sorted(gone)[0][:16]}, which root version {version} "
                    "removed from the release signers (revoked)")
        held |= keys
    return ""


def resolve(disc: Path, site_tuf: Path, images: dict[str, str], accept_expired: bool = False,
            warn=lambda _: None, source: str = "the disc") -> int:
    """Every `images` name -> manifest digest must be a target of the disc's release, as
    python-tuf's client resolves it from the site's trusted metadata. Raises one GateFailure naming
    each refusal; returns the targets version accepted. The client runs on a copy of the site's
    metadata: the site trusts the disc's metadata only once every check has passed.
    `source`: where the images are, as the refusal names it (a disc, or a registry for verify)."""
    import tempfile

    if not (site_tuf / "root.json").exists():
        raise ConfigError("--trust-root", "the site holds no trusted root", "pass --trust-root root.json (handed over "
                          "out of band, once; it is kept in the site directory)")
    work = Path(tempfile.mkdtemp(prefix=".tuf-trial-", dir=site_tuf.parent))
    try:
        trial = Path(shutil.copytree(site_tuf, work / DISC))
        version = _resolve(disc, trial, site_tuf, images, accept_expired, warn, source)
        for path in sorted(trial.glob("*.json")):  # the client's verified files, each replaced atomically
            shutil.copyfile(path, work / path.name)
            os.replace(work / path.name, site_tuf / path.name)
        return version
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _resolve(disc: Path, trial: Path, site_tuf: Path, images: dict[str, str], accept_expired: bool, warn,
             source: str) -> int:
    from tuf.api import exceptions as x
    from tuf.ngclient import Updater

    updater = Updater(str(trial), "file:///disc/", fetcher=_DiscFetcher(disc))
    trusted = updater._trusted_set  # noqa: SLF001 - what the client verified so far, to name a refusal
    if accept_expired:  # the operator's one-off: metadata is judged as of its own signing, said loudly
        warn("WARNING: --accept-expired: the disc's metadata is accepted even if its timestamp or snapshot expired")
        trusted.reference_time = datetime(1970, 1, 2, tzinfo=timezone.utc)
    try:
        updater.refresh()
    except x.ExpiredMetadataError as err:
        role = next((r for r in ("timestamp", "snapshot", "targets", "root") if r in str(err)), "timestamp")
        raise _refused(_expired_sentence(disc, role)) from None
    except (x.LengthOrHashMismatchError, x.DownloadLengthMismatchError):  # longer than bound: refused while read
        raise _refused(_substituted(disc, trusted)) from None
    except x.BadVersionNumberError as err:
        if any(_version(disc, r) < _version(site_tuf, r) for r in ("timestamp", "snapshot", "targets")):
            raise _refused(f"the disc's metadata is older than what this site already trusts ({err}): a rollback, "
                           "or a disc kept back") from None
        raise _refused(f"the disc's metadata is not trusted: its roles name other versions than the disc carries "
                       f"({err}): metadata of two releases mixed on one disc") from None
    except x.UnsignedMetadataError as err:
        said = revoked_sentence(disc, site_tuf) or f"its signatures do not reach the threshold ({err})"
        raise _refused(f"the disc's release metadata is not trusted: {said}") from None
    except x.RepositoryError as err:
        raise _refused(f"the disc's release metadata is not trusted: {err}") from None
    if problem := _binding_problem(trusted.root, trusted.timestamp, trusted.snapshot):
        raise _refused(problem)
    problems = []
    for name, digest in sorted(images.items()):
        info = updater.get_targetinfo(name)
        if info is None:
            problems.append(f"{name} is not a target of the release the disc's metadata signs (an image it adds, "
                            "or an image under another name)")
        elif info.hashes.get("sha256") != digest.removeprefix("sha256:"):
            problems.append(f"{name}: the release signs manifest sha256:{info.hashes.get('sha256', '')[:12]}..., "
                            f"{source} carries {digest[:19]} (another release's image, or not a release's at all)")
    if problems:
        raise _refused(*problems)
    return trusted.targets.version


def _substituted(disc: Path, trusted) -> str:
    """One line for a file that is not the one the verified role above it binds by hash and length."""
    if "snapshot" in trusted:
        above, meta, role = f"snapshot v{trusted.snapshot.version}", trusted.snapshot.meta["targets.json"], "targets"
    else:
        above, meta, role = f"timestamp v{trusted.timestamp.version}", trusted.timestamp.snapshot_meta, "snapshot"
    return (f"the disc's {role}.json (version {_version(disc, role)}) is not the {role} v{meta.version} that {above} "
            f"binds by sha256 and length: {role} metadata of another release, or signed by another key, under genuine "
            f"{above.split()[0]} metadata")


def _binding_problem(root: Root, timestamp: Timestamp, snapshot: Snapshot) -> str:
    """Fail closed on metadata that names the file below by version alone, and on a disc that leaves
    off the root its snapshot or timestamp was made under (it would keep the site on revoked keys)."""
    for role, meta in (("timestamp", timestamp.snapshot_meta), ("snapshot", snapshot.meta.get("targets.json"))):
        if meta is None or meta.length is None or not meta.hashes:
            md = timestamp if role == "timestamp" else snapshot
            return (f"the disc's {role} v{md.version} names the metadata below it by version only (written before "
                    "release metadata was bound by hash): ask the sender for a disc exported after invoke trust.refresh")
    for md in (timestamp, snapshot):
        made_under = md.unrecognized_fields.get(ROOT_FIELD)
        if not isinstance(made_under, int):
            return (f"the disc's {md.type} v{md.version} names no root version: ask the sender for a disc exported "
                    "after invoke trust.refresh")
        if made_under > root.version:
            return (f"the disc's {md.type} v{md.version} was made under root v{made_under}, but the disc's root chain "
                    f"ends at v{root.version}: {made_under}.root.json is missing (a disc that hides a key rotation)")
    return ""


def _version(folder: Path, role: str) -> int:
    try:
        return int(json.loads((folder / f"{role}.json").read_text())["signed"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _refused(*problems: str) -> GateFailure:
    head = problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n  " + "\n  ".join(problems)
    return GateFailure("trust check", head + "\nnothing was loaded",
                       "do not use this disc: ask the sender for the current release disc")
