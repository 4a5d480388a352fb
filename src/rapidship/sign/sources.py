"""Where signed objects are read from and kept: a registry repository, or a folder (workspace, disc).

Folder layout, one directory per signed digest (`sha256-<hex>/`): `manifest.json` (the image's
manifest, byte for byte), `sig.json` and `att.json` (the cosign .sig / .att manifests), `blobs/`
(the image config and every blob the .sig / .att manifests name). A folder source checks every
file against its digest, so a swapped file reads as missing, never as trusted.
"""

from __future__ import annotations

import json
from pathlib import Path

from rapidship.errors import RapidshipError
from rapidship.redact import host_of
from rapidship.publish.oci import Registry
from rapidship.sign import formats as f

SUFFIX_FILES = {"sig": "sig.json", "att": "att.json"}


class RegistrySource:
    def __init__(self, reg: Registry, repo: str) -> None:
        self.reg, self.repo = reg, repo
        # also the signed reference: the host as pushed (split_repository refused credentials there)
        self.where = f"{reg.host}/{repo}"

    def manifest(self, ref: str) -> bytes | None:
        if self.reg.head_manifest(self.repo, ref) is None:
            return None
        return self.reg.get_manifest(self.repo, ref)[0]

    def blob(self, digest: str) -> bytes | None:
        if not digest.startswith("sha256:") or not self.reg.blob_exists(self.repo, digest):
            return None
        return self.reg.get_blob(self.repo, digest)


class DirSource:
    def __init__(self, root: Path, where: str | None = None) -> None:
        self.root = root
        self.where = where or str(root)

    def _read(self, path: Path) -> bytes | None:
        try:
            return path.read_bytes() if path.is_file() and path.stat().st_size < 64 << 20 else None
        except OSError:
            return None

    def manifest(self, ref: str) -> bytes | None:
        if ref.startswith("sha256:"):
            data = self._read(self.root / f.tag_for(ref, "") / "manifest.json")
            return data if data is not None and f.sha256(data) == ref else None
        base, _, suffix = ref.rpartition(".")
        return self._read(self.root / base / SUFFIX_FILES.get(suffix, "-"))

    def blob(self, digest: str) -> bytes | None:
        name = f.tag_for(digest, "")
        for path in sorted(self.root.glob(f"*/blobs/{name}")):
            data = self._read(path)
            if data is not None and f.sha256(data) == digest:
                return data
        return None


def keep(root: Path, digest: str, manifest: bytes, config: bytes | None, artifacts: dict[str, f.Artifact]) -> Path:
    """Write one signed digest's objects under root/sha256-<hex>/ (see the module docstring)."""
    folder = root / f.tag_for(digest, "")
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_bytes(manifest)
    blobs = [b.data for art in artifacts.values() for b in art.blobs] + ([config] if config is not None else [])
    for data in blobs:
        (folder / "blobs" / f.tag_for(f.sha256(data), "")).write_bytes(data)
    for suffix, art in artifacts.items():
        (folder / SUFFIX_FILES[suffix]).write_bytes(art.manifest)
    return folder


def push_artifact(reg: Registry, repo: str, art: f.Artifact, tag: str) -> str:
    """Upload the blobs the registry lacks, then PUT the manifest under `tag`; returns its digest."""
    for blob in art.blobs:
        if not reg.blob_exists(repo, blob.digest):
            reg.upload_blob(repo, blob.data, blob.digest)
    return reg.put_manifest(repo, tag, art.manifest, f.OCI_MANIFEST)


def update_referrers(reg: Registry, repo: str, digest: str, added: list[tuple[f.Artifact, str]]) -> None:
    """OCI 1.1 referrers tag schema (for registries without the referrers API): the index under
    `sha256-<hex>` lists every artifact whose subject is `digest`."""
    tag = f.tag_for(digest, "")
    existing = None
    if reg.head_manifest(repo, tag) is not None:
        try:
            existing = json.loads(reg.get_manifest(repo, tag)[0])
        except ValueError:
            raise RapidshipError(f"{host_of(reg.host)}/{repo}:{tag}", "the referrers index is not JSON",
                                 "delete that tag; sign again rebuilds it") from None
    if isinstance(existing, dict) and isinstance(existing.get("manifests"), list):  # the registry refuses an index
        existing["manifests"] = [m for m in existing["manifests"]  # naming a manifest it lost: keep what it serves
                                 if isinstance(m, dict) and str(m.get("digest", "")).startswith("sha256:")
                                 and reg.head_manifest(repo, m["digest"]) is not None]
    reg.put_manifest(repo, tag, f.referrers_index(existing, added), f.OCI_INDEX)
