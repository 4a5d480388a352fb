"""The push and sign stages, and what they share: the signing key, the registry client, the trust
repository's online keys. Thin edge: publish/ and sign/ do the work."""

from __future__ import annotations

from rapidship import console
from rapidship.config.matrix import load_matrix
from rapidship.errors import ConfigError
from rapidship.records import Workspace


def push(variant, registry=None, ca_cert=None, skip_gates=False, build_dir="build", harbor_config="harbor",
         key=None, no_sign=False, arches=None, variants_file="variants.yaml", snapshot_key=None, timestamp_key=None):
    """Push every arch of a variant (or only `arches`), then one manifest list under its tag, then sign it when a
    key is configured (and not `no_sign`). Returns the push record."""
    import os

    from rapidship.publish.oci import credentials_for, split_repository
    from rapidship.publish.push import push as push_variant, write_record
    from rapidship.publish.retrying import RetryPolicy
    from rapidship.sign.keys import KEY_ENV, configured_key

    v = load_matrix(variants_file).get(variant)
    ws = Workspace(build_dir)
    arches = arches or ws.default_arches(v)   # --arch's one rule: what was built, else this machine's
    unknown = [a.value for a in arches if a not in v.arches]
    if unknown:
        raise ConfigError("--arch", f"{', '.join(unknown)} is not an arch of {variant} "
                          f"({', '.join(a.value for a in v.arches)})", "pass one of the variant's arches")
    if set(arches) != set(v.arches):  # the index then names only these arches, and says so
        v = v.model_copy(update={"arches": tuple(a for a in v.arches if a in arches)})
        console.err.print(f"[yellow]note: --arch: the index of {variant} lists only "
                          f"{', '.join(a.value for a in v.arches)}[/]")
    target = registry or registry_defaults(harbor_config, "staging")
    host, _ = split_repository(target)
    key = key or configured_key()
    signer = signer_for(key) if key and not no_sign else None  # a wrong password stops before anything is pushed
    online = online_for(ws, snapshot_key, timestamp_key) if signer else None  # so do missing online keys
    record = push_variant(v, target, ws, credentials_for(host),
                          ca_cert or os.environ.get("RAPIDSHIP_REGISTRY_CA"), skip_gates, RetryPolicy.from_env(),
                          log=console.err.print)
    path = write_record(ws, record)
    console.err.print(f"pushed {host}/{record.repository}:{record.tag}@{record.index_digest} "
                      f"({console.counted(len(record.arches), 'arch', 'arches')}, "
                      f"{console.counted(record.retries, 'retry', 'retries')}, {record.seconds}s) -> {path}")
    if signer is None:
        why = "--no-sign" if no_sign else f"no signing key configured ({KEY_ENV} or --key)"
        console.err.print(f"[bold red]WARNING: NOT SIGNED: {why}. promote, Harbor's cosign enforcement and the "
                          f"disc import refuse unsigned digests: run invoke sign --variant {variant}.[/]")
        return record
    sign_pushed(ws, record, signer, ca_cert, online)
    return record


def sign(variant=None, image=None, key=None, ca_cert=None, build_dir="build", snapshot_key=None, timestamp_key=None):
    """Sign the index and every arch of a pushed variant; attach SBOM and SLSA provenance attestations."""
    from rapidship.publish.push import read_push_record

    ws = Workspace(build_dir)
    if bool(variant) == bool(image):
        raise ConfigError("--variant / --image", "name exactly one", "pass --variant ID or --image HOST/REPO:TAG")
    signer = signer_for(key)
    record = read_push_record(ws, variant) if variant else pushed_record(ws, image, ca_cert)
    return sign_pushed(ws, record, signer, ca_cert, online_for(ws, snapshot_key, timestamp_key))


def registry_defaults(config_dir, project_key):
    """HOST/PROJECT from harbor/: the instance host and the staging or release project."""
    from rapidship.publish.harbor.config import load_harbor

    cfg = load_harbor(config_dir)
    return f"{cfg.instance.host}/{project_key}"


def pushed_record(ws, image, ca_cert):
    """The push record of the workspace that pushed `image` (the provenance is made from its records)."""
    from rapidship.errors import ConfigError
    from rapidship.publish.push import read_push_record

    host, repo, ref = split_image(image)
    found = registry_for(host, ca_cert).head_manifest(repo, ref)
    if found is None:
        raise ConfigError("--image", f"{image} is not in the registry", "push it first (invoke push)")
    for path in sorted(ws.root.glob("*/push.json")):
        record = read_push_record(ws, path.parent.name)
        if (record.registry, record.repository, record.index_digest) == (host, repo, found.digest):
            return record
    raise ConfigError("--image", f"{image} ({found.digest[:19]}) was not pushed from {ws.root}",
                      "sign runs on what this workspace pushed: its provenance comes from the build records")


def split_image(image):
    from rapidship.errors import ConfigError
    from rapidship.publish.oci import split_repository

    name, ref = (image.split("@", 1) if "@" in image else
                 (image.rsplit(":", 1) if ":" in image.rsplit("/", 1)[-1] else (image, "")))
    if not ref:
        raise ConfigError("--image", f"{image} names no tag or digest", "write HOST/REPO:TAG or HOST/REPO@sha256:...")
    host, repo = split_repository(name, "--image")
    return host, repo, ref


def signer_for(key):
    from rapidship.errors import ConfigError
    from rapidship.sign.keys import KEY_ENV, configured_key, open_signer

    ref = key or configured_key()
    if not ref:
        raise ConfigError("--key", "no signing key", f"pass --key cosign.key or set {KEY_ENV}")
    return open_signer(ref)


def registry_for(host, ca_cert):
    import os

    from rapidship.console import on_retry
    from rapidship.publish.oci import Registry, credentials_for
    from rapidship.publish.retrying import RetryPolicy

    return Registry(host, credentials_for(host), ca_cert or os.environ.get("RAPIDSHIP_REGISTRY_CA"),
                    RetryPolicy.from_env(), on_retry=on_retry)


def online_for(ws, snapshot_key=None, timestamp_key=None):
    """The workspace's trust repository and its online signers (None without one): push opens them
    before it pushes, as it opens the signing key."""
    from rapidship.sign import tufmeta

    repo = tufmeta.Repo(tufmeta.repo_dir(ws.root))
    return repo, tufmeta.online_signers(repo, snapshot_key, timestamp_key)


def sign_pushed(ws, record, signer, ca_cert, online):
    """Sign what push recorded; writes build/<variant>/sign.json. Shared by `sign` and `push`. With
    a trust repository in the workspace (invoke trust.init), also a TUF release of every signed name."""
    from rapidship.sign import tufmeta

    from rapidship.sign.attach import sign_variant

    repo, online = online  # online_for's answer, asked before anything is signed or pushed
    targets: dict = {}
    done = sign_variant(ws, record, signer, registry_for(record.registry, ca_cert), log=console.err.print,
                        on_target=lambda name, d, n, custom: targets.update({name: tufmeta.target(d, n, custom)}))
    path = ws.save(ws.sign(record.variant), done)
    if online:
        version = tufmeta.release(repo, targets, [tufmeta.KeySigner(signer)], *online, keep=True)
        console.err.print(f"TUF: targets version {version} binds {len(targets)} name(s) -> {repo.meta}")
    console.err.print(f"signed {record.registry}/{record.repository}@{record.index_digest[:19]} and "
                      f"{console.counted(len(done.arches), 'arch image')} with {done.key_fingerprint[:19]} ({done.seconds}s) -> {path}")
    return done
