"""What the engine built, made reproducible: the same lock, base and source give the same image id.

BuildKit 0.8 (in dockerd 20.10) stamps the build's clock into every layer (file and directory
mtimes) and into the config (`created`, each history entry). `normalise` rewrites the image from
its docker-archive, whatever engine made it, and loads the result under the same name:
  layers of the runtime base: kept byte for byte (an input, named by the base's id);
  every other layer: its entries in path order, every mtime LAYER_MTIME, numeric owners and modes
    as built, user and group names, atime, ctime and every pax record but extended attributes
    (file capabilities) dropped; hard links point at the first of their names in the new order,
    which then carries the data;
  a layer that installed Debian packages (the runtime's apt-get step): split by package as the
    base is (base_layers.py), so a Debian update re-ships the packages it changed, not the step;
  the config: `created` and every history time SOURCE_DATE_EPOCH (the commit's time: the release's
    date, in the labels too), rootfs.diff_ids the new layers', BuildKit's own extras dropped;
  the order: every layer (the base's too) by its updates a year per byte (layer_order.py), where
    that leaves every file as it was; each history entry moves with its layer and says its rate.
A layer's bytes so depend on its content alone. Clamping times to the epoch (what newer BuildKits
do) was tried first and is not enough: a layer BuildKit takes from its cache keeps the times of the
build that made it, and files COPY'd from a checkout carry the clone's time, both before the epoch
(seen making two builds of one commit differ); and a layer whose files did not change would still
change with every commit, so no delta disc could leave it out. LAYER_MTIME is 2000-01-01: after
1980, below which zip (wheels, make_archive) cannot go in any time zone. Bytecode never depends on
it: every .pyc of the image is an unchecked-hash one (templates).
As each layer's bytes pass, the normaliser notes what the gates need of them (layerfacts.py: its
members, the env's file hashes, the secret needles found) and counts their zstd size (no second
`docker save`). It keeps what it made of each built layer (by its diff_id, its step and this
code's own digest): a rebuild whose layer the engine still holds under the same chain, with its
facts kept, names it in the loader's manifest without writing it (the loader takes it from its
store by chain ID), so a patch rewrites the layers from the changed one up, not the image.
The image id (the config's digest) is what gates, push, signatures and discs then name. A
normalised image normalises to itself. What still differs inside files is fixed where it is made
(templates: ldconfig's aux-cache, the user's password-change day); `reproduce` names it when not.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Callable, Iterator

from rapidship import layerfacts
from rapidship.content import ROOTS
from rapidship.engine import ENGINE
from rapidship.errors import ConfigError, RapidshipError
from rapidship.needles import Needle, Search
from rapidship.image import chain_ids, images
from rapidship.imagebuild import base_layers, layer_order
from rapidship.imagebuild.base_layers import RUNTIME_BUDGET, dpkg_lists, plan_base_layers
from rapidship.records import Record, RecordError, load, save

BLOCK = tarfile.BLOCKSIZE
ENGINE_EXTRAS = ("moby.buildkit.buildinfo.v1", "moby.buildkit.cache.v0")  # config keys only BuildKit writes
EPOCH_LABEL = "io.rapidship.source-date-epoch"
LAYER_MTIME = 946684800  # 2000-01-01T00:00:00Z: every file's time in a rebuilt layer
SPLIT_MARK = " # rapidship: by package: "  # a history entry's mark: this layer is one part of a split one


# ---- the epoch ---------------------------------------------------------------------------------

def source_date_epoch(source: Path, env: dict[str, str] | None = None) -> int:
    """SOURCE_DATE_EPOCH when set (the reproducible-builds convention), else the commit time of
    the checkout's HEAD: one number for every build of one commit, on any machine."""
    env = os.environ if env is None else env
    given = env.get("SOURCE_DATE_EPOCH", "").strip()
    if given:
        if not given.isdigit():
            raise ConfigError("SOURCE_DATE_EPOCH", f"{given!r} is not a whole number of seconds",
                              "unset it (the commit time is used) or export SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)")
        return int(given)
    got = subprocess.run(["git", "-C", str(source), "log", "-1", "--format=%ct"], capture_output=True, text=True,
                         check=False)
    if got.returncode != 0 or not got.stdout.strip().isdigit():
        raise ConfigError("SOURCE_DATE_EPOCH", f"unset, and {source} is not a git checkout with a commit",
                          "build from a git checkout, or export SOURCE_DATE_EPOCH (seconds since 1970, UTC)")
    return int(got.stdout.strip())


