"""Generated regions of a markdown page: the text between `<!-- generated: NAME -->` and
`<!-- end generated: NAME -->` belongs to `invoke docs.generate`; the rest is written by hand."""

from __future__ import annotations

import re

from rapidship.errors import ConfigError

BEGIN = "<!-- generated: {} (invoke docs.generate; edit the source, not this) -->"
END = "<!-- end generated: {} -->"


def _span(text: str, page: str, name: str) -> tuple[int, int]:
    begin, end = BEGIN.format(name), END.format(name)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ConfigError(page, f"has no generated region {name!r}",
                          f"put the lines {begin!r} and {end!r} where it goes")
    return start + len(begin), stop


def region(text: str, page: str, name: str) -> str:
    start, stop = _span(text, page, name)
    return text[start:stop].strip("\n")


def splice(text: str, page: str, name: str, body: str) -> str:
    start, stop = _span(text, page, name)
    return f"{text[:start]}\n{body.strip(chr(10))}\n{text[stop:]}"


def names(text: str) -> list[str]:
    return re.findall(r"<!-- generated: (\S+) \(", text)
