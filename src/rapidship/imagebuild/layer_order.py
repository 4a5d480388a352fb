"""The whole image's layers in the order of least re-feed: the base's Debian packages, the env's and
the runtime's own steps, each by its updates a year per byte.

An engine keys a layer by its chain, so a patch of one layer makes a site write again every layer
above it; over a year that costs each layer's updates times the bytes above it, least when layers lie
by updates per byte, the fewest lowest (render/layer_plan.py orders the env's layers so). The env's
paths and the base's never meet, so the env need not lie above the whole base: a glibc security fix
then re-feeds the env's layers only where they change less often per byte than glibc does.

Two layers may trade places only where that leaves every file of the image as it was
(`conflicts`): no path that is not a directory in both, directories with the same header, no
whiteout or opaque folder over the other's paths, no hard link to the other's file. The order
(`order`) takes, bottom up, the layer of fewest updates per byte among those whose conflicting
lower layers are placed (built order breaks ties, so an ordered image orders to itself);
`merged` gives the file system a chain makes, which the normaliser compares for both orders.

Each layer's updates a year (`Rate`, recorded with its source in the image's history):
- a Debian package layer: the uploads its packages' own changelog.Debian.gz files record to the
  release's suites (bookworm, bookworm-security, ...) in the release's first year (RELEASES): any
  later version of the series counts the same, so a security update never moves its layer;
- dpkg's state (var/lib/dpkg/status): every Debian upload of the image, as every one rewrites it;
- an env layer: the plan's releases a year (layers.json);
- the env's records (layers.json, ...): every env patch;
- the runtime's own steps: the project's releases (PROJECT_RELEASES_PER_YEAR).
Pure over member headers and small files' text; the normaliser reads them (imagebuild/normalise.py).
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import posixpath
import re
import tarfile
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from rapidship.imagebuild.base_layers import norm_path
from rapidship.render.layer_plan import ORDER_STEPS

# a Debian release's date: its first year's uploads to its suites are a package's update rate
RELEASES = {"bullseye": date(2021, 8, 14), "bookworm": date(2023, 6, 10), "trixie": date(2025, 8, 9)}
PROJECT_RELEASES_PER_YEAR = 12  # the runtime's own steps change with rapidship's monthly release
NO_CHANGELOG_RATE = 4  # a Debian layer whose packages keep no changelog: a security fix a quarter
ORDER_MARK = "rapidship order: "  # a history entry's comment: its layer's rate and where it is from
_HEAD = re.compile(r"^(\S+) \(([^)]+)\) ([^;]+);", re.M)
_TRAILER = re.compile(r"^ -- .*?>  (.+)$", re.M)
CHANGELOG = re.compile(r"^usr/share/doc/([^/]+)/changelog\.Debian\.gz$")
STATUS = "var/lib/dpkg/status"
COPIED = re.compile(r"/out/layers/(\S+?)/? ")  # a COPY of one planned env layer names it


@dataclass(frozen=True)
class Rate:
    per_year: float
    weight: int    # the bytes it is weighed by: the layer's tar, what a site's engine writes again
    source: str    # where the figure is from, in words
    family: str    # debian, dpkg-state, env, env-records, project

    def to_json(self) -> dict:
        return {"releases_per_year": self.per_year, "weight_bytes": self.weight, "family": self.family,
                "source": self.source}


def comment(rate: Rate) -> str:
    """Pure: a history entry's comment: the layer's rate and its source (nothing of the built order:
    a normalised image normalises to itself)."""
    return ORDER_MARK + json.dumps(rate.to_json(), sort_keys=True)


def read_comment(history_entry: dict) -> dict | None:
    text = history_entry.get("comment") or ""
    return json.loads(text[len(ORDER_MARK):]) if text.startswith(ORDER_MARK) else None


# ---- rates -------------------------------------------------------------------------------------

def debian_uploads(changelog: str, codename: str) -> set[tuple[str, str]]:
    """Pure: a changelog.Debian's (source, version) uploads to `codename`'s suites in its first year."""
    start = RELEASES[codename]
    end = start + timedelta(days=365)
    heads, trailers = list(_HEAD.finditer(changelog)), list(_TRAILER.finditer(changelog))
    found = set()
    for head in heads:
        trailer = next((t for t in trailers if t.start() > head.start()), None)
        if trailer is None or not any(d.split("-")[0] == codename for d in head.group(3).split()):
            continue
        try:
            when = datetime.strptime(" ".join(trailer.group(1).split()[:4]), "%a, %d %b %Y").date()
        except ValueError:
            continue
        if start <= when < end:
            found.add((head.group(1), head.group(2)))
    return found


def codename_of(os_release: str) -> str:
    found = re.search(r"^VERSION_CODENAME=\"?([a-z]+)", os_release, re.M)
    return found.group(1) if found else ""


def changelog_text(data: bytes) -> str:
    return gzip.decompress(data).decode("utf-8", "replace")


# ---- which layers may trade places ---------------------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """One layer as the order sees it: its entries' headers (path -> what the merged view keeps)."""
    label: str
    tar_bytes: int
    entries: dict[str, tuple]   # normalised path -> (type, mode, uid, gid, mtime, size, linkname)
    whiteouts: tuple[str, ...] = ()   # paths a .wh. entry removes from below
    opaque: tuple[str, ...] = ()      # folders a .wh..wh..opq empties below
    links: tuple[str, ...] = ()       # hard links' targets (a file the layer expects below or in itself)


