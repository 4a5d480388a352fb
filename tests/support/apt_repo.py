"""A Debian security update as a site's own apt repository would serve it: the real package from the
security suite (its bytes checked against the suite's Packages index), in a flat repository (Packages
and Release) that channel_server.serve puts on 127.0.0.1."""

from __future__ import annotations

import hashlib
import lzma
import re
import urllib.request
from dataclasses import dataclass
from pathlib import Path

SECURITY = "http://deb.debian.org/debian-security"


@dataclass(frozen=True)
class Update:
    package: str
    version: str
    filename: str  # in the repository
    stanza: str    # the suite's Packages entry, Filename pointing into the flat repository


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as got:  # noqa: S310 - the Debian archive, as mmdebstrap reads it
        return got.read()


def fetch_update(package: str, arch: str, into: Path, suite: str = "bookworm-security") -> Update:
    """The suite's build of `package` for `arch`, written into `into` (the flat repository's folder)."""
    index = lzma.decompress(_get(f"{SECURITY}/dists/{suite}/main/binary-{arch}/Packages.xz")).decode()
    stanza = next((s for s in index.split("\n\n") if re.search(rf"^Package: {re.escape(package)}$", s, re.M)), None)
    if stanza is None:
        raise LookupError(f"{suite} has no {package} for {arch}")
    field = dict(re.findall(r"^(Version|Filename|SHA256): (.*)$", stanza, re.M))
    data = _get(f"{SECURITY}/{field['Filename']}")
    if hashlib.sha256(data).hexdigest() != field["SHA256"]:
        raise ValueError(f"{field['Filename']} does not match {suite}'s Packages")
    name = Path(field["Filename"]).name
    into.mkdir(parents=True, exist_ok=True)
    (into / name).write_bytes(data)
    return Update(package, field["Version"], name, re.sub(r"^Filename: .*$", f"Filename: ./{name}", stanza, flags=re.M))


def write_index(folder: Path, updates: list[Update]) -> None:
    """Packages and Release of a flat repository (`deb [trusted=yes] URL ./`); the Release carries no
    Date, so the base record keeps the suite's."""
    packages = "\n\n".join(u.stanza.strip() for u in updates) + "\n"
    (folder / "Packages").write_text(packages)
    digest = hashlib.sha256(packages.encode()).hexdigest()
    (folder / "Release").write_text(f"Origin: site\nLabel: site\nSHA256:\n {digest} {len(packages.encode())} Packages\n")
