"""Tasks for signatures: make a key pair, sign a pushed variant, verify an image against a key."""

from __future__ import annotations

from invoke import Collection

from rapidship.cli.options import task

from rapidship import console
from rapidship.errors import exits_cleanly
from rapidship.records import Workspace
from rapidship.stages.publish import registry_for, split_image

TRUST_HELP = {"site": "the site directory whose trusted TUF metadata decides (default $RAPIDSHIP_SITE_DIR, else "
                      "~/.local/state/rapidship)",
              "trust-root": "the TUF root.json handed over out of band (once: kept in the site directory); with it, "
                            "or a root the site already holds, each image must resolve to its digest by TUF",
              "tuf-metadata": "the TUF repository's metadata folder to resolve with (default BUILD_DIR/trust/metadata; "
                              "a disc's tuf/ folder is one too)"}

KEY_HELP = ("cosign.key path, or a pkcs11:/awskms:// ... URI through $RAPIDSHIP_SIGNER_COMMAND "
            "(default $RAPIDSHIP_SIGNING_KEY); the password comes from $RAPIDSHIP_SIGNING_PASSWORD")
ONLINE_KEYS_HELP = {"snapshot-key": "with a trust repository (invoke trust.init): the snapshot role's key "
                                    "(default $RAPIDSHIP_TUF_SNAPSHOT_KEY)",
                    "timestamp-key": "with a trust repository: the timestamp role's key "
                                     "(default $RAPIDSHIP_TUF_TIMESTAMP_KEY)"}


@exits_cleanly
def _generate(c, out, json=False):
    """Make an ECDSA P-256 key pair in cosign's format; the password comes from $RAPIDSHIP_SIGNING_PASSWORD."""
    from pathlib import Path

    from rapidship.sign.keys import fingerprint, generate as make, load_public

    key, pub = make(Path(out))
    console.err.print(f"private key -> {key} (encrypted, mode 0600: keep it off images and discs)")
    console.err.print(f"public key  -> {pub} (give it to the sites out of band)")
    console.err.print(f"fingerprint {fingerprint(load_public(pub))}")
    if json:
        console.print_json({"private_key": str(key), "public_key": str(pub), "fingerprint": fingerprint(load_public(pub))})


keys_tasks = Collection("keys")  # `invoke keys.generate`; kept off the top level
keys_tasks.add_task(task(name="generate", help={"out": "directory for cosign.key (0600, encrypted) and cosign.pub",
                                                "json": "print the paths and the fingerprint as JSON on stdout"})(
    _generate))


@task(help={"variant": "variant id (signs what `invoke push` recorded for it)",
            "image": "or HOST/REPO:TAG|@DIGEST that this workspace pushed", "key": KEY_HELP,
            "ca-cert": "PEM CA bundle of the registry (default $RAPIDSHIP_REGISTRY_CA)",
            "build-dir": "where build/<variant>/ records live",
            **ONLINE_KEYS_HELP})
@exits_cleanly
def sign(c, variant=None, image=None, key=None, ca_cert=None, build_dir="build", snapshot_key=None, timestamp_key=None):
    """Sign the index and every arch of a pushed variant; attach SBOM and SLSA provenance attestations."""
    from rapidship.stages.publish import sign as sign_stage

    sign_stage(variant, image, key, ca_cert, build_dir, snapshot_key, timestamp_key)


@task(help={"image": "HOST/REPO:TAG or HOST/REPO@sha256:... to verify",
            "variant": "or: the digest `invoke push` recorded for this variant (not whatever the tag shows now)",
            "key": "cosign.pub (required)",
            "policy": "trivy policy file the scan must have been decided under (its rules for the variant)",
            "ca-cert": "PEM CA bundle of the registry (default $RAPIDSHIP_REGISTRY_CA)",
            "signed-as": "HOST/REPO the signatures may name besides the image's own repository (repeatable: "
                         "where a promoted image was signed, e.g. the staging repository)",
            "build-dir": "where build/<variant>/push.json lives (with --variant)", **TRUST_HELP},
      iterable=["signed_as"])
