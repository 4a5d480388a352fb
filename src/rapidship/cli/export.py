"""Tasks for offline delivery: export onto disc volumes, import, verify (each image against a key)."""

from __future__ import annotations

import os
from pathlib import Path

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import ARCH_DEFAULT, VARIANTS_HELP, arch_flag
from rapidship.errors import exits_cleanly
from rapidship.stages.export import checked_volumes, progress_bars, releases_of, trusted_images, verification

MEDIA_HELP = "dvd (4.7 GB), dvd-dl (8.5 GB), bd25 (25 GB) or a size in bytes (default dvd)"

KEY_HELP = {"key": "cosign.pub: the public key the images must verify with (given out of band; required "
                   "unless --no-verify)",
            "no-verify": "load WITHOUT checking signatures (LOUD: says what it skipped)"}

TUF_HELP = {"site": "the site directory: its record of the signed serials and its trusted TUF metadata (default "
                    "$RAPIDSHIP_SITE_DIR, else ~/.local/state/rapidship; install.sh --site reads the same)",
            "trust-root": "the TUF root.json handed over out of band (once: it is kept in the site directory); from "
                          "then on every disc's release metadata must resolve each image to its digest",
            "accept-expired": "accept release metadata whose timestamp or snapshot expired, this once (LOUD; recorded "
                              "in the output as accepted_expired)"}


@task(name="export", iterable=["variant", "image"],
      help={"variant": "variant id (repeatable); its image comes from the build record",
            "arch": f"amd64 or arm64 ({ARCH_DEFAULT})",
            "image": "any local image ref (repeatable)",
            "media": MEDIA_HELP,
            "out": "output directory, new or empty (default build/export-<time>)",
            "keep-dirs": "keep the volume-NN/ directories next to the ISO images",
            "unsigned": "also export images that have no signature in the build dir (LOUD; MANIFEST.json says so)",
            "build-dir": "where build/<variant>/ records and signatures (invoke sign) live",
            "since": "a delta disc: the previous release's export.json, export folder, volume or ISO; only the "
                     "layers it lacks are written (the site's import takes the rest from its copy of it)",
            "json": "print the record (export.json) on stdout too", **VARIANTS_HELP})
@exits_cleanly
def export_images(c, variant=None, arch=None, image=None, media="dvd", out=None, keep_dirs=False, unsigned=False,
                  build_dir="build", variants_file="variants.yaml", json=False, since=None):
    """Save signed images into media-sized ISO volumes (zstd, signatures, SHA256SUMS, MANIFEST.json, install.sh)."""
    from rapidship.export.write import record_json
    from rapidship.stages.export import export_images as export_stage

    record = export_stage(variant, arch_flag(arch).value if arch else None, image, media, out, keep_dirs, unsigned,
                          build_dir, variants_file, since)
    if json:
        console.print_json(record_json(record))


@task(name="import", iterable=["from_"],
      help={"from": "a volume: directory or ISO file (repeatable; pass every volume of the export)",
            "registry": "push to this registry (HOST[:PORT][/PREFIX]) with skopeo instead of docker load",
            "insecure": "talk plain HTTP / skip TLS checks with --registry",
            "ca-cert": "PEM CA bundle that signs the --registry's certificate (default $RAPIDSHIP_REGISTRY_CA)",
            "work": "directory for the temporary archive with --registry (default $TMPDIR)",
            "allow-downgrade": "let an older release replace the newer one a name points at now (LOUD; recorded in "
                               "the output as downgraded_from)", **KEY_HELP, **TUF_HELP,
            "json": "print what was loaded as JSON on stdout (ids, verification, releases)"})
@exits_cleanly
def import_images(c, from_=None, registry=None, insecure=False, ca_cert=None, work=None, key=None, no_verify=False,
                  allow_downgrade=False, json=False, site=None, trust_root=None, accept_expired=False):
    """Check every volume, verify every image against --key, then load the images and compare their ids.
    With --registry, credentials come from RAPIDSHIP_REGISTRY_USER / _PASSWORD or the docker auth file."""
    from rapidship.export.load import docker_load, registry_push
    from rapidship.export.scratch import remove_leftovers, term_ends_cleanly
    from rapidship.export.site import Ledger, site_lock
    from rapidship.export.trust import require_key

    public = require_key(key, no_verify)
    warn = lambda text: console.err.print(f"[bold red]{text}[/]")  # noqa: E731
    remove_leftovers(Path(work) if work else None, console.err.print)
    with term_ends_cleanly(), progress_bars() as progress:
        checked = checked_volumes(from_, progress)
        trust, plan = trusted_images(checked, public, key, progress, work, site, trust_root, accept_expired,
                               for_docker=not registry)
        signed, ledger = (trust.releases if trust else {}), Ledger.at(site)
        loading = progress.add_task("push" if registry else "docker load", total=plan.layer_bytes)
        with site_lock(site, console.err.print):  # decide (downgrade check), load and record: one import at a time
            if registry:
                loaded = registry_push(checked, plan, registry, not insecure, Path(work) if work else None,
                                       lambda n: progress.advance(loading, n),
                                       ca_cert=ca_cert or os.environ.get("RAPIDSHIP_REGISTRY_CA"),
                                       allow_downgrade=allow_downgrade, warn=warn, signed=signed, ledger=ledger)
            else:
                loaded = docker_load(checked, plan, lambda n: progress.advance(loading, n), allow_downgrade, warn,
                                     signed, ledger)
    console.table(f"export {checked.export_id}", ["image", "id"],
                  [(x.where, x.image_id + (f" (DOWNGRADE from {x.downgraded_from})" if x.downgraded_from else ""))
                   for x in loaded])
    if json:
        console.print_json({"export_id": checked.export_id, **verification(trust, accept_expired),
                            "releases": releases_of(plan, trust),
                            "loaded": [x.report() for x in loaded]})


@task(name="export-verify", iterable=["from_"],
      help={"from": "a volume: directory or ISO file (repeatable; pass every volume of the export)",
            "work": "directory for the scratch registry and the temporary archive with --load (default $TMPDIR)",
            "load": "also push every image into a scratch registry on 127.0.0.1 (writes and compresses every "
                    "layer: a proof that a registry takes the archive, at many times the cost of reading it)",
            **KEY_HELP, **TUF_HELP,
            "json": "print what was verified as JSON on stdout (ids, verification, releases)"})
@exits_cleanly
def export_verify(c, from_=None, work=None, key=None, no_verify=False, json=False, site=None, trust_root=None,
                  accept_expired=False, load=False):
    """Check a disc without loading it: checksums, completeness, signatures and the archive.
    The archive import would load is written by the same code and read back by name (each layer and
    config hashed, ids compared), or with --load pushed into a scratch registry."""
    from rapidship.stages.export import export_verify as verify_stage

    shown = verify_stage(from_, work, key, no_verify, site, trust_root, accept_expired, load)
    if json:
        console.print_json(shown)
