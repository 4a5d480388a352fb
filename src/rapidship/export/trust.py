"""Signatures on discs: what export carries, and what import checks against a key before loading.

Export: `find_signed` picks each image's signed bundle from the workspace (what `invoke sign` kept
under build/<variant>/signed/sha256-<hex>/, found through the sign records by image id) and
`disc_files` lays it out under `signatures/sha256-<hex>/` on every volume, with `payload.json` and
`payload.sig` (the signed payload and its signature, flat, for install.sh and openssl).

Import, before anything is loaded (`verify_disc`):
  1. the disc names the key its images were signed with (MANIFEST.json `signing_key_fingerprint`);
     it must be the key given out of band (--key);
  2. every image: `sign.verify.verify_image` over the disc's signatures/ folder (the rules
     `invoke verify` runs against a registry: signature over exactly this manifest digest, SBOM and
     provenance attestations whose subject it is, provenance matching the config's labels, the
     release the config states), and the signed manifest's config digest is the image id
     MANIFEST.json lists, under a name the signature lists.
The archive itself is never handed to a loader: export/repack.py writes what is loaded from the
signed ids, by content. The chain: key -> signature -> manifest digest -> config digest = image id
-> the config's rootfs.diff_ids -> the layer members that hash to them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rapidship.errors import ConfigError, GateFailure
from rapidship.export.carry import PAYLOAD, PAYLOAD_SIG, SIGNATURES, flat_payload
from rapidship.export.scratch import work_folder
from rapidship.sign import formats as f
from rapidship.sign.release import Release

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

    from rapidship.export.verify import Checked

_HEX = r"[0-9a-f]{64}"
_DISC_NAME = re.compile(rf"^{SIGNATURES}/sha256-{_HEX}/(manifest\.json|sig\.json|att\.json|payload\.json|payload\.sig|"
                        rf"blobs/sha256-{_HEX})$")


# ---- import side: flags and the disc's signatures ----------------------------------------------

def require_key(key: str | None, no_verify: bool) -> "ec.EllipticCurvePublicKey | None":
    """--key cosign.pub, or an explicit --no-verify; neither is bad input, never 'trust the disc'."""
    from rapidship.sign.keys import load_public

    if key and no_verify:
        raise ConfigError("--key / --no-verify", "both given", "pass --key cosign.pub to verify, or --no-verify alone")
    if not key and not no_verify:
        raise ConfigError("--key", "no public key: every image is checked against the key that signed it "
                          "before anything is loaded",
                          "pass --key cosign.pub (the public key given to you out of band, never one from a disc); "
                          "--no-verify loads without checking signatures")
    return load_public(key, "--key") if key else None


@dataclass
class Trust:
    """What verify_disc established: the key, and per signed image id the image and its digest."""

    fingerprint: str
    images: dict[str, dict] = field(default_factory=dict)  # image id -> MANIFEST.json image entry
    names: dict[str, set[str]] = field(default_factory=dict)  # image id -> the names its verified signature allows
    releases: dict[str, Release] = field(default_factory=dict)  # image id -> the release its signed config states
    checked: list[str] = field(default_factory=list)


def refusal(problems: list[str]) -> GateFailure:
    head = problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n  " + "\n  ".join(problems)
    return GateFailure("signature check", head + "\nnothing was loaded",
                       "do not use this disc: ask the sender for a new one (and check that --key is the key they sign with)")


def label(image: dict) -> str:
    return f"image {image.get('ref')} ({str(image.get('image_id'))[:19]})"


def materialize(checked: "Checked", into: Path) -> Path:
    """The signatures/ folder of the lowest volume, copied into `into` (from a directory or straight
    out of an ISO), each file checked again against its manifest; every volume must carry the same."""
    from rapidship.export.verify import read_slice

    first = min(checked.volumes)
    ref = checked.volumes[first]
    mine = {n: m["sha256"] for n, m in ref.manifest["files"].items() if n.startswith(SIGNATURES + "/")}
    problems = [f"{v.name()}: its signatures/ differ from volume {first}'s: copy this volume again"
                for _, v in sorted(checked.volumes.items())
                if {k: m["sha256"] for k, m in v.manifest["files"].items() if k.startswith(SIGNATURES + "/")} != mine]
    problems += [f"{ref.name()}: unexpected file {n} under signatures/" for n in sorted(mine) if not _DISC_NAME.match(n)]
    if problems:
        raise refusal(problems)
    root = into / SIGNATURES
    root.mkdir(parents=True, exist_ok=True)
    for name, digest in sorted(mine.items()):
        data = read_slice(ref.files[name])
        if hashlib.sha256(data).hexdigest() != digest:
            raise refusal([f"{ref.name()}: {name} changed since it was checked: read the volume again"])
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def check_release_trust(checked: "Checked", site_tuf: Path, accept_expired: bool, warn, work: Path | None) -> int:
    """The disc's tuf/ folder (every volume the same, each file checked against its manifest) read by
    python-tuf's client from the site's trusted metadata: each image's name resolves to its signed
    digest (sign/tufmeta.resolve). Returns the targets version accepted."""
    from rapidship.export.verify import read_slice
    from rapidship.sign import tufmeta

    first = min(checked.volumes)
    ref = checked.volumes[first]
    prefix = tufmeta.DISC + "/"
    mine = {n: m["sha256"] for n, m in ref.manifest["files"].items() if n.startswith(prefix)}
    if any({k: m["sha256"] for k, m in v.manifest["files"].items() if k.startswith(prefix)} != mine
           for v in checked.volumes.values()):
        raise refusal([f"the volumes carry different {prefix} folders: copy them again"])
    if not mine:
        raise refusal([f"the disc carries no release metadata ({prefix}), and this site decides by it: ask the sender "
                       "for a disc exported from a workspace with a trust repository (invoke trust.init)"])
    with work_folder("rapidship-tuf-", work) as tmp:
        for name, digest in mine.items():
            data = read_slice(ref.files[name])
            if hashlib.sha256(data).hexdigest() != digest or "/" in name[len(prefix):]:
                raise refusal([f"{ref.name()}: {name} changed since it was checked: read the volume again"])
            (tmp / name[len(prefix):]).write_bytes(data)
        images = {str(i.get("ref")): str(i.get("signed_digest") or "") for i in checked.images}
        return tufmeta.resolve(tmp, site_tuf, images, accept_expired, warn)


def check_signatures(checked: "Checked", key: "ec.EllipticCurvePublicKey", key_path: str, root: Path) -> Trust:
    """Steps 1 and 2 over the disc's signatures/ folder (already copied to `root`)."""
    from rapidship.sign.keys import fingerprint
    from rapidship.sign.sources import DirSource
    from rapidship.sign.verify import verify_image

    given = fingerprint(key)
    claims = {v.manifest.get("signing_key_fingerprint") or "" for v in checked.volumes.values()}
    disc = checked.manifest.get("signing_key_fingerprint") or ""
    if len(claims) > 1:
        raise refusal([f"the volumes name different signing keys ({', '.join(sorted(c or 'none' for c in claims))})"])
    unsigned = [f"{label(i)} was exported unsigned (--unsigned): it cannot be verified against {key_path}; "
                "load it only if you trust the disc without a signature (--no-verify)"
                for i in checked.images if not i.get("signed_digest")]
    if not disc:
        raise refusal(unsigned or ["the disc names no signing key: it was exported unsigned"])
    if disc != given:  # a valid key of another signer: the operator's input, not a damaged disc
        raise ConfigError("--key", f"{key_path} is key {given}, but this disc was signed with key {disc}\n"
                          "nothing was loaded", f"pass --key with the public key of the disc's signer (fingerprint "
                          f"{disc}); if {key_path} is the key you were told to expect, this disc is not from your "
                          "sender: refuse it")
    trust = Trust(fingerprint=given)
    src = DirSource(root, where="the disc's signatures/")
    problems = list(unsigned)
    for image in checked.images:
        digest = str(image.get("signed_digest") or "")
        if not digest:
            continue
        verdicts = verify_image(src, digest, key)
        bad = [p for v in verdicts for p in v.problems]
        ids = {v.image_id for v in verdicts if v.kind == "image"}
        names = {n for v in verdicts for n in v.names}
        if bad:
            problems += [f"{label(image)}: {p}" for p in bad]
        elif ids != {image.get("image_id")}:
            problems.append(f"{label(image)}: the signed manifest {digest[:19]} is of image "
                            f"{', '.join(i[:19] for i in sorted(ids))}, not of the id MANIFEST.json lists (swapped)")
        elif image.get("ref") not in names:
            signed_names = ", ".join(sorted(names)) or "none: signed before names were signed, sign it again"
            problems.append(f"{label(image)}: MANIFEST.json names it {image.get('ref')}, a name its signature does not "
                            f"cover (signed names: {signed_names})")
        elif problem := _flat_problem(src, root, digest):
            problems.append(f"{label(image)}: {problem}")
        else:
            trust.images.setdefault(image["image_id"], image)
            trust.names.setdefault(image["image_id"], set()).update(names)
            trust.releases.update({v.image_id: v.release for v in verdicts if v.kind == "image" and v.release})
            trust.checked.append(f"{image['ref']}: " + "; ".join(c for v in verdicts for c in v.checked))
    if problems:
        raise refusal(problems)
    return trust


