"""The release scope: which variants x arches a release contains (pure over the collected records).

From the flags when given (`--variant`, `--arch`), else from the release records (`invoke release`
names the arches it ships; a variant without one: its push record, what was pushed is what ships),
else the images built here, else the whole matrix. What is out of scope is listed once with why,
instead of a row of NOT RUN cells per image that was never meant to be built here.
"""

from __future__ import annotations

from rapidship.errors import ConfigError
from rapidship.report.collect import Records
from rapidship.report.model import OutOfScope, Scope

NAMED_BY = {"release records": "no release record names it", "push records": "no push record names it",
            "release and push records": "no release or push record names it"}


def release_scope(records: Records, variants: list[str] | None = None, arches: list[str] | None = None) -> Scope:
    matrix = [(v.id, a.value) for v in records.variants for a in v.arches]
    if variants or arches:
        return _scoped(records, matrix, "flags", _flagged(records, matrix, variants, arches), "not named by --variant / --arch")
    # a variant's release record says what it ships (an earlier push may have named other arches); else its push
    named = {vid: rec.value.arches for vid, rec in _released(records)}
    pushed = {vid: list(rec.value.arches) for vid, v in records.per_variant.items() if (rec := v.push).ok and vid not in named}
    if named or pushed:
        images = [(vid, arch) for vid, arch in matrix if arch in named.get(vid, pushed.get(vid, []))]
        source = "release and push records" if named and pushed else "release records" if named else "push records"
        return _scoped(records, matrix, source, images, NAMED_BY[source])
    built = [key for key in matrix if records.images[key].build.ok]
    if built:
        return _scoped(records, matrix, "build records", built, "not built here (no build record)")
    return Scope("matrix", matrix)


def _flagged(records: Records, matrix, variants, arches) -> list[tuple[str, str]]:
    known = {v.id for v in records.variants}
    for vid in variants or []:
        if vid not in known:
            raise ConfigError("--variant", f"unknown variant {vid!r}", f"use one of: {', '.join(sorted(known))}")
    every_arch = {a for _, a in matrix}
    for arch in arches or []:
        if arch not in every_arch:
            raise ConfigError("--arch", f"{arch!r} is no arch of the matrix", f"use {' or '.join(sorted(every_arch))}")
    picked = [(vid, a) for vid, a in matrix if (not variants or vid in variants) and (not arches or a in arches)]
    if not picked:
        raise ConfigError("--arch", "the variants named have none of these arches", "see invoke matrix for each variant's arches")
    return picked


def _scoped(records: Records, matrix, source: str, images: list[tuple[str, str]], why: str) -> Scope:
    left: dict[str, list[str]] = {}
    for vid, arch in matrix:
        if (vid, arch) not in images:
            left.setdefault(vid, []).append(arch)
    return Scope(source, images, [OutOfScope(vid, arches, why) for vid, arches in left.items()])


def _released(records: Records):
    """(variant, its release record) for each variant `invoke release` ran for here."""
    return [(vid, rec.release) for vid, rec in records.per_variant.items() if rec.release is not None and rec.release.ok]
