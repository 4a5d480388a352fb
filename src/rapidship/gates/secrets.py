"""Secrets gate: build-time secrets appear in no layer, no config and no history entry.

Needles are the secret values themselves (index URLs with tokens, registry passwords) in every
encoding a build tool writes them, and, for the CA bundle, every certificate that is NOT public:
a Mozilla root as Debian's ca-certificates ships it is no leak; a corporate root CA copied in is,
wherever it lands (the image's own trust store included), as PEM at any line width or as DER.
Every layer is read, deleted files included, so a secret removed later is still found.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rapidship.gates import GateReport, verdict
from rapidship.image import ImageSnapshot, saved_image
from rapidship.redact import secret_forms

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.S)
ENV_SECRETS = ("RAPIDSHIP_REGISTRY_PASSWORD", "RAPIDSHIP_PIP_INDEX_URL", "RAPIDSHIP_CONDA_CHANNELS",
               "RAPIDSHIP_MIRROR_TOKEN")
CHUNK = 1 << 20


@dataclass(frozen=True)
class Needle:
    name: str  # what it is, never the value: reports and logs must not leak it either
    value: bytes
    squeeze: bool = False  # matched with all whitespace removed (base64 bodies, wrapped at any width)


_KEY = re.compile(rb"-----BEGIN ([A-Z ]*PRIVATE KEY)-----\s*(.+?)\s*-----END \1-----", re.S)


def cert_bodies(pem: bytes) -> dict[str, bytes]:
    """Pure: fingerprint -> base64 body (whitespace removed) of each certificate in a PEM bundle."""
    out = {}
    for match in _PEM.finditer(pem):
        body = re.sub(rb"\s+", b"", match.group(1))
        try:
            der = base64.b64decode(body)
        except ValueError:
            continue
        out[hashlib.sha256(der).hexdigest()[:16]] = body
    return out


def ca_needles(bundle: bytes, trusted: bytes) -> list[Needle]:
    """Pure: needles for the bundle's private certs, in every form a build would write them: the
    base64 body at any line width (matched without whitespace) and the DER bytes themselves; and
    any private key the bundle (wrongly) holds."""
    public = cert_bodies(trusted)
    needles = []
    for fp, body in cert_bodies(bundle).items():
        if fp not in public and len(body) >= 200:
            needles.append(Needle(f"CA certificate {fp} from the build's CA bundle", body[128:192], squeeze=True))
            der = base64.b64decode(body)
            needles.append(Needle(f"CA certificate {fp} from the build's CA bundle (DER)", der[96:144]))
    for match in _KEY.finditer(bundle):
        body = re.sub(rb"\s+", b"", match.group(2))
        needles.append(Needle(f"a {match.group(1).decode().lower()} inside the build's CA bundle", body[:64],
                              squeeze=True))
    return needles


def value_needles(values: dict[str, str]) -> list[Needle]:
    """Pure: needles for secret strings in every encoding a build tool writes them
    (rapidship.redact.secret_forms: the value, URL password, token-only user, query values,
    URL-decoded forms, base64 user:password)."""
    return [Needle(f"{name} ({what})" if what else name, form.encode())
            for name, value in values.items() for what, form in secret_forms(value)]


def found_in_stream(stream: IO[bytes], needles: list[Needle]) -> set[str]:
    """Pure over a stream: names of needles present, reading in chunks with overlap. Squeezed
    needles are looked for in the window with its whitespace removed."""
    found: set[str] = set()
    longest = max((len(n.value) for n in needles), default=1)
    overlap = (longest * 2 if any(n.squeeze for n in needles) else longest) - 1  # room for line breaks
    squeezing = any(n.squeeze for n in needles)
    tail = b""
    while chunk := stream.read(CHUNK):
        window = tail + chunk
        squeezed = re.sub(rb"\s+", b"", window) if squeezing else b""
        for n in needles:
            if n.name not in found and n.value in (squeezed if n.squeeze else window):
                found.add(n.name)
        tail = window[-overlap:] if overlap else b""
    return found


# What is public is decided by a known list, never by the image being judged (whose trust store a
# build can put a private CA into): the Mozilla roots exactly as Debian's ca-certificates package
# ships them, not /etc/ssl/certs (which holds each machine's local additions too).
PUBLIC_CA_DIR = "/usr/share/ca-certificates/mozilla"


def public_certs(directory: str | None = None) -> bytes:
    """The public roots (PEM): $RAPIDSHIP_PUBLIC_CA_DIR, else Debian's Mozilla set. b"" when none."""
    folder = Path(directory or os.environ.get("RAPIDSHIP_PUBLIC_CA_DIR") or PUBLIC_CA_DIR)
    return b"".join(p.read_bytes() for p in sorted(folder.glob("*.crt")) if p.is_file()) if folder.is_dir() else b""


def env_secret_values() -> dict[str, str]:
    return {name: os.environ[name] for name in ENV_SECRETS if os.environ.get(name)}


def check_secrets(image: ImageSnapshot, ca_bundle: Path | None, values: dict[str, str],
                  unsearched: list[str] = ()) -> GateReport:
    """`unsearched`: secrets the build used that this run has no value for: each one fails."""
    ref = image.ref
    needles = value_needles(values)
    public = public_certs()
    if ca_bundle and not public:  # without the public list every cert is a needle: say so, fail closed
        unsearched = [*unsearched, f"no list of public CA certificates ({PUBLIC_CA_DIR} or $RAPIDSHIP_PUBLIC_CA_DIR): "
                      "the CA bundle's private certificates cannot be told from public ones; install Debian's "
                      "ca-certificates or point RAPIDSHIP_PUBLIC_CA_DIR at a folder of the public roots (*.crt)"]
    elif ca_bundle:
        needles += ca_needles(ca_bundle.read_bytes(), public)
    if not needles:  # a build with no CA bundle, tokens or credentials has nothing that can leak
        return verdict("secrets", list(unsearched), needles=0,
                       note="the build used no secrets" if not unsearched else "the build's secrets were not given")
    hits: dict[str, list[str]] = {}
    for kind, entry, content in saved_image(ref):
        if content is None:
            continue
        where = "image config" if kind == "config" else f"layer {entry.layer[:12]} {entry.path}"
        for name in found_in_stream(content, needles):
            hits.setdefault(name, []).append(where)
    meta = "\n".join(image.history).encode() + repr(image.config.get("Config", {})).encode()
    squeezed = re.sub(rb"\s+", b"", meta)
    for n in needles:
        if n.value in (squeezed if n.squeeze else meta):
            hits.setdefault(n.name, []).append("history/config")
    reasons = [f"{name} found in {', '.join(sorted(set(places))[:5])}" for name, places in sorted(hits.items())]
    return verdict("secrets", [*unsearched, *reasons], needles=len(needles), needle_names=sorted({n.name for n in needles}))
