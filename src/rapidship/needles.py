"""Secret needles: what the secrets gate looks for, in every form a build writes a secret.

Needles are the secret values themselves (index URLs with tokens, registry passwords) in every
encoding a build tool writes them, and, for the CA bundle, every certificate that is NOT public:
a Mozilla root as Debian's ca-certificates ships it is no leak; a corporate root CA copied in is,
wherever it lands (the image's own trust store included), as PEM at any line width or as DER.
They are looked for in each file's bytes as they stream by: by the secrets gate (gates/secrets.py)
reading an image, and by the normaliser as it writes each layer (its layer facts keep what it
found, under a keyed fingerprint of the needles: never the values).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets as random
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rapidship.redact import secret_forms

WHITESPACE = b" \t\n\r\x0b\x0c"  # what rb"\s" matches, deleted by bytes.translate (no regex per chunk)


def squeeze(data: bytes) -> bytes:
    """Pure: `data` with its whitespace removed (a base64 body at any line width, in one piece)."""
    return data.translate(None, WHITESPACE)


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
        body = squeeze(match.group(1))
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
        body = squeeze(match.group(2))
        needles.append(Needle(f"a {match.group(1).decode().lower()} inside the build's CA bundle", body[:64],
                              squeeze=True))
    return needles


def value_needles(values: dict[str, str]) -> list[Needle]:
    """Pure: needles for secret strings in every encoding a build tool writes them
    (rapidship.redact.secret_forms: the value, URL password, token-only user, query values,
    URL-decoded forms, base64 user:password)."""
    return [Needle(f"{name} ({what})" if what else name, form.encode())
            for name, value in values.items() for what, form in secret_forms(value)]


class Search:
    """Needles looked for in one file's bytes fed in chunks, with an overlap between chunks.
    Squeezed needles are looked for in the window with its whitespace removed."""

    def __init__(self, needles: list[Needle]) -> None:
        self.needles, self.found, self.tail = needles, set(), b""
        longest = max((len(n.value) for n in needles), default=1)
        self.squeezing = any(n.squeeze for n in needles)
        self.overlap = (longest * 2 if self.squeezing else longest) - 1  # room for line breaks

    def feed(self, chunk: bytes) -> None:
        window = self.tail + chunk
        squeezed = squeeze(window) if self.squeezing else b""
        for n in self.needles:
            if n.name not in self.found and n.value in (squeezed if n.squeeze else window):
                self.found.add(n.name)
        self.tail = window[-self.overlap:] if self.overlap else b""


def found_in_stream(stream: IO[bytes], needles: list[Needle]) -> set[str]:
    """Pure over a stream: names of needles present, reading in chunks."""
    search = Search(needles)
    while chunk := stream.read(CHUNK):
        search.feed(chunk)
    return search.found


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


def secret_values(pip_index: str | None, conda_channels: tuple[str, ...] | list[str] = ()) -> dict[str, str]:
    """The secret strings a build had: the env's credentials, its index URL and channel URLs."""
    values = env_secret_values()
    if pip_index:
        values["pip index URL"] = pip_index
    if conda_channels:
        values["conda channel URLs"] = " ".join(conda_channels)
    return values


NO_PUBLIC_LIST = (f"no list of public CA certificates ({PUBLIC_CA_DIR} or $RAPIDSHIP_PUBLIC_CA_DIR): the CA bundle's "
                  "private certificates cannot be told from public ones; install Debian's ca-certificates or point "
                  "RAPIDSHIP_PUBLIC_CA_DIR at a folder of the public roots (*.crt)")


def needles_of(ca_bundle: Path | None, values: dict[str, str]) -> tuple[list[Needle], list[str]]:
    """The needles for a build's secrets, and what cannot be looked for (fail closed: each one a reason)."""
    needles, cannot = value_needles(values), []
    public = public_certs()
    if ca_bundle and not public:  # without the public list every cert is a needle: say so
        cannot.append(NO_PUBLIC_LIST)
    elif ca_bundle:
        needles += ca_needles(ca_bundle.read_bytes(), public)
    return needles, cannot


def fingerprint(needles: list[Needle], key_file: Path) -> str:
    """A keyed digest of the needles (HMAC with this workspace's own random key, made 0600 on first
    use): equal needles give equal fingerprints, and a facts file never lets anyone test a guess of
    a low-entropy password offline. '' when there are no needles."""
    if not needles:
        return ""
    if not key_file.is_file():
        key_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(random.token_bytes(32))
    mac = hmac.new(key_file.read_bytes(), digestmod=hashlib.sha256)
    for n in sorted(needles, key=lambda n: (n.name, n.value, n.squeeze)):
        mac.update(f"{len(n.name)}:{n.name}:{int(n.squeeze)}:{len(n.value)}:".encode() + n.value)
    return "hmac-sha256:" + mac.hexdigest()
