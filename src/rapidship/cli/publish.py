"""Tasks that publish: push every arch and the manifest list, promote by digest."""

from __future__ import annotations


from invoke import task

from rapidship import console
from rapidship.cli.options import VARIANTS_HELP
from rapidship.config.matrix import load_matrix
from rapidship.errors import exits_cleanly
from rapidship.records import Workspace


def _registry_defaults(config_dir, project_key):
    """HOST/PROJECT from harbor/: the instance host and the staging or release project."""
    from rapidship.publish.harbor.config import load_harbor

    cfg = load_harbor(config_dir)
    return f"{cfg.instance.host}/{project_key}"


@task(help={"variant": "variant id", "registry": "HOST[:PORT]/PROJECT to push to (default: the staging project "
            "of harbor/harbor.yaml)", "ca-cert": "PEM CA bundle that signs the registry's certificate "
            "(default $RAPIDSHIP_REGISTRY_CA)", "skip-gates": "push even without passing gate records (LOUD; "
            "the record says so and promote refuses it)", "build-dir": "where build/<variant>/ records live",
            "harbor-config": "harbor configuration directory", **VARIANTS_HELP})
@exits_cleanly
def push(c, variant, registry=None, ca_cert=None, skip_gates=False, build_dir="build", harbor_config="harbor",
         variants_file="variants.yaml"):
    """Push every arch of a variant, then one manifest list under its tag; writes build/<variant>/push.json.

    Credentials: RAPIDSHIP_REGISTRY_USER / RAPIDSHIP_REGISTRY_PASSWORD, else docker config."""
    import os

    from rapidship.publish.oci import credentials_for, split_repository
    from rapidship.publish.push import push as push_variant, write_record
    from rapidship.publish.retrying import RetryPolicy

    v = load_matrix(variants_file).get(variant)
    target = registry or _registry_defaults(harbor_config, "staging")
    host, _ = split_repository(target)
    ws = Workspace(build_dir)
    record = push_variant(v, target, ws, credentials_for(host),
                          ca_cert or os.environ.get("RAPIDSHIP_REGISTRY_CA"), skip_gates, RetryPolicy.from_env(),
                          log=console.err.print)
    path = write_record(ws, record)
    console.err.print(f"pushed {host}/{record.repository}:{record.tag}@{record.index_digest} "
                      f"({len(record.arches)} arches, {record.retries} retries, {record.seconds}s) -> {path}")


@task(help={"variant": "variant id", "to": "HOST/PROJECT to release into (default: the release project of "
            "harbor/harbor.yaml)", "ca-cert": "PEM CA bundle (default $RAPIDSHIP_REGISTRY_CA)",
            "build-dir": "where build/<variant>/push.json lives", "harbor-config": "harbor configuration directory"})
@exits_cleanly
def promote(c, variant, to=None, ca_cert=None, build_dir="build", harbor_config="harbor"):
    """Copy the staged index of a variant into the release project by digest (no rebuild)."""
    import os

    from rapidship.publish.oci import credentials_for, split_repository
    from rapidship.publish.push import promote as promote_record, read_push_record, write_record
    from rapidship.publish.retrying import RetryPolicy

    ws = Workspace(build_dir)
    record = read_push_record(ws, variant)
    target = to or f"{record.registry}/{_registry_defaults(harbor_config, 'release').split('/', 1)[1]}"
    host, _ = split_repository(target)
    done = promote_record(record, target, credentials_for(host), ca_cert or os.environ.get("RAPIDSHIP_REGISTRY_CA"),
                          RetryPolicy.from_env(), log=console.err.print)
    console.err.print(f"release record -> {write_record(ws, done)}")
