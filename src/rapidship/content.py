"""Pure: the content manifest of an image's env (path, mode, size, sha256 of every file) and its diff.

Image digests are reproducible (imagebuild/normalise.py); this manifest says what the env holds,
file by file: two builds from one lock must give the same manifest, and the provenance names its
digest. The digest is sha256 over one line per entry, sorted by path, so any tool can redo it:
  file:    "<path>\\t<mode octal>\\t<size>\\t<sha256 hex>\\n"
  symlink: "<path>\\tlink\\t<target>\\n"
"""

from __future__ import annotations

import hashlib

from rapidship.image import ImageSnapshot
from rapidship.records import ContentEntry, ContentRecord

ROOTS = ("/opt/rapids/", "/opt/rapidship/")  # the env and rapidship's runtime files


def entries(image: ImageSnapshot, roots: tuple[str, ...] = ROOTS) -> list[ContentEntry]:
    out = [ContentEntry(path=f.path, mode=f"{f.mode & 0o7777:04o}", size=f.size, sha256=image.digests[f.path])
           for f in image.files if f.is_file and f.path in image.digests and f.path.startswith(roots)]
    out += [ContentEntry(path=path, mode="link", size=0, link=target)
            for path, target in image.links.items() if path.startswith(roots)]
    return sorted(out, key=lambda e: e.path)


def line(e: ContentEntry) -> str:
    if e.mode == "link":
        return f"{e.path}\tlink\t{e.link}\n"
    return f"{e.path}\t{e.mode}\t{e.size}\t{e.sha256}\n"


def digest(files: list[ContentEntry]) -> str:
    h = hashlib.sha256()
    for e in sorted(files, key=lambda e: e.path):
        h.update(line(e).encode("utf-8", "surrogateescape"))
    return "sha256:" + h.hexdigest()


def manifest(image: ImageSnapshot, variant: str, arch: str, image_id: str,
             roots: tuple[str, ...] = ROOTS) -> ContentRecord:
    files = entries(image, roots)
    return ContentRecord(variant=variant, arch=arch, image_id=image_id, roots=list(roots), digest=digest(files),
                         files=len(files), bytes=sum(e.size for e in files), entries=files)


def compare(a: ContentRecord, b: ContentRecord, limit: int = 50) -> list[str]:
    """What differs between two manifests, one line per path (at most `limit`, then a count)."""
    left, right = {e.path: e for e in a.entries}, {e.path: e for e in b.entries}
    problems = []
    for path in sorted(left.keys() | right.keys()):
        x, y = left.get(path), right.get(path)
        if x == y:
            continue
        if x is None or y is None:
            problems.append(f"{path}: only in the {'second' if x is None else 'first'}")
            continue
        changed = [k for k in ("mode", "size", "sha256", "link") if getattr(x, k) != getattr(y, k)]
        problems.append(f"{path}: {', '.join(changed)} differ")
    if len(problems) > limit:
        problems = problems[:limit] + [f"... and {len(problems) - limit} more"]
    return problems