def created_label(epoch: int) -> str:
    """The epoch as `org.opencontainers.image.created` spells it (sign/release.py orders these)."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat()


def rfc3339(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- one layer (pure over an open tar) ---------------------------------------------------------

def order_key(name: str) -> tuple[str, ...]:
    """Path order: by component, so a directory comes right before what it holds."""
    return tuple(p for p in name.strip("/").split("/") if p not in ("", "."))


@dataclass(frozen=True)
class Entry:
    header: bytes               # the member's header block(s), as written
    source: tarfile.TarInfo | None  # where its data comes from (None: no data)
    info: tarfile.TarInfo | None = None  # the member as written (what layer facts note)


def plan_layer(members: list[tarfile.TarInfo]) -> list[Entry]:
    """The normalised members of one layer, in order, each with the header it gets."""
    by_name = {m.name: m for m in members}

    def holder_of(name: str) -> str:  # a hard link's chain followed to the member holding the data
        seen = set()
        while by_name[name].islnk() and by_name[name].linkname in by_name and name not in seen:
            seen.add(name)
            name = by_name[name].linkname
        return name

    groups: dict[str, list[str]] = {}
    for m in members:
        if m.islnk() and m.linkname in by_name:
            data = holder_of(m.name)
            groups.setdefault(data, [data]).append(m.name)
    first = {name: min(names, key=order_key) for names in groups.values() for name in names}
    data_of = {name: data for data, names in groups.items() for name in names}
    entries = []
    for m in sorted(members, key=lambda m: order_key(m.name)):
        holder = first.get(m.name)
        if holder is None:  # not linked, or linked to a file of a lower layer: as it is
            entries.append(_entry(m, m.name, m if m.isfile() else None))
        elif holder == m.name:  # the first name of a linked group carries the data
            data = by_name[data_of[m.name]]
            entries.append(_entry(data, m.name, data if data.isfile() else None))
        else:
            link = tarfile.TarInfo(m.name)
            link.type, link.linkname, link.mode, link.uid, link.gid, link.mtime = (
                tarfile.LNKTYPE, holder, m.mode, m.uid, m.gid, m.mtime)
            entries.append(_entry(link, m.name, None))
    return entries


def _entry(m: tarfile.TarInfo, name: str, source: tarfile.TarInfo | None) -> Entry:
    info = _normal_info(m, name)
    return Entry(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"), source, info)


def _normal_info(m: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    """`m` under `name`: numeric owners and mode as built, LAYER_MTIME, no names or other
    times, only the extended attributes of its pax records."""
    info = tarfile.TarInfo(name[2:] if name.startswith("./") else name.lstrip("/"))
    info.type, info.linkname = m.type, m.linkname
    info.mode, info.uid, info.gid = m.mode, m.uid, m.gid
    info.uname = info.gname = ""
    info.mtime = LAYER_MTIME
    info.devmajor, info.devminor = m.devmajor, m.devminor
    info.size = m.size if m.isfile() else 0
    info.pax_headers = {k: v for k, v in sorted(m.pax_headers.items()) if k.startswith("SCHILY.xattr.")}
    return info


def layer_size(entries: list[Entry]) -> int:
    return sum(len(e.header) + _padded(e.source.size if e.source else 0) for e in entries) + 2 * BLOCK


def _padded(n: int) -> int:
    return n + (-n % BLOCK)


@dataclass
class Noting:
    """A layer's facts as it is written: its members (the data of files under content.ROOTS hashed
    from the same bytes) and the secret needles found in its files."""

    needles: list[Needle]
    members: list = field(default_factory=list)
    found: list[tuple[str, str]] = field(default_factory=list)


def write_layer(tar: tarfile.TarFile, entries: list[Entry], out: IO[bytes],
                on_bytes: Callable[[int], None] = lambda _: None, noted: Noting | None = None) -> str:
    """Write the planned layer; returns its diff_id (sha256 of the bytes written). `noted`, when
    given, gets the layer's facts from the bytes as they are written."""
    digest = hashlib.sha256()

    def put(data: bytes | memoryview) -> None:
        digest.update(data)
        out.write(data)

    for e in entries:
        put(e.header)
        noting = noted is not None and e.info is not None and e.source is not None
        path = layerfacts.path_of(e.info.name) if e.info is not None else ""
        own = hashlib.sha256() if noting and layerfacts.hashed(path, ROOTS) else None
        search = Search(noted.needles) if noting and noted is not None and noted.needles else None
        if e.source is not None:
            stream = tar.extractfile(e.source)
            assert stream is not None
            left = e.source.size
            while left:
                chunk = stream.read(min(left, 1 << 20))
                if not chunk:
                    raise RapidshipError("normalise", f"layer member {e.source.name} ends early", "rebuild the image")
                put(chunk)
                if own is not None:
                    own.update(chunk)
                if search is not None:
                    search.feed(chunk)
                left -= len(chunk)
                on_bytes(len(chunk))
            put(bytes(-e.source.size % BLOCK))
        if noted is not None and e.info is not None:
            noted.members.append(layerfacts.member(e.info, own.hexdigest() if own is not None else ""))
        if search is not None and noted is not None:
            noted.found += [(name, path) for name in sorted(search.found)]
    put(bytes(2 * BLOCK))
    return "sha256:" + digest.hexdigest()