def unit_of(label: str, tar_bytes: int, members: list[tarfile.TarInfo]) -> Unit:
    entries, whiteouts, opaque, links = {}, [], [], []
    for m in members:
        path = norm_path(m.name)
        if not path or path == ".":
            continue
        base = posixpath.basename(path)
        if base == ".wh..wh..opq":
            opaque.append(posixpath.dirname(path))
        elif base.startswith(".wh."):
            whiteouts.append(posixpath.join(posixpath.dirname(path), base[4:]))
        else:
            entries[path] = (m.type, m.mode & 0o7777, m.uid,  # a header may carry the type bits too
                              m.gid, m.mtime, m.size if m.isfile() else 0, m.linkname,
                             tuple(sorted((k, v) for k, v in m.pax_headers.items() if k.startswith("SCHILY.xattr."))))
            if m.islnk():
                links.append(norm_path(m.linkname))
    return Unit(label, tar_bytes, entries, tuple(whiteouts), tuple(opaque), tuple(links))


def _holds(paths: list[str], path: str, strictly: bool = False) -> bool:
    """Whether sorted `paths` hold `path` (unless `strictly`) or anything in it."""
    at = bisect.bisect_left(paths, path)
    if not strictly and at < len(paths) and paths[at] == path:
        return True
    inside = path + "/" if path else ""
    at = bisect.bisect_left(paths, inside)
    return at < len(paths) and paths[at].startswith(inside)


def conflicts(units: list[Unit]) -> set[tuple[int, int]]:
    """Pure: the pairs (lower, upper) of the built order that must keep their order."""
    out: set[tuple[int, int]] = set()
    holders: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        for path in u.entries:
            holders.setdefault(path, []).append(i)
    for path, at in holders.items():
        for a_pos, a in enumerate(at):
            for b in at[a_pos + 1:]:
                ea, eb = units[a].entries[path], units[b].entries[path]
                if not (ea[0] == eb[0] == tarfile.DIRTYPE and ea == eb):
                    out.add((a, b))
    paths = [sorted(u.entries) for u in units]
    for i, u in enumerate(units):
        for j in range(len(units)):
            if i == j or (min(i, j), max(i, j)) in out:
                continue
            hides = any(_holds(paths[j], w) for w in u.whiteouts) or any(_holds(paths[j], f, True) for f in u.opaque)
            linked = any(t in units[j].entries for t in u.links)
            if hides or linked:
                out.add((min(i, j), max(i, j)))
    return out


def key(rate: Rate) -> float:
    """Updates a year per byte in half-octave steps (render/layer_plan.py's), never updated lowest.
    The bytes are the layer's tar (the plan's series bytes leave out the env's bytecode: pure Python
    layers weigh 2.1-2.3x them in the image, which put the CPU image at 1.067x of its best order
    against 1.008x by tar bytes); a patch moves a layer only where its bytes cross a step."""
    if rate.per_year <= 0:
        return -math.inf
    return math.floor(math.log2(rate.per_year / max(rate.weight, 1)) * ORDER_STEPS)


