"""Tasks that publish: push every arch and the manifest list, promote by digest."""

from __future__ import annotations


from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import ARCH_DEFAULT, VARIANTS_HELP
from rapidship.cli.sign import ONLINE_KEYS_HELP, TRUST_HELP, tuf_gate
from rapidship.errors import exits_cleanly
from rapidship.records import Workspace


@task(help={"variant": "variant id", "registry": "HOST[:PORT]/PROJECT to push to (default: the staging project "
            "of harbor/harbor.yaml)", "ca-cert": "PEM CA bundle that signs the registry's certificate "
            "(default $RAPIDSHIP_REGISTRY_CA)", "skip-gates": "push even without passing gate records (LOUD; "
            "the record says so and promote refuses it)", "build-dir": "where build/<variant>/ records live",
            "harbor-config": "harbor configuration directory", "key": "sign after the push with this key "
            "(default $RAPIDSHIP_SIGNING_KEY; see invoke --help sign)", "no-sign": "push without signing (LOUD)",
            "arch": f"push only this arch (repeatable; {ARCH_DEFAULT}): the index lists only them", **ONLINE_KEYS_HELP, **VARIANTS_HELP}, iterable=["arch"])
@exits_cleanly
def push(c, variant, registry=None, ca_cert=None, skip_gates=False, build_dir="build", harbor_config="harbor",
         key=None, no_sign=False, arch=None, variants_file="variants.yaml", snapshot_key=None, timestamp_key=None):
    """Push every arch of a variant, then one manifest list under its tag, then sign it when a key is configured.

    Credentials: RAPIDSHIP_REGISTRY_USER / RAPIDSHIP_REGISTRY_PASSWORD, else docker config."""
    from rapidship.cli.options import arch_flag
    from rapidship.stages.publish import push as push_stage

    push_stage(variant, registry, ca_cert, skip_gates, build_dir, harbor_config, key, no_sign,
               [arch_flag(a) for a in arch] if arch else None, variants_file, snapshot_key, timestamp_key)


@task(help={"variant": "variant id", "to": "HOST/PROJECT to release into (default: the release project of "
            "harbor/harbor.yaml)", "ca-cert": "PEM CA bundle (default $RAPIDSHIP_REGISTRY_CA)",
            "key": "cosign.pub the staged objects must verify with (default $RAPIDSHIP_SIGNING_PUBLIC_KEY)",
            "no-verify": "promote without verifying signatures (LOUD; the record says so)",
            "allow-downgrade": "let the release tag move to an older release than it holds now (LOUD; recorded)",
            "build-dir": "where build/<variant>/push.json lives", "harbor-config": "harbor configuration directory",
            **TRUST_HELP})
@exits_cleanly
def promote(c, variant, to=None, ca_cert=None, key=None, no_verify=False, build_dir="build", harbor_config="harbor",
            allow_downgrade=False, site=None, trust_root=None, tuf_metadata=None):
    """Verify the staged index of a variant, then copy it with its signatures into the release project by digest."""
    import os

    from rapidship.stages.publish import registry_defaults, registry_for
    from rapidship.errors import ConfigError, GateFailure
    from rapidship.publish.oci import credentials_for, split_repository
    from rapidship.publish.push import gated_records, promote as promote_record, read_push_record, write_record
    from rapidship.publish.retrying import RetryPolicy
    from rapidship.sign.attach import promote_signed, verify_staged
    from rapidship.sign.keys import fingerprint, load_public

    ws = Workspace(build_dir)
    record = read_push_record(ws, variant)
    target = to or f"{record.registry}/{registry_defaults(harbor_config, 'release').split('/', 1)[1]}"
    host, _ = split_repository(target)
    key = key or os.environ.get("RAPIDSHIP_SIGNING_PUBLIC_KEY")
    if not key and not no_verify:
        raise ConfigError("--key", "promote verifies the staged signatures and no public key is given",
                          "pass --key cosign.pub (or set RAPIDSHIP_SIGNING_PUBLIC_KEY); --no-verify skips it loudly")
    public = load_public(key) if key and not no_verify else None
    ca = ca_cert or os.environ.get("RAPIDSHIP_REGISTRY_CA")
    reg = registry_for(host, ca)
    problems = gated_records(ws, record)
    if problems:
        raise GateFailure(f"promote {variant}", "the staged push is not of the images the records gated:\n  "
                          + "\n  ".join(problems), "gate, scan and push the same build again; nothing was copied")
    verified, tuf_version = None, None
    if public is not None:
        verified = verify_staged(reg, record, public)
        console.err.print(f"verified {host}/{record.repository}@{record.index_digest[:19]} with {fingerprint(public)[:19]}")
        names = {f"{record.registry}/{record.repository}:{a.tag}": a.digest for a in record.arches.values()}
        tuf_version = tuf_gate(names, f"promote {variant}", site, trust_root, tuf_metadata, build_dir)
    else:
        console.err.print("[bold red]WARNING: --no-verify: promoting WITHOUT checking signatures; the record says so.[/]")
    done = promote_record(record, target, credentials_for(host), ca, RetryPolicy.from_env(), log=console.err.print,
                          allow_downgrade=allow_downgrade, tuf_version=tuf_version or 0)
    signed = promote_signed(reg, record, done.target, verified)
    done = done.model_copy(update={"verified_with": fingerprint(public) if public is not None else "",
                                   "signed_objects": signed})
    console.err.print(f"{signed} signature/attestation objects copied; release record -> {write_record(ws, done)}")