@exits_cleanly
def verify(c, image=None, variant=None, key=None, policy=None, ca_cert=None, signed_as=None, build_dir="build",
           site=None, trust_root=None, tuf_metadata=None):
    """Check signature, SBOM and provenance attestations of an image (and every arch under an index)."""
    from rapidship.errors import ConfigError
    from rapidship.publish.oci import split_repository
    from rapidship.publish.push import read_push_record
    from rapidship.sign.keys import load_public
    from rapidship.sign.sources import RegistrySource

    if bool(image) == bool(variant):
        raise ConfigError("--image / --variant", "name exactly one", "pass --image HOST/REPO:TAG or --variant ID")
    if not key:
        raise ConfigError("--key", "no public key", "pass --key cosign.pub (verification never trusts the registry)")
    public = load_public(key)
    if variant:
        pushed = read_push_record(Workspace(build_dir), variant)
        image = f"{pushed.registry}/{pushed.repository}@{pushed.index_digest}"
    host, repo, ref = split_image(image)
    reg = registry_for(host, ca_cert)
    found = reg.head_manifest(repo, ref)
    if found is None:
        raise ConfigError("--image", f"{image} is not in the registry", "check the name and tag")
    src = RegistrySource(reg, repo)
    references = {src.where}
    for other in signed_as or []:  # checked like --image: HOST/REPO, no tag, no credentials
        other_host, other_repo = split_repository(other, "--signed-as")
        references.add(f"{other_host}/{other_repo}")
    verdicts = verify_digest(src, found.digest, public, policy, references)
    if all(v.ok for v in verdicts):  # signed by the key; on a TUF site also the release's digest for each name
        names = {n: v.digest for v in verdicts if v.kind == "image" for n in v.names}
        tuf_gate(names, f"verify {image}", site, trust_root, tuf_metadata, build_dir)
    report(verdicts, image)


def tuf_gate(images: dict[str, str], what: str, site=None, trust_root=None, metadata=None, build_dir="build"):
    """When the site decides by TUF (--trust-root, or a root held in the site directory): each signed
    name must resolve, by python-tuf's client, to exactly its digest (sign/tufmeta.resolve), or a
    GateFailure. Nothing happens on a site without a trust root."""
    from pathlib import Path

    from rapidship.errors import ConfigError
    from rapidship.export.site import trusted_tuf
    from rapidship.sign import tufmeta

    site_tuf = trusted_tuf(site, trust_root)
    if site_tuf is None:
        return None
    folder = Path(metadata) if metadata else tufmeta.repo_dir(build_dir) / tufmeta.METADATA
    if not (folder / "timestamp.json").is_file():
        raise ConfigError("--tuf-metadata", f"{folder} holds no TUF release metadata, and this site decides by it",
                          "pass --tuf-metadata DIR: the release's metadata folder (build/trust/metadata, or a disc's "
                          "tuf/)")
    if not images:
        raise ConfigError("--image", f"{what}: no signed image name to resolve",
                          "verify an image signed by invoke sign")
    version = tufmeta.resolve(folder, site_tuf, images, source="the registry")
    console.err.print(f"TUF: {len(images)} signed name(s) resolve to their digests in release targets v{version}")
    return version


def verify_digest(src, digest, public, policy_file, references=None):
    """verify_image, with the trivy policy's rules for the variant each provenance names."""
    from functools import lru_cache

    from rapidship.gates.policy import load_policy
    from rapidship.sign.verify import verify_image

    @lru_cache(maxsize=None)  # one read of the policy file per variant, not per arch
    def rules(variant):
        return load_policy(policy_file, variant).rules.model_dump(mode="json") if variant else None

    age = load_policy(policy_file).release if policy_file else None
    return verify_image(src, digest, public, rules if policy_file else None, references, age)


def report(verdicts, what):
    from rapidship.errors import GateFailure

    rows = [(v.kind, v.digest[:19], "PASS" if v.ok else "FAIL", "; ".join(v.problems or v.checked)) for v in verdicts]
    console.table(f"verify {what}", ["object", "digest", "result", "details"], rows)
    console.print_json({"image": what, "passed": all(v.ok for v in verdicts),
                        "verdicts": [{"digest": v.digest, "kind": v.kind, "passed": v.ok, "problems": v.problems,
                                      "checked": v.checked} for v in verdicts]})
    problems = [p for v in verdicts for p in v.problems]
    if problems:
        wrong_key = all("with key" in p or "no signature by key" in p for p in problems)
        raise GateFailure(f"verify {what}", "\n  ".join(problems),
                          "check --key: it must be the public key of the key that signed this release (its "
                          "fingerprint is in the sign record); if it is, do not use this image" if wrong_key else
                          "do not use this image; re-sign only what was built here")


# ---- TUF trust root (sign/tufmeta.py; docs/supply-chain.md "Release trust") ----------------------

def _keys(refs, flag):
    from rapidship.sign.tufmeta import open_key

    return [open_key(r, flag) for r in refs or []]


