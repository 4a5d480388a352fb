"""Tasks for offline delivery: export onto disc volumes, import, verify (each image against a key)."""

from __future__ import annotations

import os
from pathlib import Path

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import VARIANTS_HELP, arch_flag
from rapidship.config.matrix import load_matrix
from rapidship.errors import exits_cleanly
from rapidship.records import Workspace

KEY_HELP = {"key": "cosign.pub: the public key the images must verify with (given out of band; required "
                   "unless --no-verify)",
            "no-verify": "load WITHOUT checking signatures (LOUD: says what it skipped)"}

TUF_HELP = {"site": "the site directory: its record of the signed serials and its trusted TUF metadata (default "
                    "$RAPIDSHIP_SITE_DIR, else ~/.local/state/rapidship; install.sh --site reads the same)",
            "trust-root": "the TUF root.json handed over out of band (once: it is kept in the site directory); from "
                          "then on every disc's release metadata must resolve each image to its digest",
            "accept-expired": "accept release metadata whose timestamp or snapshot expired, this once (LOUD; recorded "
                              "in the output as accepted_expired)"}


def _progress():
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    return Progress(TextColumn("{task.description:<22}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    TimeRemainingColumn(), console=console.err)


@task(name="export", iterable=["variant", "image"],
      help={"variant": "variant id (repeatable); its image comes from the build record",
            "arch": "amd64 or arm64 (default: every arch of the variant that is in the engine)",
            "image": "any local image ref (repeatable)",
            "media": "dvd (4.7 GB), dvd-dl (8.5 GB), bd25 (25 GB) or a size in bytes (default dvd)",
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
    import time

    from rapidship.export.write import export, parse_media, record_json, resolve_images

    disc = parse_media(media)
    ws = Workspace(build_dir)
    variants = [load_matrix(variants_file).get(v) for v in variant or []]
    images = resolve_images(variants, arch_flag(arch).value if arch else None, image or [], ws)
    target = Path(out) if out else Path(build_dir) / time.strftime("export-%Y%m%d-%H%M%S")
    delta = None
    if since:  # a delta disc: only what the release the sites hold lacks
        from dataclasses import asdict

        from rapidship.export.delta import plan_delta
        from rapidship.export.verify import previous_release

        delta = plan_delta([asdict(i) for i in images], *previous_release(since))
    with _progress() as progress:
        record = export(images, disc, target, keep_dirs=keep_dirs, progress=progress, ws=ws, unsigned=unsigned,
                        delta=delta)
    console.table(f"export {record.export_id} -> {target}", ["volume", "ISO", "bytes", "sha256"],
                  [(v.number, v.iso, f"{v.iso_bytes:,}", v.iso_sha256[:16]) for v in record.volumes])
    console.err.print(f"record: {target / 'export.json'} (--json prints it)")
    if json:
        console.print_json(record_json(record))


def _checked_volumes(sources, progress):
    from rapidship.export.verify import check_hashes, check_identity, expand_sources, measure, open_volume, total_bytes

    if not sources:
        from rapidship.errors import ConfigError
        raise ConfigError("--from", "no volume given", "pass the export directory, or every volume: --from DIR_OR_ISO (repeatable)")
    checked = check_identity([open_volume(s) for s in expand_sources(sources)])
    hashing = progress.add_task("checksums", total=total_bytes(checked))
    check_hashes(checked, measure(checked, lambda n: progress.advance(hashing, n)))
    return checked


def _trusted(checked, public, key, progress, work, site=None, trust_root=None, accept_expired=False, for_docker=False):
    """Signatures before anything else (or the loud skip); then, on a site that holds a TUF root
    (--trust-root once, kept in the site directory), the disc's release metadata; then pass 1 over
    the archive: what will be loaded, found by content. Nothing is loaded here."""
    from dataclasses import replace

    from rapidship.export.load import plan_load
    from rapidship.export.site import trusted_tuf
    from rapidship.export.trust import check_release_trust, skipped, unchecked_release, verify_disc

    trust = None
    site_tuf = trusted_tuf(site, trust_root)
    if public is None:
        console.err.print(f"[bold red]{skipped(checked, site_tuf)}[/]")
    else:
        trust = verify_disc(checked, public, key, Path(work) if work else None)
    if trust and not site_tuf and (said := unchecked_release(checked, site)):  # never a silent lower level
        console.err.print(f"[bold red]WARNING: {said}[/]")
        trust.checked.append(f"release metadata NOT checked: {said}")
    if site_tuf and public is not None:
        warn = lambda text: console.err.print(f"[bold red]{text}[/]")  # noqa: E731
        version = check_release_trust(checked, site_tuf, accept_expired, warn, Path(work) if work else None)
        expired = " (EXPIRED, accepted once with --accept-expired)" if accept_expired else ""
        trust.checked.append(f"release metadata: targets version {version}{expired}")
        trust.releases = {i: replace(r, tuf_version=version) for i, r in trust.releases.items()}  # the order: TUF's
        console.err.print(f"TUF: every image resolves to its signed digest in release targets v{version}")
    size = sum(p["bytes"] for p, _ in checked.parts)
    scanning = progress.add_task("read archive", total=size)
    plan = plan_load(checked, lambda n: progress.advance(scanning, n), for_docker)
    if trust:
        console.err.print(f"verified {len(trust.images)} image(s) with key {trust.fingerprint[:19]}: signature, SBOM "
                          "and provenance attestations, signed names and release")
    console.err.print(f"found every config and layer of {len(plan.images)} image(s) by content; the loader gets an "
                      f"archive written from them alone ({plan.ignored} other member(s) of the disc's archive are "
                      "not passed on)")
    if plan.skipped or plan.from_store or plan.held_images:
        console.err.print(f"delta disc: {plan.skipped} layer(s) the engine holds by chain ID stay in it; "
                          f"{len(plan.from_store)} read from its layer store and "
                          f"{len(plan.held_layers)} from docker save of {len(plan.held_images)} image(s), by content")
    return trust, plan


def _verification(trust, accept_expired=False) -> dict:
    tuf = next((c for c in (trust.checked if trust else []) if c.startswith("release metadata")), "")
    accept_expired = accept_expired and not tuf.startswith("release metadata NOT")
    return {"verified_with": trust.fingerprint if trust else "", "verification": "signatures" if trust else "skipped",
            "release_metadata": tuf, "accepted_expired": bool(tuf and accept_expired)}


def _releases(plan, trust) -> dict:
    """Per image the release it was loaded as: the verified signature's (with its serial), else its labels'."""
    from rapidship import oci_json
    from rapidship.sign.release import of_config

    signed = trust.releases if trust else {}
    return {i.image_id: (r.payload() if (r := signed.get(i.image_id) or of_config(oci_json.parse_or_none(i.config)))
                         else None) for i in plan.images}


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
    with term_ends_cleanly(), _progress() as progress:
        checked = _checked_volumes(from_, progress)
        trust, plan = _trusted(checked, public, key, progress, work, site, trust_root, accept_expired,
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
        console.print_json({"export_id": checked.export_id, **_verification(trust, accept_expired),
                            "releases": _releases(plan, trust),
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
    """Checksums, completeness and signatures; then the archive import would load, written by the same code and
    read back by name (each layer and config hashed, ids compared), or with --load pushed into a scratch registry."""
    from rapidship.export.load import read_back_check, registry_push, scratch_registry
    from rapidship.export.trust import require_key

    public = require_key(key, no_verify)
    with _progress() as progress:
        checked = _checked_volumes(from_, progress)
        trust, plan = _trusted(checked, public, key, progress, work, site, trust_root, accept_expired)
        loading = progress.add_task("scratch registry" if load else "read back", total=plan.layer_bytes)
        if load:
            with scratch_registry(Path(work) if work else None) as registry:
                loaded = registry_push(checked, plan, registry, False, Path(work) if work else None,
                                       lambda n: progress.advance(loading, n))
        else:
            loaded = read_back_check(checked, plan, lambda n: progress.advance(loading, n))
    console.table(f"export {checked.export_id}: verified", ["image", "id", "source id"],
                  [(x.ref, x.image_id, x.expected_id) for x in loaded])
    if json:
        console.print_json({"export_id": checked.export_id, "volumes": len(checked.volumes),
                            **_verification(trust, accept_expired),
                            "releases": _releases(plan, trust), "verified": [x.report() for x in loaded]})