# ---- the config (pure) ---------------------------------------------------------------------------

def normal_config(config: dict, diff_ids: list[str], epoch: int, parts_of: dict[int, list[str]] | None = None,
                  chain: list[int] | None = None, comments: list[str] | None = None) -> bytes:
    """Pure: the config with its times the epoch and `diff_ids`; a layer split by package
    (`parts_of`: its index among the layers -> its parts' names) gets one history entry per part.
    With `chain` (the built layers' positions bottom up, layer_order.py), the layers' entries move
    with them, each keeping the empty ones that followed it, each with its `comments` entry."""
    doc = {k: v for k, v in config.items() if k not in ENGINE_EXTRAS}
    doc["created"] = rfc3339(epoch)
    head: list[dict] = []
    blocks: list[list[dict]] = []
    index = 0
    for h in config.get("history") or []:
        h = {**h, "created": rfc3339(epoch)} if "created" in h else h
        if h.get("empty_layer"):
            (blocks[-1] if blocks else head).append(h)
            continue
        parts = (parts_of or {}).get(index, [""])
        blocks += [[{**h, "created_by": f"{h.get('created_by', '')}{SPLIT_MARK}{part}"} if part else h] for part in parts]
        index += 1
    for n, block in enumerate(blocks):
        if comments is not None and n < len(comments):
            block[0] = {**block[0], "comment": comments[n]}
    doc["history"] = head + [h for n in (chain if chain is not None else range(len(blocks))) for h in blocks[n]]
    doc["rootfs"] = {"type": "layers", "diff_ids": list(diff_ids)}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def layer_steps(config: dict) -> list[str]:
    """Pure: the history's `created_by` of each layer, in the layers' order (empty layers left out)."""
    return [h.get("created_by", "") for h in config.get("history") or [] if not h.get("empty_layer")]


def splits(created_by: str) -> bool:
    """Pure: whether a built layer is one that installed Debian packages (split by package), and
    not already a part of one (so a normalised image normalises to itself)."""
    return "apt-get install" in created_by and SPLIT_MARK not in created_by


def split_by_package(layer: tarfile.TarFile, members: list[tarfile.TarInfo]) -> list[tuple[str, list[tarfile.TarInfo]]] | None:
    """The parts of a layer that installed Debian packages, as the base is split (base_layers), or
    None: no package lists in it, or one part only. A folder the step made is opaque (it hides the
    layers below): its mark goes into the lowest part, so the parts above still show through."""
    lists = dpkg_lists(layer, members)
    opaque = [m for m in members if os.path.basename(m.name) == ".wh..wh..opq"]
    parts = plan_base_layers([m for m in members if m not in opaque], lists, RUNTIME_BUDGET) if lists else []
    if len(parts) < 2:
        return None
    def path(m: tarfile.TarInfo) -> str:
        return "/".join(order_key(m.name))

    by_name = {path(m): m for m in members}
    folders = {"/".join(order_key(m.name)[:n]) for m in opaque for n in range(1, len(order_key(m.name)))}
    lowest = {path(m): m for m in [*parts[0].members, *opaque]} | {name: by_name[name] for name in folders if name in by_name}
    return [(parts[0].name, list(lowest.values()))] + [(p.name, list(p.members)) for p in parts[1:]]


