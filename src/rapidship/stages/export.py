"""The export and export-verify stages: signed images onto disc volumes; every volume checked, every image's
signatures verified and its archive read back (or loaded into a scratch registry). The import task shares the checks."""

from __future__ import annotations

from pathlib import Path

from rapidship import console
from rapidship.config.matrix import load_matrix
from rapidship.records import Workspace


def export_images(variant=None, arch=None, image=None, media="dvd", out=None, keep_dirs=False, unsigned=False,
                  build_dir="build", variants_file="variants.yaml", since=None):
    """Save signed images into media-sized ISO volumes (zstd, signatures, SHA256SUMS, MANIFEST.json, install.sh)."""
    import time

    from rapidship.export.write import export, parse_media, resolve_images

    disc = parse_media(media)
    ws = Workspace(build_dir)
    variants = [load_matrix(variants_file).get(v) for v in variant or []]
    images = resolve_images(variants, arch, image or [], ws)
    target = Path(out) if out else Path(build_dir) / time.strftime("export-%Y%m%d-%H%M%S")
    delta = None
    if since:  # a delta disc: only what the release the sites hold lacks
        from dataclasses import asdict

        from rapidship.export.delta import plan_delta
        from rapidship.export.verify import previous_release

        delta = plan_delta([asdict(i) for i in images], *previous_release(since))
    with progress_bars() as progress:
        record = export(images, disc, target, keep_dirs=keep_dirs, progress=progress, ws=ws, unsigned=unsigned,
                        delta=delta)
    console.table(f"export {record.export_id} -> {target}", ["volume", "ISO", "bytes", "sha256"],
                  [(v.number, v.iso, f"{v.iso_bytes:,}", v.iso_sha256[:16]) for v in record.volumes])
    console.err.print(f"record: {target / 'export.json'} (--json prints it)")
    return record


def export_verify(from_=None, work=None, key=None, no_verify=False, site=None, trust_root=None, accept_expired=False,
                  load=False) -> dict:
    """Checksums, completeness and signatures; then the archive import would load, written by the same code and
    read back by name (each layer and config hashed, ids compared), or with --load pushed into a scratch registry."""
    from rapidship.export.load import read_back_check, registry_push, scratch_registry
    from rapidship.export.trust import require_key

    public = require_key(key, no_verify)
    with progress_bars() as progress:
        checked = checked_volumes(from_, progress)
        trust, plan = trusted_images(checked, public, key, progress, work, site, trust_root, accept_expired)
        loading = progress.add_task("scratch registry" if load else "read back", total=plan.layer_bytes)
        if load:
            with scratch_registry(Path(work) if work else None) as registry:
                loaded = registry_push(checked, plan, registry, False, Path(work) if work else None,
                                       lambda n: progress.advance(loading, n))
        else:
            loaded = read_back_check(checked, plan, lambda n: progress.advance(loading, n))
    console.table(f"export {checked.export_id}: verified", ["image", "id", "source id"],
                  [(x.ref, x.image_id, x.expected_id) for x in loaded])
    return {"export_id": checked.export_id, "volumes": len(checked.volumes), **verification(trust, accept_expired),
            "releases": releases_of(plan, trust), "verified": [x.report() for x in loaded]}


def progress_bars():
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    return Progress(TextColumn("{task.description:<22}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    TimeRemainingColumn(), console=console.err)


def checked_volumes(sources, progress):
    from rapidship.export.verify import check_hashes, check_identity, expand_sources, measure, open_volume, total_bytes

    if not sources:
        from rapidship.errors import ConfigError
        raise ConfigError("--from", "no volume given", "pass the export directory, or every volume: --from DIR_OR_ISO (repeatable)")
    checked = check_identity([open_volume(s) for s in expand_sources(sources)])
    hashing = progress.add_task("checksums", total=total_bytes(checked))
    check_hashes(checked, measure(checked, lambda n: progress.advance(hashing, n)))
    return checked


def trusted_images(checked, public, key, progress, work, site=None, trust_root=None, accept_expired=False, for_docker=False):
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
        console.err.print(f"verified {console.counted(len(trust.images), 'image')} with key {trust.fingerprint[:19]}: "
                          "signature, SBOM and provenance attestations, signed names and release")
    console.err.print(f"found every config and layer of {console.counted(len(plan.images), 'image')} by content; the "
                      f"loader gets an archive written from them alone, without the "
                      f"{console.counted(plan.ignored, 'other member')} of the disc's archive (docker save's folders, "
                      "per-layer json, VERSION and tag files: nothing a signature covers)")
    if plan.left_out:
        console.err.print(f"{console.counted(plan.left_out, 'layer')} of the disc the engine holds by chain ID "
                          "(the same bytes below) not fed to the loader; it keeps its own")
    if plan.skipped or plan.from_store or plan.held_images:
        console.err.print(f"delta disc: {plan.skipped} layer(s) the engine holds by chain ID stay in it; "
                          f"{len(plan.from_store)} read from its layer store and "
                          f"{len(plan.held_layers)} from docker save of {len(plan.held_images)} image(s), by content")
    return trust, plan


def verification(trust, accept_expired=False) -> dict:
    tuf = next((c for c in (trust.checked if trust else []) if c.startswith("release metadata")), "")
    accept_expired = accept_expired and not tuf.startswith("release metadata NOT")
    return {"verified_with": trust.fingerprint if trust else "", "verification": "signatures" if trust else "skipped",
            "release_metadata": tuf, "accepted_expired": bool(tuf and accept_expired)}


def releases_of(plan, trust) -> dict:
    """Per image the release it was loaded as: the verified signature's (with its serial), else its labels'."""
    from rapidship import oci_json
    from rapidship.sign.release import of_config

    signed = trust.releases if trust else {}
    return {i.image_id: (r.payload() if (r := signed.get(i.image_id) or of_config(oci_json.parse_or_none(i.config)))
                         else None) for i in plan.images}
