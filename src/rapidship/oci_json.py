"""Pure: one strict reader for the JSON that decides what an image is (manifests, indexes, configs,
docker-archive manifest.json, signature payloads), read the way its consumers will read it.

Go's encoding/json (docker, containerd, skopeo, the registry) matches object keys case-insensitively
and lets the last of two equal keys win; Python's json keeps the last of two equal keys and tells
case apart. So `{"digest": A, "Digest": B}` is A to one reader and B to another. Every such
document goes through `parse`: a key given twice, two keys that differ only in case, or (for
manifests and indexes) a field the OCI / Docker schema does not have is refused, never resolved.
"""

from __future__ import annotations

import json
from typing import Any


class Ambiguous(ValueError):
    """JSON that two readers could take for two different documents."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, str] = {}
    for key, _ in pairs:
        folded = key.casefold()
        if folded in seen:
            same = seen[folded] == key
            raise Ambiguous(f"key {key!r} given twice" if same else f"keys {seen[folded]!r} and {key!r} differ only in case")
        seen[folded] = key
    return dict(pairs)


def parse(data: bytes | str | None) -> Any:
    """JSON with no repeated or case-folding keys at any depth; raises Ambiguous (a ValueError)."""
    if data is None:
        raise Ambiguous("no document")
    try:
        return json.loads(data, object_pairs_hook=unique_keys)
    except Ambiguous:
        raise
    except (ValueError, UnicodeDecodeError) as err:
        raise Ambiguous(f"not JSON ({err})") from None


def parse_or_none(data: bytes | str | None) -> Any:
    try:
        return parse(data)
    except Ambiguous:
        return None


# The fields the image-spec (manifest.md, image-index.md, descriptor.md) and Docker's manifest v2
# schema 2 define; anything else is refused in what we sign, verify, promote or import.
_DESCRIPTOR = {"mediaType", "digest", "size", "urls", "annotations", "data", "artifactType", "platform"}
_PLATFORM = {"architecture", "os", "os.version", "os.features", "variant", "features"}
_MANIFEST = {"schemaVersion", "mediaType", "artifactType", "config", "layers", "subject", "annotations"}
_INDEX = {"schemaVersion", "mediaType", "artifactType", "manifests", "subject", "annotations"}
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")


def is_index(doc: dict) -> bool:
    return doc.get("mediaType") in INDEX_TYPES or "manifests" in doc


def parse_manifest(data: bytes | None) -> dict:
    """An image manifest or an index, strictly: Ambiguous names the first field that is not as the
    spec has it (a missing or unknown field, a digest that is not sha256:<64 hex>)."""
    doc = parse(data)
    if not isinstance(doc, dict):
        raise Ambiguous("not a JSON object")
    if doc.get("schemaVersion") != 2:
        raise Ambiguous(f"schemaVersion {doc.get('schemaVersion')!r} is not 2")
    if is_index(doc):
        _fields(doc, _INDEX, "index")
        for i, child in enumerate(_descriptors(doc, "manifests")):
            if "platform" in child:
                if not isinstance(child["platform"], dict):
                    raise Ambiguous(f"manifests[{i}].platform is not an object")
                _fields(child["platform"], _PLATFORM, f"manifests[{i}].platform")
    else:
        _fields(doc, _MANIFEST, "manifest")
        _descriptor(doc.get("config"), "config")
        _descriptors(doc, "layers")
    if "subject" in doc:
        _descriptor(doc["subject"], "subject")
    return doc


def _descriptors(doc: dict, key: str) -> list:
    """doc[key] as a list of descriptors, each checked (`manifests` of an index, `layers`)."""
    items = doc.get(key)
    if not isinstance(items, list):
        raise Ambiguous(f"{key} is not a list")
    for i, item in enumerate(items):
        _descriptor(item, f"{key}[{i}]")
    return items


def _fields(doc: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise Ambiguous(f"{where} has field(s) the spec does not define: {', '.join(unknown)}")


def _descriptor(desc: Any, where: str) -> None:
    if not isinstance(desc, dict):
        raise Ambiguous(f"{where} is not a descriptor")
    _fields(desc, _DESCRIPTOR, where)
    digest = desc.get("digest")
    if not (isinstance(digest, str) and digest.startswith("sha256:") and len(digest) == 71
            and all(c in "0123456789abcdef" for c in digest[7:])):
        raise Ambiguous(f"{where}.digest {str(digest)[:80]!r} is not sha256:<64 hex>")
    if not isinstance(desc.get("size"), int) or isinstance(desc.get("size"), bool) or desc["size"] < 0:
        raise Ambiguous(f"{where}.size is not a size")
    if not isinstance(desc.get("mediaType"), str):
        raise Ambiguous(f"{where}.mediaType is missing")