@exits_cleanly
def _trust_init(c, root_key=None, root_threshold=2, targets_key=None, targets_threshold=1, snapshot_key=None,
                timestamp_key=None, build_dir="build"):
    """Create the trust repository: root (threshold of offline keys), targets (release signers), snapshot, timestamp."""
    from rapidship.errors import ConfigError
    from rapidship.sign import tufmeta

    if not snapshot_key or not timestamp_key:
        raise ConfigError("--snapshot-key / --timestamp-key", "missing", "pass both (cosign.key files or key URIs)")
    repo = tufmeta.init(tufmeta.repo_dir(build_dir), _keys(root_key, "--root-key"), int(root_threshold),
                        _keys(targets_key, "--targets-key"), int(targets_threshold),
                        tufmeta.open_key(snapshot_key, "--snapshot-key"),
                        tufmeta.open_key(timestamp_key, "--timestamp-key"))
    console.err.print(f"trust root v1 -> {repo.meta / '1.root.json'}: hand it to every site out of band "
                      "(invoke import --trust-root), once")


@exits_cleanly
def _trust_rotate(c, old_root_key=None, root_key=None, root_threshold=None, targets_key=None, targets_threshold=None,
                  snapshot_key=None, timestamp_key=None, build_dir="build"):
    """Rotate keys: write root N+1, signed by a threshold of the old root keys and the new.
    Each role given is held by exactly the keys given (a key left out is revoked), a role not given
    keeps its keys."""
    from rapidship.sign import tufmeta

    repo = tufmeta.Repo(tufmeta.repo_dir(build_dir))
    version = tufmeta.rotate(repo, _keys(old_root_key, "--old-root-key"),
                             _keys(root_key, "--root-key") if root_key else None,
                             int(root_threshold) if root_threshold else None,
                             _keys(targets_key, "--targets-key") if targets_key else None,
                             int(targets_threshold) if targets_threshold else None,
                             tufmeta.open_key(snapshot_key, "--snapshot-key") if snapshot_key else None,
                             tufmeta.open_key(timestamp_key, "--timestamp-key") if timestamp_key else None)
    console.err.print(f"root v{version} -> {repo.meta / f'{version}.root.json'}: the next disc carries it; sites "
                      "walk to it themselves.")
    if targets_key:
        console.err.print("Sign the next release with the new targets key; sites that also verify by key alone need "
                          "its cosign.pub out of band (invoke import --key).")
    if snapshot_key or timestamp_key:
        console.err.print("Now run invoke trust.refresh with the new snapshot and timestamp keys: a disc exported "
                          "after it frees every site (also one a stolen key fast-forwarded).")


@exits_cleanly
def _trust_refresh(c, snapshot_key=None, timestamp_key=None, build_dir="build"):
    """New snapshot and timestamp over the current release (keeps a site's metadata from expiring)."""
    from rapidship.sign import tufmeta

    repo = tufmeta.Repo(tufmeta.repo_dir(build_dir))
    tufmeta.refresh(repo, *tufmeta.online_signers(repo, snapshot_key, timestamp_key))
    console.err.print(f"timestamp v{repo.load('timestamp').signed.version} -> {repo.meta}")


_ROLE_HELP = {"root-key": "a root key (repeatable; say 3, offline)", "root-threshold": "root keys that must sign (2)",
              "targets-key": "a release signer's key (repeatable)",
              "new-root-key": "a key of the new root (repeatable; every one signs; default: the current root keys)",
              "new-targets-key": "a release signer's key of the new root (repeatable; the ones left out are revoked)",
              "targets-threshold": "release signers that must sign",
              "snapshot-key": "the snapshot role's key", "timestamp-key": "the timestamp role's key",
              "new-snapshot-key": "the snapshot role's new key (the old one is revoked)",
              "new-timestamp-key": "the timestamp role's new key (the old one is revoked)",
              "old-root-key": "a current root key (repeatable: a threshold of them)",
              "build-dir": "the workspace; the repository is build/trust"}
trust_tasks = Collection("trust")


def _help(*names, **renamed):
    return {n: _ROLE_HELP[n] for n in names} | {flag: _ROLE_HELP[entry] for flag, entry in renamed.items()}


trust_tasks.add_task(task(name="init", iterable=["root_key", "targets_key"], help=_help(
    "root-key", "root-threshold", "targets-key", "targets-threshold", "snapshot-key", "timestamp-key", "build-dir"))(
    _trust_init))
trust_tasks.add_task(task(name="rotate", iterable=["old_root_key", "root_key", "targets_key"], help=_help(
    "old-root-key", "root-threshold", "targets-threshold", "build-dir", **{
        "root-key": "new-root-key", "targets-key": "new-targets-key", "snapshot-key": "new-snapshot-key",
        "timestamp-key": "new-timestamp-key"}))(_trust_rotate))
trust_tasks.add_task(task(name="refresh", help=_help("snapshot-key", "timestamp-key", "build-dir"))(_trust_refresh))