def order(rates: list[Rate], must: set[tuple[int, int]]) -> list[int]:
    """Pure: the built positions bottom up: each time, of the layers whose `must`-lower ones are
    placed, the one of fewest updates per byte (then the built order)."""
    below: dict[int, set[int]] = {i: set() for i in range(len(rates))}
    for a, b in must:
        below[b].add(a)
    placed: list[int] = []
    done: set[int] = set()
    while len(placed) < len(rates):
        ready = [i for i in range(len(rates)) if i not in done and below[i] <= done]
        pick = min(ready, key=lambda i: (key(rates[i]), i))
        placed.append(pick)
        done.add(pick)
    return placed


def merged(units: list[Unit], chain: list[int]) -> dict[str, tuple]:
    """Pure: the file system the layers make in the order `chain`: path -> (header, the unit it is from
    where it is not a directory: a file's bytes are its layer's)."""
    view: dict[str, tuple] = {}
    for i in chain:
        u = units[i]
        if u.whiteouts or u.opaque:
            for path in list(view):
                for g in u.whiteouts:
                    if path == g or path.startswith(g + "/"):
                        view.pop(path, None)
                for f in u.opaque:
                    if path.startswith(f + "/" if f else ""):
                        view.pop(path, None)
        for path, entry in u.entries.items():
            view[path] = (entry, None if entry[0] == tarfile.DIRTYPE else i)
    return view


@dataclass(frozen=True)
class Seen:
    """What the normaliser saw of one layer that its rate depends on."""
    label: str                  # the plan's layer name where a COPY of it made the layer, else the step
    tar_bytes: int
    base: bool = False          # kept byte for byte from the runtime base
    packages: tuple[str, ...] = ()   # Debian packages whose dpkg lists lie in it
    changelogs: tuple[str, ...] = ()  # their changelog.Debian texts
    status: bool = False        # holds dpkg's status
    records: bool = False       # holds the env's records (layers.json)


def rates(seen: list[Seen], codename: str, plan: dict | None) -> list[Rate]:
    """Pure: each layer's updates a year (see above), from what was seen of it, the image's Debian
    release and the env's layer plan (the image's layers.json, or None)."""
    planned = {layer["name"]: layer for layer in (plan or {}).get("layers", [])}
    known = codename in RELEASES
    uploads = [set().union(*(debian_uploads(text, codename) for text in s.changelogs)) if known else set()
               for s in seen]
    every_upload = set().union(*uploads)
    env_total = sum(float(layer.get("releases_per_year") or 0) for layer in planned.values())
    out = []
    for s, mine in zip(seen, uploads):
        if s.status:
            out.append(Rate(len(every_upload), s.tar_bytes, f"dpkg's state: every Debian upload of the image's "
                            f"packages in {codename or 'its release'}'s first year ({len(every_upload)})", "dpkg-state"))
        elif s.records and planned:
            out.append(Rate(env_total, s.tar_bytes, "the env's records: every env layer's releases a year",
                            "env-records"))
        elif s.label in planned:
            layer = planned[s.label]
            out.append(Rate(float(layer.get("releases_per_year") or 0), s.tar_bytes,
                            "the layer plan (layers.json): its distributions' releases a year", "env"))
        elif s.changelogs and known:
            out.append(Rate(len(mine), s.tar_bytes, f"changelog.Debian of {', '.join(s.packages) or 'its packages'}: "
                            f"{len(mine)} upload(s) to {codename} from {RELEASES[codename]} for a year", "debian"))
        elif s.packages or s.base:
            why = f"no release date known for {codename!r}" if s.changelogs else "no changelog.Debian in the layer"
            out.append(Rate(NO_CHANGELOG_RATE, s.tar_bytes, f"{why}: a security fix a quarter", "debian"))
        else:
            out.append(Rate(PROJECT_RELEASES_PER_YEAR, s.tar_bytes, "the runtime's own step: rapidship's monthly "
                            "release", "project"))
    return out