# ---- the image (edge: docker save -> rewrite -> docker load) ------------------------------------

@dataclass(frozen=True)
class Normalised:
    ref: str
    image_id: str
    before_id: str
    epoch: int
    kept_layers: int       # the base's, byte for byte
    rewritten_layers: int
    zstd_bytes: int = 0    # each layer through zstd -3 (+ config and manifest): what the image costs on a disc
    reused_layers: int = 0  # built layers this normaliser had made before, left to the engine's store


def _member_header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    return info.tobuf(tarfile.PAX_FORMAT)


def save_to(ref: str, into: Path, what: str = "normalise") -> Path:
    """`docker save` of `ref` into the folder `into` (its saved.tar); `what` names the step in an error."""
    path = into / "saved.tar"
    got = ENGINE.run_cli(["save", "-o", str(path), ref])
    if got.returncode != 0:
        raise RapidshipError(f"{what} {ref}", f"docker save failed: {got.stderr.strip()[-300:]}",
                             "check the engine (docker info) and the disk space of $TMPDIR")
    return path


def layer_member(outer: tarfile.TarFile, name: str) -> tarfile.TarInfo:
    member = outer.getmember(name)
    hops = 0
    while member.issym() and hops < 8:  # docker save links a repeated layer to its first copy
        name = os.path.normpath(os.path.join(os.path.dirname(name), member.linkname))
        member, hops = outer.getmember(name), hops + 1
    return member


class Made(Record):
    """build/layers/from-<key>.json: what this normaliser made of one built layer (the key: the
    normaliser's own code, the layer's diff_id and its step): the layers it became, their parts'
    names where it was split by package, and each one's zstd bytes."""

    ids: list[str]
    parts: list[str] | None = None
    zstd: list[int]


# the normaliser's own code: a change to how layers are written makes every earlier record unused
NORMALISER = hashlib.sha256(Path(__file__).read_bytes() + Path(base_layers.__file__).read_bytes()).hexdigest()


@dataclass(frozen=True)
class Note:
    """Where each layer's facts go (layerfacts.py; `root`: the workspace, where the records of
    layers made before are kept too), and the secret needles its files are searched for as they
    pass (`fingerprint`: their keyed digest, kept with the facts)."""

    root: Path
    needles: tuple[Needle, ...] = ()
    fingerprint: str = ""

    def keep(self, facts: layerfacts.LayerFacts) -> None:
        layerfacts.keep(self.root, facts)

    def facts(self, diff_id: str, noted: Noting) -> layerfacts.LayerFacts:
        return layerfacts.LayerFacts(diff_id=diff_id, roots=list(ROOTS), members=noted.members,
                                     needles=self.fingerprint, found=noted.found)

    def has_facts(self, ids: list[str]) -> bool:
        """Facts for these needles: a layer left to the store must not send the gates to read it."""
        return all(_facts_for(layerfacts.facts_path(self.root, i), self.fingerprint) for i in ids)

    def _made_path(self, diff_id: str, step: str, kept: bool) -> Path:
        key = hashlib.sha256(f"{NORMALISER}\n{diff_id}\n{int(kept)}\n{step}".encode()).hexdigest()
        return self.root / "layers" / f"from-{key}.json"

    def made(self, diff_id: str, step: str, kept: bool) -> Made | None:
        path = self._made_path(diff_id, step, kept)
        try:
            return load(path, Made, "invoke build", "normaliser record") if path.is_file() else None
        except RecordError:
            return None  # unreadable: the layer is written again, as if never made

    def remember(self, diff_id: str, step: str, kept: bool, made: Made) -> None:
        save(self._made_path(diff_id, step, kept), made)


