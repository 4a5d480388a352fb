"""Secrets gate: build-time secrets appear in no layer, no config and no history entry.

Needles are the secret values themselves (index URLs with tokens, registry passwords) and, for
the CA bundle, every certificate that is NOT public: a cert the image's own trust stores carry
anyway (Debian's ca-certificates, certifi) is no leak, a corporate root CA copied in is.
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
from urllib.parse import urlsplit

from rapidship.gates import GateReport, verdict
from rapidship.image import ImageSnapshot, saved_image

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.S)
TRUST_STORES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                "/certifi/cacert.pem")
ENV_SECRETS = ("RAPIDSHIP_REGISTRY_PASSWORD", "RAPIDSHIP_PIP_INDEX_URL", "RAPIDSHIP_CONDA_CHANNELS",
               "RAPIDSHIP_MIRROR_TOKEN")
CHUNK = 1 << 20


@dataclass(frozen=True)
class Needle:
    name: str  # what it is, never the value: reports and logs must not leak it either
    value: bytes


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
    """Pure: needles for the bundle's private certs. A 64-char slice from inside the body finds the
    cert however the file wraps its lines, as long as one wrapped line holds it (PEM wraps at 64)."""
    public = cert_bodies(trusted)
    needles = []
    for fp, body in cert_bodies(bundle).items():
        if fp not in public and len(body) >= 200:
            needles.append(Needle(f"CA certificate {fp} from the build's CA bundle", body[128:192]))
    return needles


def value_needles(values: dict[str, str]) -> list[Needle]:
    """Pure: needles for secret strings; for URLs also the password/token part alone."""
    needles = []
    for name, value in values.items():
        if not value:
            continue
        for part in value.split():
            needles.append(Needle(name, part.encode()))
            url = urlsplit(part)
            if url.password and len(url.password) >= 6:
                needles.append(Needle(f"{name} (password part)", url.password.encode()))
    return needles


def found_in_stream(stream: IO[bytes], needles: list[Needle]) -> set[str]:
    """Pure over a stream: names of needles present, reading in chunks with overlap."""
    found: set[str] = set()
    overlap = max((len(n.value) for n in needles), default=1) - 1
    tail = b""
    while chunk := stream.read(CHUNK):
        window = tail + chunk
        for n in needles:
            if n.name not in found and n.value in window:
                found.add(n.name)
        tail = window[-overlap:] if overlap else b""
    return found


def is_trust_store(path: str) -> bool:
    return path.endswith(TRUST_STORES)


def trusted_certs(image: ImageSnapshot) -> bytes:
    """The image's own trust stores (kept by the snapshot: take it with keep=is_trust_store)."""
    return b"".join(data for path, data in sorted(image.contents.items()) if is_trust_store(path))


def env_secret_values() -> dict[str, str]:
    return {name: os.environ[name] for name in ENV_SECRETS if os.environ.get(name)}


def check_secrets(image: ImageSnapshot, ca_bundle: Path | None, values: dict[str, str]) -> GateReport:
    ref = image.ref
    needles = value_needles(values)
    if ca_bundle:
        needles += ca_needles(ca_bundle.read_bytes(), trusted_certs(image))
    if not needles:  # a build with no CA bundle, tokens or credentials has nothing that can leak
        return verdict("secrets", [], needles=0, note="the build used no secrets")
    hits: dict[str, list[str]] = {}
    for kind, entry, content in saved_image(ref):
        if content is None:
            continue
        where = "image config" if kind == "config" else f"layer {entry.layer[:12]} {entry.path}"
        for name in found_in_stream(content, needles):
            hits.setdefault(name, []).append(where)
    meta = "\n".join(image.history).encode() + repr(image.config.get("Config", {})).encode()
    for n in needles:
        if n.value in meta:
            hits.setdefault(n.name, []).append("history/config")
    reasons = [f"{name} found in {', '.join(sorted(set(places))[:5])}" for name, places in sorted(hits.items())]
    return verdict("secrets", reasons, needles=len(needles), needle_names=sorted({n.name for n in needles}))
