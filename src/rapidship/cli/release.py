"""The release task: every stage of a release in order, resumable, with a timeline and one table."""

from __future__ import annotations

import os
from pathlib import Path

from rapidship import console
from rapidship.cli.options import ARCH_DEFAULT, VARIANTS_HELP, arches_flag, task
from rapidship.cli.build import BUILD_INPUTS_HELP
from rapidship.cli.export import MEDIA_HELP
from rapidship.cli.scan import DB_HELP
from rapidship.cli.sign import ONLINE_KEYS_HELP
from rapidship.config.matrix import load_matrix
from rapidship.errors import ConfigError, GateFailure, exits_cleanly
from rapidship.records import Workspace


@task(name="release", iterable=["conda_channel"],
      help={"variant": "variant id", "arch": f"amd64, arm64 or all ({ARCH_DEFAULT})",
            "since": "a delta disc: the previous release's export.json, export folder, volume or ISO",
            "out": "folder of the disc, new or empty (default build/<variant>/disc-<what it carries>)",
            "registry": "HOST[:PORT]/PROJECT to push to (default $RAPIDSHIP_REGISTRY/staging)",
            "key": "signing key: cosign.key or a URI (default $RAPIDSHIP_SIGNING_KEY); password from "
                   "$RAPIDSHIP_SIGNING_PASSWORD",
            "public-key": "cosign.pub the disc must verify with (default $RAPIDSHIP_SIGNING_PUBLIC_KEY, else the "
                          ".pub beside --key)",
            "policy": "trivy policy file (default policy/trivy.yaml)", "media": f"disc size: {MEDIA_HELP}",
            **DB_HELP, "report-out": "folder of the report (default build/report)", **ONLINE_KEYS_HELP,
            **{k: f"build: {BUILD_INPUTS_HELP[k]}" for k in ("ca-bundle", "pip-index", "conda-channel", "network")},
            **VARIANTS_HELP})
@exits_cleanly
def release(c, variant, arch=None, since=None, out=None, registry=None, key=None, public_key=None,
            policy="policy/trivy.yaml", media="dvd", cache_dir=None, skip_db_update=False, offline_scan=False,
            trivy=None, report_out="build/report", variants_file="variants.yaml", snapshot_key=None, timestamp_key=None,
            ca_bundle=None, pip_index=None, conda_channel=None, network=None):
    """Run every stage of a release in order, skipping those whose record still holds.
    The stages: build, gates, scan, push, smoke, sign, export, export-verify, report. The first that
    says no stops the chain (run it again to resume there); then the release's one verdict, the report
    page's words; writes build/<variant>/release.json."""
    from rapidship.release.current import Release
    from rapidship.release.plan import rows
    from rapidship.release.run import release as run_release
    from rapidship.sign.keys import configured_key

    v = load_matrix(variants_file).get(variant)
    arches = tuple(a.value for a in arches_flag(v, arch))
    registry = registry or (f"{os.environ['RAPIDSHIP_REGISTRY']}/staging" if os.environ.get("RAPIDSHIP_REGISTRY") else None)
    if not registry:
        raise ConfigError("--registry", "no registry to push to", "pass --registry HOST[:PORT]/PROJECT (or set "
                          "RAPIDSHIP_REGISTRY, as build/registry/env.sh does)")
    key = key or configured_key()
    if not key:
        raise ConfigError("--key", "no signing key", "pass --key cosign.key or set RAPIDSHIP_SIGNING_KEY")
    from rapidship.stages.publish import signer_for

    signer = signer_for(key)  # a missing or locked --key is named before its public half is looked for beside it
    public_key = public_key or os.environ.get("RAPIDSHIP_SIGNING_PUBLIC_KEY") or _beside(key)
    _usable(signer, key, public_key)
    from rapidship.stages.publish import online_for

    online_for(Workspace(), snapshot_key, timestamp_key)  # a trust repository's online keys open before any stage
    from rapidship.gates.policy import load_policy

    load_policy(policy, v.id)  # a bad --policy is bad input, found before any stage runs
    from rapidship.imagebuild.buildkit import check_network

    check_network(network)  # build's own check, before any stage runs
    if since and not Path(since).exists():
        raise ConfigError("--since", f"{since} does not exist", "pass the previous release's export.json or disc folder")
    rel = Release(variant=v, arch_flag=arch, arches=arches, ws=Workspace(), registry=registry, key=key,
                  public_key=public_key, policy=policy, since=since, out=Path(out) if out else None,
                  report_out=Path(report_out), media=media, variants_file=variants_file,
                  scan_flags={"cache_dir": cache_dir, "skip_db_update": skip_db_update, "offline_scan": offline_scan,
                              "trivy": trivy}, online_keys={"snapshot_key": snapshot_key, "timestamp_key": timestamp_key},
                  build_inputs={"ca_bundle": ca_bundle, "pip_index": pip_index, "conda_channel": conda_channel or None,
                                "network": network})
    record = run_release(rel)
    path = rel.ws.release(v.id)
    console.table(f"release {v.id} {', '.join(arches)}: {record.seconds:.1f} s", ["stage", "verdict", "seconds", "read",
                  "written", "why"], rows(record))
    if not record.passed:
        stage = next(s for s in record.stages if s.name == record.stopped_at)
        raise GateFailure(f"release {v.id}: stage {stage.name}", f"said no (its record: {stage.record or 'none'}):\n  "
                          f"{stage.why}", f"fix what it names and run invoke release again: the stages before it "
                          f"are current and are skipped, it resumes at {stage.name} (chain record: {path})")
    from rapidship.stages.report import said_verdict
    from rapidship.release.current import disc_out
    from rapidship.report.verdict import verdict
    from rapidship.report.write import summary_of

    # the page's verdict, by the same function from the same records (the report stage's scope and disc)
    said = verdict(summary_of(rel.ws, list(load_matrix(variants_file).variants.values()), [disc_out(rel)],
                              scope=([v.id], list(arches))))
    console.err.print(f"chain record: {path} ({record.seconds:.1f} s); the page: {rel.report_out / 'index.html'}")
    said_verdict(said, f"release {v.id} ({', '.join(arches)})")
    if not said.released:
        raise GateFailure(f"release {v.id}", said.words, "fix what it names and run invoke release again")


def _beside(key: str) -> str:
    pub = Path(key).with_suffix(".pub")
    if "://" in key or ":" in key.split("/", 1)[0] or not pub.is_file():
        raise ConfigError("--public-key", f"no public key given and none beside {key}",
                          "pass --public-key cosign.pub (or set RAPIDSHIP_SIGNING_PUBLIC_KEY)")
    return str(pub)


def _usable(signer, key: str, public_key: str) -> None:
    """--public-key is the public half of the opened key: checked before any stage."""
    from rapidship.sign.keys import fingerprint, load_public

    public = load_public(public_key, "--public-key")
    if fingerprint(signer.public_key()) != fingerprint(public):
        raise ConfigError("--public-key", f"{public_key} is not the public half of {key}",
                          "pass the cosign.pub made with that key (invoke keys.generate writes both)")