def _facts_for(path: Path, fingerprint: str) -> bool:
    if not path.is_file():
        return False
    if not fingerprint:
        return True
    with open(path, "rb") as fh:  # the fingerprint sits near the end: no need to parse the members
        fh.seek(max(0, path.stat().st_size - 65536))
        return fingerprint.encode() in fh.read()


def normalise(ref: str, base_ref: str, epoch: int, on_bytes: Callable[[int], None] = lambda _: None,
              workdir: Path | None = None, note: Note | None = None) -> Normalised:
    """Rewrite `ref` in the engine as described above; the base's layers stay as they are. `note`
    gets each layer's facts (layerfacts.py) from the bytes as they are written."""
    before = ENGINE.inspect(ref)["Id"]
    base = ENGINE.try_inspect(base_ref) or {}
    base_layers = list((base.get("RootFS") or {}).get("Layers") or [])
    with tempfile.TemporaryDirectory(prefix="rapidship-normalise-", dir=workdir) as tmp:
        with tarfile.open(save_to(ref, Path(tmp))) as outer:
            manifest = json.load(outer.extractfile("manifest.json"))[0]  # type: ignore[arg-type]
            config = json.load(outer.extractfile(manifest["Config"]))  # type: ignore[arg-type]
            old_ids = list(config["rootfs"]["diff_ids"])
            base = frozenset(base_layers) & frozenset(old_ids)
            held = frozenset(c for layers in images().values() for c in chain_ids(layers)) if note else frozenset()
            loader = ENGINE.load()
            assert loader.stdin is not None
            image_id, zstd_bytes, reused = "", 0, 0
            try:
                image_id, zstd_bytes, reused = _write_archive(outer, manifest, old_ids, base, config, ref, epoch,
                                                              loader.stdin, on_bytes, note, held)
                loader.stdin.close()
            except BrokenPipeError:  # docker load stopped reading: its own words follow
                pass
            said = (loader.stdout.read() if loader.stdout else b"").decode(errors="replace")
            if loader.wait() != 0:
                raise RapidshipError(f"normalise {ref}", f"docker load refused the normalised image: {said.strip()[-300:]}",
                                     "report this with the build log; the built image is left as it was")
    after = ENGINE.inspect(ref)["Id"]
    if after != image_id:
        raise RapidshipError(f"normalise {ref}", f"the engine holds {after[:19]} under this name, not the "
                             f"normalised {image_id[:19]}", "rebuild; another run may have reused the name")
    if before != after:
        ENGINE.run_cli(["rmi", before])  # the unnormalised image, if nothing else names it (else refused: fine)
    kept = sum(i in base for i in old_ids)
    return Normalised(ref, after, before, epoch, kept, len(old_ids) - kept - reused, zstd_bytes, reused)