def _flat_problem(src, root: Path, digest: str) -> str:
    """payload.json / payload.sig (what install.sh checks with openssl) are sig.json's own."""
    folder = root / f.tag_for(digest, "")
    want = flat_payload(src.manifest(f.tag_for(digest, "sig")), src.blob)
    try:
        have = ((folder / PAYLOAD).read_bytes(), (folder / PAYLOAD_SIG).read_bytes())
    except OSError:
        return f"{PAYLOAD} or {PAYLOAD_SIG} is missing from signatures/{folder.name}/"
    return "" if have == want else (f"signatures/{folder.name}/{PAYLOAD} or {PAYLOAD_SIG} differ from the signature "
                                    "in sig.json (changed or swapped)")


def verify_disc(checked: "Checked", key: "ec.EllipticCurvePublicKey", key_path: str, work: Path | None = None) -> Trust:
    """Steps 1 and 2; raises one GateFailure naming every refused image. Nothing is loaded here."""
    with work_folder("rapidship-trust-", work) as tmp:
        return check_signatures(checked, key, key_path, materialize(checked, tmp))


def unchecked_release(checked: "Checked", site: str | None) -> str:
    """When the disc carries release metadata and this host holds no site trust root: what that lowers."""
    from rapidship.export.site import site_dir
    from rapidship.sign import tufmeta

    files = checked.volumes[min(checked.volumes)].manifest["files"]
    if not any(n.startswith(tufmeta.DISC + "/") for n in files):
        return ""
    where = site_dir(site) / tufmeta.DISC / "root.json"
    return (f"the disc carries release metadata ({tufmeta.DISC}/), but this site holds no trust root ({where}): the "
            "images were checked by key alone, so a release signer's key that a newer root revoked is not noticed. "
            "Pass --trust-root root.json once (or --site / $RAPIDSHIP_SITE_DIR: the site directory that holds it)")


def skipped(checked: "Checked", site_tuf: Path | None = None) -> str:
    """What --no-verify leaves unchecked, said plainly."""
    disc = checked.manifest.get("signing_key_fingerprint") or "no key (exported unsigned)"
    images = "\n".join(f"  {label(i)}: " + (f"signed as {str(i['signed_digest'])[:19]}, signature and attestations "
                                             "NOT checked" if i.get("signed_digest") else "exported unsigned")
                       for i in checked.images)
    return ("WARNING: --no-verify: these images are loaded WITHOUT checking them against a signing key:\n"
            f"{images}\n  not checked: the key (the disc names {disc}), each image's signature, SBOM and provenance "
            "attestations and signed names" + (f", and the release metadata this site decides by ({site_tuf})"
                                               if site_tuf else "") + ".\n"
            "  Still checked: the volumes' checksums; only the images MANIFEST.json lists are loaded, each "
            "config and layer by its hash, under the names MANIFEST.json gives.")