class ZstdCount:
    """A `zstd -3` whose output is only counted: the disc cost of a layer's bytes as they pass by,
    with no second `docker save` of the image to learn it."""

    def __init__(self, level: int = 3) -> None:
        self.proc = subprocess.Popen(["zstd", "-T0", f"-{level}", "-q", "-c"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        self.total = 0
        self.reader = threading.Thread(target=self._count, daemon=True)
        self.reader.start()

    def _count(self) -> None:
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read(1 << 20):
            self.total += len(chunk)

    def write(self, data: bytes | memoryview) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.reader.join()
        if self.proc.wait() != 0:
            raise RapidshipError("normalise", "zstd failed on the normalised archive", "check that zstd is installed")
        return self.total


class Tee:
    """Writes go to docker load's stdin and to a layer's zstd counter."""

    def __init__(self, out: IO[bytes], also: ZstdCount) -> None:
        self.out, self.also = out, also

    def write(self, data: bytes | memoryview) -> None:
        self.out.write(data)
        self.also.write(data)

    def flush(self) -> None:
        self.out.flush()


@dataclass
class _Part:
    """One layer of the normalised image before it is written: a built layer, or a part of one."""
    index: int                  # the built layer it is (of), in the saved archive
    part: int                   # its part (0 where the layer is not split)
    label: str                  # the part's name where split
    member: tarfile.TarInfo     # the built layer in the saved archive
    base: bool                  # a base layer: kept byte for byte
    entries: list[Entry] | None  # what is written (None: the base's bytes as they are)
    unit: layer_order.Unit
    seen: layer_order.Seen


def _survey(outer: tarfile.TarFile, manifest: dict, old_ids: list[str], base: frozenset[str],
            steps: list[str]) -> tuple[list[_Part], str, dict | None]:
    """Every layer the image will have, in the built order, with what its order needs (member
    headers, changelogs), the image's Debian release and the env's layer plan (its layers.json)."""
    out, codename, plan = [], "", None
    for i, layer_name in enumerate(manifest["Layers"]):
        step = steps[i] if i < len(steps) else ""
        member, kept = layer_member(outer, layer_name), old_ids[i] in base
        with tarfile.open(fileobj=outer.extractfile(member)) as layer:
            members = layer.getmembers()
            parts = None if kept or not splits(step) else split_by_package(layer, members)
            for k, (label, held) in enumerate(parts or [("", members)]):
                entries = None if kept else plan_layer(held)
                written = held if entries is None else [e.info for e in entries if e.info is not None]
                size = member.size if entries is None else layer_size(entries)
                texts, packages = [], []
                for m in held:
                    path = base_layers.norm_path(m.name)
                    if (listed := base_layers.DPKG_LIST.match(path)) and m.isfile():
                        packages.append(listed.group(1))
                    small = path == "opt/rapidship/layers.json" or path.endswith("os-release") \
                        or layer_order.CHANGELOG.match(path)
                    if not (small and m.isfile()):
                        continue
                    data = (layer.extractfile(m) or io.BytesIO()).read()
                    if path == "opt/rapidship/layers.json":
                        plan = json.loads(data)
                    elif path.endswith("os-release"):
                        codename = layer_order.codename_of(data.decode(errors="replace")) or codename
                    else:
                        texts.append(layer_order.changelog_text(data))
                copied = layer_order.COPIED.search(step)
                seen = layer_order.Seen(copied.group(1) if copied else step, size, kept, tuple(sorted(packages)),
                                        tuple(texts), any(base_layers.norm_path(m.name) == layer_order.STATUS for m in held),
                                        any(base_layers.norm_path(m.name) == "opt/rapidship/layers.json" for m in held))
                out.append(_Part(i, k, label, member, kept, entries, layer_order.unit_of(label or step, size, written), seen))
    return out, codename, plan


def order_parts(parts: list[_Part], codename: str, plan: dict | None) -> tuple[list[int], list[layer_order.Rate]]:
    """The order the image's layers are written in (layer_order.py), checked: the chain must make
    the file system the built order makes, file for file."""
    units = [p.unit for p in parts]
    rates = layer_order.rates([p.seen for p in parts], codename, plan)
    chain = layer_order.order(rates, layer_order.conflicts(units))
    if layer_order.merged(units, chain) != layer_order.merged(units, list(range(len(units)))):
        raise RapidshipError("normalise", "reordering the layers would change the image's files",
                             "report this with the build log; the built image is left as it was")
    return chain, rates


def _write_archive(outer: tarfile.TarFile, manifest: dict, old_ids: list[str], base: frozenset[str], config: dict,
                   ref: str, epoch: int, out: IO[bytes], on_bytes: Callable[[int], None], note: Note | None = None,
                   held: frozenset[str] = frozenset()) -> tuple[str, int, int]:
    """Stream a docker-archive of the normalised image into `out` (docker load's stdin), its layers in
    the order of least re-feed (order_parts). A layer this normaliser already made, whose chain the
    engine holds (`held`) and whose facts are kept, is named in the manifest but not written: the
    loader takes it from its store by chain ID. Returns the image id, the layers' zstd bytes and how
    many built (not base) layers were reused so."""
    steps = layer_steps(config)
    parts, codename, plan = _survey(outer, manifest, old_ids, base, steps)
    chain, rates = order_parts(parts, codename, plan)
    made_of = {i: note.made(old_ids[i], steps[i] if i < len(steps) else "", old_ids[i] in base) if note else None
               for i in {p.index for p in parts}}
    count = {i: sum(p.index == i for p in parts) for i in made_of}
    got: dict[tuple[int, int], tuple[str, int]] = {}
    written: set[int] = set()  # built layers with a part written
    new_ids, names, zstd = [], [], 0
    for at in chain:
        p = parts[at]
        made = made_of[p.index]
        names.append(f"layers/{p.index}-{p.part}.tar")
        if made is not None and note is not None and len(made.ids) == count[p.index] \
                and _held(new_ids, [made.ids[p.part]], held) and note.has_facts([made.ids[p.part]]):
            got[(p.index, p.part)] = (made.ids[p.part], made.zstd[p.part])
        else:
            got[(p.index, p.part)] = _write_part(outer, p, old_ids, names[-1], out, on_bytes, note)
            written.add(p.index)
        new_ids.append(got[(p.index, p.part)][0])
        zstd += got[(p.index, p.part)][1]
    parts_of = {i: [p.label for p in parts if p.index == i] for i in count if count[i] > 1}
    if note is not None:
        for i in count:
            mine = [got[(i, k)] for k in range(count[i])]
            note.remember(old_ids[i], steps[i] if i < len(steps) else "", old_ids[i] in base,
                          Made(ids=[m[0] for m in mine], parts=parts_of.get(i), zstd=[m[1] for m in mine]))
    body = normal_config(config, new_ids, epoch, parts_of, chain, [layer_order.comment(r) for r in rates])
    image_id = "sha256:" + hashlib.sha256(body).hexdigest()
    docs = [("config.json", body),
            ("manifest.json", json.dumps([{"Config": "config.json", "RepoTags": [ref], "Layers": names}]).encode())]
    for name, data in docs:
        out.write(_member_header(name, len(data)) + data + bytes(-len(data) % BLOCK))
        zstd += len(data)  # a few KB: not worth a compressor
    out.write(bytes(2 * BLOCK))
    out.flush()
    return image_id, zstd, sum(i not in written and old_ids[i] not in base for i in count)


def _write_part(outer: tarfile.TarFile, p: _Part, old_ids: list[str], name: str, out: IO[bytes],
                on_bytes: Callable[[int], None], note: Note | None) -> tuple[str, int]:
    """Write one layer into the archive as `name`: a base layer's bytes as they are, else its
    planned entries; returns its diff_id and zstd bytes and keeps its facts."""
    counted = ZstdCount()
    if p.entries is None:
        out.write(_member_header(name, p.member.size))
        stream = outer.extractfile(p.member)
        assert stream is not None
        sink, whole = Tee(out, counted), hashlib.sha256()  # the copy hashes it: the facts' diff_id check
        while chunk := stream.read(1 << 20):
            sink.write(chunk)
            whole.update(chunk)
            on_bytes(len(chunk))
        sink.write(bytes(-p.member.size % BLOCK))
        if note is not None:
            note.keep(_kept_facts(outer, p.member, old_ids[p.index], "sha256:" + whole.hexdigest(), note))
        return old_ids[p.index], counted.close()
    out.write(_member_header(name, layer_size(p.entries)))
    noted = Noting(list(note.needles)) if note is not None else None
    with tarfile.open(fileobj=outer.extractfile(p.member)) as layer:
        diff_id = write_layer(layer, p.entries, Tee(out, counted), on_bytes, noted)
    if note is not None and noted is not None:
        note.keep(note.facts(diff_id, noted))
    return diff_id, counted.close()


def _held(below: list[str], ids: list[str], held: frozenset[str]) -> bool:
    """Whether the engine holds the chain of each of `ids` laid on `below`."""
    return all(c in held for c in chain_ids(below + ids)[len(below):])


def _kept_facts(outer: tarfile.TarFile, member: tarfile.TarInfo, diff_id: str, copied: str,
                note: Note) -> layerfacts.LayerFacts:
    """The facts of a base layer kept byte for byte, read from the saved archive: kept only when
    the bytes copied to the loader (`copied`: their sha256) are the diff_id the config names."""
    if copied != diff_id:
        raise RapidshipError("normalise", f"a base layer does not hash to its diff_id {diff_id[:19]}",
                             "check the engine's image store (docker image inspect the base), then rebuild")
    noted = Noting(list(note.needles))
    with tarfile.open(fileobj=outer.extractfile(member), mode="r|") as tar:
        for m in tar:
            path, sha = layerfacts.path_of(m.name), ""
            if m.isfile():
                stream = tar.extractfile(m)
                assert stream is not None
                search, h = Search(noted.needles), hashlib.sha256() if layerfacts.hashed(path, ROOTS) else None
                while chunk := stream.read(1 << 20):
                    if h is not None:
                        h.update(chunk)
                    search.feed(chunk)
                sha = h.hexdigest() if h is not None else ""
                noted.found += [(name, path) for name in sorted(search.found)]
            noted.members.append(layerfacts.member(m, sha))
    return note.facts(diff_id, noted)


def layer_files(tar: tarfile.TarFile) -> Iterator[tuple[tarfile.TarInfo, str]]:
    """(member, sha256 of its data or '') of every member of an open layer tar."""
    for m in tar:
        digest = ""
        if m.isfile():
            stream = tar.extractfile(m)
            assert stream is not None
            h = hashlib.sha256()
            while chunk := stream.read(1 << 20):
                h.update(chunk)
            digest = h.hexdigest()
        yield m, digest


# ---- a root filesystem tar as an image (edge: -> docker load) ----------------------------------

def rootfs_config(arch: str, labels: dict[str, str], made_by: str, epoch: int, diff_ids: list[str],
                  steps: list[str] | None = None) -> bytes:
    """Pure: the config of an image of a root filesystem in `diff_ids`' layers (one history entry
    each, `steps` naming them); its digest is the image id."""
    steps = steps or [""] * len(diff_ids)
    history = [{"created": rfc3339(epoch), "created_by": f"{made_by}{f': {step}' if step else ''}"} for step in steps]
    doc = {"architecture": arch, **({"variant": "v8"} if arch == "arm64" else {}), "os": "linux",
           "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                      "Cmd": ["bash"], "Labels": dict(sorted(labels.items()))},
           "created": rfc3339(epoch), "history": history,
           "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def load_rootfs(rootfs_tar: Path, tags: list[str], arch: str, labels: dict[str, str], made_by: str, epoch: int,
                keep: Callable[[str], bool] = lambda _: True,
                split: Callable[[tarfile.TarFile, list[tarfile.TarInfo]], list[tuple[str, list[tarfile.TarInfo]]]] | None = None,
                ) -> str:
    """Load a root filesystem tar into the engine as an image under `tags`, in the layers `split`
    makes of its members (named; default: one layer), each written as every normalised layer is
    (plan_layer): the same tree gives the same image id on any engine. `keep` says which entries
    belong in the image. Returns the image id."""
    with tarfile.open(rootfs_tar) as tar:
        members = [m for m in tar.getmembers() if order_key(m.name) and keep("/".join(order_key(m.name)))]
        layers = split(tar, members) if split else [("", members)]
        loader = ENGINE.load()
        assert loader.stdin is not None
        image_id = ""
        try:
            out = loader.stdin
            diff_ids, names = [], []
            for i, (_, held) in enumerate(layers):
                entries = plan_layer(held)
                names.append(f"layers/{i}.tar")
                out.write(_member_header(names[-1], layer_size(entries)))
                diff_ids.append(write_layer(tar, entries, out))
            body = rootfs_config(arch, labels, made_by, epoch, diff_ids, [name for name, _ in layers])
            image_id = "sha256:" + hashlib.sha256(body).hexdigest()
            manifest = json.dumps([{"Config": "config.json", "RepoTags": tags, "Layers": names}]).encode()
            for name, data in (("config.json", body), ("manifest.json", manifest)):
                out.write(_member_header(name, len(data)) + data + bytes(-len(data) % BLOCK))
            out.write(bytes(2 * BLOCK))
            out.close()
        except BrokenPipeError:  # docker load stopped reading: its own words follow
            pass
        said = (loader.stdout.read() if loader.stdout else b"").decode(errors="replace")
        if loader.wait() != 0 or not image_id:
            raise RapidshipError(f"loading {tags[0]}", f"docker load refused the base: {said.strip()[-300:]}",
                                 "check the engine (docker info) and its disk space")
    return image_id
