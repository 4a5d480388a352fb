"""Images -> disc volumes: one docker-archive, zstd-compressed, split into media-sized ISO 9660 images.

Pure core: `parse_media`, `plan_layout`, `split_points`, `manifest`, `sums_text`, `install_script`
(records in, records or text out). Thin edge: `export` finds each image's signature bundle in the
workspace (`export.trust`; an unsigned image is refused unless `unsigned`), pipes `docker save`
through `zstd -T0` into part files (never holding an image in memory, never writing the
uncompressed tar), then writes the per-volume files (the signatures under `signatures/` on every
volume) and one ISO per volume with xorriso.

Why docker-archive and not an OCI layout: `docker save a b c` already stores layers shared between
images once, keeps image ids (the config digests) exactly, and `docker load` is all an air-gapped
host needs; skopeo reads the same archive when the site wants a local registry instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Callable, Iterable

from rapidship import __version__
from rapidship.engine import ENGINE
from rapidship.config.matrix import run_id
from rapidship.diskspace import is_full, no_room, require_room, sized
from rapidship.errors import ConfigError, GateFailure, RapidshipError
from rapidship.export.carry import disc_bytes, disc_files, find_signed
from rapidship.export.delta import Delta, write_archive
from rapidship.records import Workspace, gated_problems, save

FORMAT = "rapidship-export/1"
ARCHIVE = "images.tar.zst"
MANIFEST = "MANIFEST.json"
SUMS = "SHA256SUMS"
INSTALL = "install.sh"
README = "README.txt"
ZSTD_LEVEL = 3

# Nominal decimal capacities: every real disc of the kind holds a little more
# (DVD-R 4,707,319,808; DVD+R DL 8,547,991,552; BD-R 25,025,314,816 bytes).
MEDIA = {"dvd": 4_700_000_000, "dvd-dl": 8_500_000_000, "bd25": 25_000_000_000}
# ISO 9660 stores a file in one extent only below 4 GiB; larger needs multi-extent files (level 3)
# that some readers mishandle. Parts stay below, so a DVD-sized volume carries two parts.
PART_MAX = 4_000_000_000
# Per volume: ISO 9660 + Rock Ridge + Joliet structures (~80 KiB for a few files), xorriso's
# 300 KiB tail padding, 2 KiB sector rounding per file, and the volume's own small files
# (MANIFEST.json grows ~250 bytes a part). Checked again against the finished ISO.
ISO_RESERVE = 1024 * 1024
METADATA_RESERVE = 512 * 1024
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?b?)?$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12}


@dataclass(frozen=True)
class Media:
    name: str
    bytes: int


@dataclass(frozen=True)
class Layout:
    """How the compressed stream is cut: payload per volume, largest part file."""

    media: Media
    payload_bytes: int
    part_max: int = PART_MAX


@dataclass(frozen=True)
class ImageRecord:
    ref: str
    tags: list[str]
    image_id: str
    repo_digests: list[str]
    arch: str
    os: str
    size_bytes: int
    layers: list[str]
    variant: str = ""
    signed_digest: str = ""  # the per-arch manifest digest its signature covers ("" = none)
    unsigned: bool = False   # exported with --unsigned: no signature on the disc


@dataclass(frozen=True)
class PartRecord:
    """One file of the compressed stream; `cat` of all parts in index order is the archive."""

    name: str
    index: int
    volume: int
    offset: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class VolumeRecord:
    number: int
    iso: str
    iso_bytes: int
    iso_sha256: str
    files: dict[str, dict]


@dataclass
class ExportRecord:
    """What `invoke export` wrote: the record under --out, and the basis of every MANIFEST.json."""

    export_id: str
    created: str
    tool_version: str
    media: Media
    images: list[ImageRecord]
    signing_key_fingerprint: str = ""  # the key every signed image on the disc verifies with
    parts: list[PartRecord] = field(default_factory=list)
    archive_bytes: int = 0
    archive_sha256: str = ""
    tar_bytes: int = 0
    volumes: list[VolumeRecord] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    extends: dict = field(default_factory=dict)  # a delta disc: the release it extends (export/delta.py)

    @property
    def volume_count(self) -> int:
        return max((p.volume for p in self.parts), default=0)


# ---- pure core ---------------------------------------------------------------------------------

def parse_media(value: str | int) -> Media:
    """dvd | dvd-dl | bd25 | a size in bytes (4700000000, 4.7GB, 700MB)."""
    text = str(value).strip().lower().replace("_", "").replace(",", "")
    if text in MEDIA:
        return Media(text, MEDIA[text])
    m = _SIZE.match(text)
    if not m:
        raise ConfigError("--media", f"{value!r} is not a medium or a size",
                          f"pass one of {', '.join(MEDIA)} or a size in bytes like 4700000000 or 700MB")
    size = int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
    media = Media(f"{size} bytes", size)
    plan_layout(media)  # a medium too small for the volume files is a bad flag, found before anything else
    return media


def plan_layout(media: Media, extra: int = 0) -> Layout:
    """`extra`: bytes every volume also carries (the signatures/ folder)."""
    payload = media.bytes - ISO_RESERVE - METADATA_RESERVE - extra
    if payload < 64 * 1024:
        floor = ISO_RESERVE + METADATA_RESERVE + extra + 64 * 1024
        raise ConfigError("--media", f"{media.bytes} bytes leaves no room for data after the ISO file system "
                          f"and the volume files ({ISO_RESERVE + METADATA_RESERVE + extra} bytes)",
                          f"pass at least {floor} bytes")
    return Layout(media=media, payload_bytes=payload)


def split_points(total: int, layout: Layout) -> list[tuple[int, int, int]]:
    """(volume, offset, length) for each part of a `total`-byte stream: volumes filled in order,
    each volume's payload cut into parts of at most part_max bytes."""
    points: list[tuple[int, int, int]] = []
    offset = 0
    while offset < total:
        volume = offset // layout.payload_bytes + 1
        volume_end = volume * layout.payload_bytes
        length = min(total, volume_end, offset + layout.part_max) - offset
        points.append((volume, offset, length))
        offset += length
    return points


def part_name(index: int) -> str:
    return f"{ARCHIVE}.{index:03d}"


def iso_name(export_id: str, volume: int, count: int) -> str:
    return f"rapidship-{export_id[:8]}-{volume:02d}of{count:02d}.iso"


def volume_label(export_id: str, volume: int, count: int) -> str:
    """ISO 9660 volume id: at most 32 d-characters (A-Z 0-9 _)."""
    return f"RAPIDSHIP_{export_id[:8].upper()}_{volume:02d}OF{count:02d}"


def manifest(record: ExportRecord, volume: int, files: dict[str, dict]) -> dict:
    """MANIFEST.json of one volume. Every volume lists every part, so any one names what is missing.
    Written with indent=2 and stable key order: install.sh reads `"volume"` and `"export_id"` by line."""
    return {
        "format": FORMAT,
        "export_id": record.export_id,
        "volume": volume,
        "volume_count": record.volume_count,
        "created": record.created,
        "tool": "rapidship",
        "tool_version": record.tool_version,
        "media": asdict(record.media),
        "signing_key_fingerprint": record.signing_key_fingerprint,
        "archive": {"format": "docker-archive", "compression": "zstd", "name": ARCHIVE,
                    "bytes": record.archive_bytes, "sha256": record.archive_sha256, "tar_bytes": record.tar_bytes},
        "images": [asdict(i) for i in record.images],
        "extends": record.extends,
        "parts": [asdict(p) for p in record.parts],
        "files": files,
    }


def manifest_text(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


def sums_text(hashes: dict[str, str]) -> str:
    """sha256sum -c format, sorted by name: the same text sha256sum itself writes."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(hashes.items()))


def members_max(images: list[ImageRecord]) -> int:
    """The most regular members a `docker save` of `images` holds: per image its manifest, config,
    index and legacy files, per layer its blob and legacy json / VERSION / layer.tar; and the
    archive's own index.json, manifest.json, oci-layout, repositories. install.sh reads no more."""
    return sum(8 + 4 * len(i.layers) for i in images) + 8


def install_script(record: ExportRecord, body: str) -> str:
    """install.sh = a data header for this export + the fixed POSIX body (export/install.sh)."""
    parts = "\n".join(f"{p.name} {p.volume} {p.bytes}" for p in record.parts)
    images = "\n".join(f"{i.ref} {i.image_id} {i.signed_digest or '-'}" for i in record.images)
    ext = record.extends
    names = " ".join(sorted({i["ref"] for i in ext.get("images", [])}))
    header = (f"EXPORT_ID='{record.export_id}'\nVOLUME_COUNT={record.volume_count}\n"
              f"TAR_BYTES={record.tar_bytes}\nMEMBERS_MAX={members_max(record.images)}\n"
              f"KEY_FINGERPRINT='{record.signing_key_fingerprint}'\nPARTS='{parts}'\nIMAGES='{images}'\n"
              f"EXTENDS='{ext['export_id'] + ' of ' + ext['created'] if ext else ''}'\n"
              f"EXTENDS_NAMES='{names}'\nEXTENDS_LAYERS='{' '.join(ext.get('layers', []))}'\n")
    return body.replace("# @EXPORT_DATA@\n", header, 1)


def readme_text(record: ExportRecord, volume: int) -> str:
    images = "\n".join(f"  {i.ref}  ({i.arch}, {i.size_bytes / 1e6:.0f} MB, {i.image_id[:19]}"
                       + (", UNSIGNED)" if i.unsigned else ")") for i in record.images)
    count = record.volume_count
    key = (f"Signed with the key {record.signing_key_fingerprint}." if record.signing_key_fingerprint
           else "NOT SIGNED: exported with --unsigned.")
    return f"""rapidship image export {record.export_id}
Volume {volume} of {count}, made {record.created} by rapidship {record.tool_version}.
{key}

Images:
{images}

Install on a host with Docker, sha256sum, zstd, openssl, tar and flock (no network needed):
  1. Copy every volume into its own directory, or mount them all:
       mkdir -p /var/tmp/rapidship/vol1 && cp -r /media/cdrom/. /var/tmp/rapidship/vol1/   (repeat per disc)
  2. sh /var/tmp/rapidship/vol1/install.sh --key cosign.pub /var/tmp/rapidship/vol*
     cosign.pub is the public key the sender gave you out of band (never a key from a disc).
     It checks every file against SHA256SUMS, checks that all {count} volumes of this export are
     there, verifies every image's signature with the key and that the archive holds only those
     signed images, and only then loads the images into Docker and prints what it loaded.
     --no-verify instead of --key loads without checking signatures (it says what it skipped).
  To push into a local registry with skopeo instead of loading into Docker:
       sh install.sh --key cosign.pub --registry 127.0.0.1:5000 [--insecure] DIR...
  Check one volume only:  cd DIR && sha256sum -c SHA256SUMS

MANIFEST.json lists the images, their ids and signed digests, and every file of every volume with
its sha256; signatures/ holds each image's cosign signature and attestations. The rapidship
project's `invoke import --key cosign.pub --from DIR|ISO...` does the same from Python, and also
checks the attestations and every layer before loading.
"""


def image_record(info: dict, ref: str, variant: str = "") -> ImageRecord:
    """From `docker image inspect` output."""
    return ImageRecord(ref=ref, tags=list(info.get("RepoTags") or []), image_id=info["Id"],
                       repo_digests=list(info.get("RepoDigests") or []), arch=info.get("Architecture", ""),
                       os=info.get("Os", ""), size_bytes=int(info.get("Size", 0)),
                       layers=list(info.get("RootFS", {}).get("Layers", [])), variant=variant)


def record_json(record: ExportRecord) -> dict:
    return asdict(record) | {"volume_count": record.volume_count}


# ---- edge: resolve images ----------------------------------------------------------------------

def resolve_images(variants: Iterable, arch: str | None, refs: Iterable[str], ws: Workspace = Workspace()) -> list[ImageRecord]:
    """--variant (through its build record, else the name invoke build gives it) and --image refs -> ImageRecords. A
    corrupt build record is an error, not a silent fallback to the tag."""
    from rapidship.imagebuild.buildkit import read_record

    inspected: dict[str, dict | None] = {}

    def inspect(ref: str) -> dict | None:  # each ref asked of the engine once
        if ref not in inspected:
            inspected[ref] = ENGINE.try_inspect(ref)
        return inspected[ref]

    wanted: list[tuple[str, str, str, str]] = []  # (engine ref, the disc's name for it, variant, flag)
    for v in variants:
        arches = [arch] if arch else [a.value for a in ws.default_arches(v)]   # --arch's one rule
        found = []
        for a in arches:
            ref, name = v.local_ref(a, run_id()), v.ref(a)
            if ws.build(v.id, a).is_file():
                built = read_record(ws, v.id, a)
                ref, name = built.ref, built.release_name
                tagged = inspect(ref)
                if tagged is not None and tagged["Id"] != built.image_id:  # a later build moved the tag
                    raise ConfigError(str(ws.build(v.id, a)), f"{ref} is now image {tagged['Id'][:19]}, not the "
                                      f"{built.image_id[:19]} this build record gated",
                                      f"rebuild and gate it (invoke build --variant {v.id} --arch {a}), or export "
                                      f"the tag as it is with --image {ref}")
                if tagged is not None and (problems := gated_problems(ws, v.id, a, built.image_id)):
                    raise GateFailure(f"export --variant {v.id}", f"{ref} is not gated as built:\n  "
                                      + "\n  ".join(problems), "run the gates and the scan on this build, then "
                                      "export; nothing was written")
            found.append((ref, name, v.id, f"--variant {v.id} --arch {a}"))
        wanted += found
    wanted += [(r, r, "", f"--image {r}") for r in refs]
    if not wanted:
        raise ConfigError("invoke export", "no image named", "pass --variant ID or --image REF")
    images: list[ImageRecord] = []
    for ref, name, variant, flag in wanted:
        info = inspect(ref)
        if info is None:
            raise ConfigError(flag, f"{ref} is not in the engine",
                              f"build it first ({flag.replace('--variant', 'invoke build --variant')})" if variant
                              else "build or load it first")
        if name not in {i.ref for i in images}:
            images.append(image_record(info, name, variant))
    return images


# ---- edge: save | zstd | split -----------------------------------------------------------------

class PartWriter:
    """Cuts the compressed stream into part files under out/volume-NN/, hashing as it writes."""

    def __init__(self, layout: Layout, out: Path) -> None:
        self.layout, self.out = layout, out
        self.parts: list[PartRecord] = []
        self.total = 0
        self.whole = hashlib.sha256()
        self._file = None
        self._hash = None
        self._start = 0
        self._left = 0

    def write(self, data: memoryview) -> None:
        self.whole.update(data)
        while data:
            if self._left == 0:
                self._open()
            n = min(self._left, len(data))
            self._file.write(data[:n])
            self._hash.update(data[:n])
            self._left -= n
            self.total += n
            data = data[n:]

    def _open(self) -> None:
        self.close()
        volume = self.total // self.layout.payload_bytes + 1
        room = min(volume * self.layout.payload_bytes - self.total, self.layout.part_max)
        folder = volume_dir(self.out, volume)
        folder.mkdir(parents=True, exist_ok=True)
        name = part_name(len(self.parts))
        self._file = open(folder / name, "wb")  # noqa: SIM115 - closed in close()
        self._hash = hashlib.sha256()
        self._start, self._left = self.total, room
        self.parts.append(PartRecord(name=name, index=len(self.parts), volume=volume, offset=self.total, bytes=0, sha256=""))

    def close(self) -> None:
        if self._file is None:
            return
        self._file.close()
        last = self.parts[-1]
        self.parts[-1] = PartRecord(last.name, last.index, last.volume, last.offset, self.total - self._start,
                                    self._hash.hexdigest())
        self._file = None


def volume_dir(out: Path, volume: int) -> Path:
    return out / f"volume-{volume:02d}"


def save_compressed(refs: list[str], writer: PartWriter, on_tar: Callable[[int], None],
                    on_out: Callable[[int], None]) -> int:
    """docker save refs | zstd -T0 | writer. Returns uncompressed tar bytes. The tar is moved
    between the two processes with splice(2) (counted, never copied into Python)."""
    save = ENGINE.save_process(*refs)
    assert save.stdout

    def splice(sink) -> int:
        moved = 0
        src, dst = save.stdout.fileno(), sink.fileno()
        while n := os.splice(src, dst, 1 << 20):
            moved += n
            on_tar(n)
        return moved

    try:
        moved = compressed(splice, writer, on_out)
    except BaseException:
        save.kill()  # it would wait forever on a pipe nobody reads
        save.wait()
        raise
    save_err = save.stderr.read().decode(errors="replace").strip()
    if save.wait() != 0:
        raise RapidshipError("docker save", f"failed: {save_err or 'no message'}", "check the engine and the image names")
    return moved


def compressed(feed: Callable[[IO[bytes]], int], writer: PartWriter, on_out: Callable[[int], None]) -> int:
    """feed(zstd's stdin) | zstd -T0 | writer; `feed` runs in a thread and returns the bytes it wrote."""
    zstd = subprocess.Popen(["zstd", "-T0", f"-{ZSTD_LEVEL}", "-q", "-c"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert zstd.stdin and zstd.stdout
    moved = [0]
    failure: list[BaseException] = []

    def pump() -> None:
        try:
            moved[0] = feed(zstd.stdin)
        except BaseException as exc:  # noqa: BLE001 - zstd died (its exit code says why), or the feed failed
            failure.append(exc)
        finally:
            with contextlib.suppress(BrokenPipeError):
                zstd.stdin.close()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    try:
        while n := zstd.stdout.readinto(buf):
            writer.write(view[:n])
            on_out(n)
        writer.close()
    except BaseException:
        # nobody reads zstd's output any more: end zstd, so the feed's next write fails (EPIPE) and its
        # thread ends, rather than both waiting on full pipes forever (a full disk hung export so)
        zstd.kill()
        with contextlib.suppress(OSError):
            writer.close()
        thread.join()
        zstd.wait()
        raise
    thread.join()
    zstd_err = zstd.stderr.read().decode(errors="replace").strip()
    if failure and isinstance(failure[0], RapidshipError):
        raise failure[0]
    if zstd.wait() != 0 or failure:
        raise RapidshipError("zstd", f"compression failed: {zstd_err or failure}", "check that zstd is installed and the disk has room")
    return moved[0]


# ---- edge: volume files and ISO ----------------------------------------------------------------

INSTALL_BODY = Path(__file__).parent / "install.sh"


def write_volume_files(record: ExportRecord, out: Path, signatures: dict[str, bytes] | None = None) -> None:
    """install.sh, README.txt, the signatures/ folder, MANIFEST.json and SHA256SUMS into every
    volume directory (every volume carries every signature, so each disc can be checked alone)."""
    body = INSTALL_BODY.read_text()
    script = install_script(record, body)
    for volume in range(1, record.volume_count + 1):
        folder = volume_dir(out, volume)
        (folder / INSTALL).write_text(script)
        (folder / INSTALL).chmod(0o755)
        (folder / README).write_text(readme_text(record, volume))
        files = {p.name: {"bytes": p.bytes, "sha256": p.sha256} for p in record.parts if p.volume == volume}
        for name, data in sorted((signatures or {}).items()):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
            files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name in (INSTALL, README):
            data = (folder / name).read_bytes()
            files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        text = manifest_text(manifest(record, volume, files))
        (folder / MANIFEST).write_text(text)
        hashes = {n: f["sha256"] for n, f in files.items()} | {MANIFEST: hashlib.sha256(text.encode()).hexdigest()}
        (folder / SUMS).write_text(sums_text(hashes))


def volume_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def write_iso(folder: Path, iso: Path, label: str, on_bytes: Callable[[int], None]) -> None:
    """xorriso -as mkisofs: Rock Ridge + Joliet, ISO level 3 (long names; parts stay < 4 GiB anyway)."""
    if not shutil.which("xorriso"):
        raise ConfigError("invoke export", "xorriso is not installed", "apt-get install xorriso")
    iso.unlink(missing_ok=True)
    cmd = ["xorriso", "-as", "mkisofs", "-quiet", "-o", str(iso), "-V", label, "-R", "-J", "-iso-level", "3", str(folder)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = 0
    while proc.poll() is None:
        time.sleep(0.2)
        now = iso.stat().st_size if iso.exists() else 0
        on_bytes(now - seen)
        seen = now
    out = proc.stdout.read().decode(errors="replace").strip() if proc.stdout else ""
    if proc.returncode != 0:
        raise RapidshipError(f"xorriso {iso.name}", f"failed (exit {proc.returncode}): {out[-800:]}", "check disk space")
    on_bytes(iso.stat().st_size - seen)


def sha256_file(path: Path, on_bytes: Callable[[int], None] = lambda _: None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            on_bytes(len(chunk))
    return digest.hexdigest()


def sign_images(images: list[ImageRecord], ws: Workspace, unsigned: bool = False,
                warn: Callable[[str], None] = lambda _: None) -> tuple[list[ImageRecord], str, dict[str, bytes]]:
    """Each image with the digest its signature covers, the one key fingerprint of the disc, and the
    signature files for every volume. No signature: refused, unless `unsigned` (then said loudly)."""
    bundles = find_signed(images, ws)
    missing = [i for i in images if i.image_id not in bundles]
    if missing and not unsigned:
        names = "; ".join(f"{i.ref} ({i.image_id[:19]})" for i in missing)
        raise ConfigError("invoke export", f"no signature for {names} in {ws.root} (the sites verify every image "
                          "against the signing key before loading it)",
                          "push and sign it first (invoke push --variant V, invoke sign --variant V --key cosign.key), "
                          "or pass --unsigned to ship it unsigned (the site must then load with --no-verify)")
    keys = {b.fingerprint: b for b in bundles.values()}
    if len(keys) > 1:
        raise ConfigError("invoke export", "the images are signed with different keys: " + "; ".join(
            f"{b.fingerprint[:19]} ({b.record})" for b in keys.values()),
            "a disc carries one key's signatures: sign them all with one key, or export them on separate discs")
    if missing:
        warn(f"[bold red]WARNING: --unsigned: {len(missing)} image(s) go onto the disc WITHOUT a signature: "
             + ", ".join(f"{i.ref} ({i.image_id[:19]})" for i in missing)
             + ". MANIFEST.json records them as unsigned; a site can load them only with --no-verify.[/]")
    unnamed = [f"{i.ref} ({i.image_id[:19]}): its signature covers only {', '.join(b.names) or 'no names'}"
               for i in images if (b := bundles.get(i.image_id)) and i.ref not in b.names]
    if unnamed:  # the site would refuse it: a name the signature does not list is anyone's name
        raise ConfigError("invoke export", "exported under a name its signature does not cover: " + "; ".join(unnamed),
                          "export it under a signed name (--variant, or --image with one of those names), or sign it "
                          "again (invoke sign)")
    signed = [replace(i, signed_digest=bundles[i.image_id].digest) if i.image_id in bundles
              else replace(i, unsigned=True) for i in images]
    files = disc_files(list({b.digest: b for b in bundles.values()}.values()))
    from rapidship.sign import tufmeta

    files.update(tufmeta.disc_files(ws.root))  # the release's TUF metadata, root chain included
    return signed, next(iter(keys), ""), files


def export(images: list[ImageRecord], media: Media, out: Path, keep_dirs: bool = False,
           progress=None, part_max: int = PART_MAX, ws: Workspace = Workspace(),
           unsigned: bool = False, delta: "Delta | None" = None) -> ExportRecord:
    """Save, compress, split, write volume files and ISOs. `progress` is a rich Progress (or None).
    Each image's signature comes from the workspace `ws`; `unsigned` lets images without one through.
    `part_max` below the default only serves tests that want several parts per volume on small media.
    `delta` (export/delta.py's plan against the release the sites hold) makes a delta disc."""
    from rapidship.console import err

    for tool in ("zstd", "xorriso"):
        if not shutil.which(tool):
            raise ConfigError("invoke export", f"{tool} is not installed", f"apt-get install {tool}")
    images, key_fingerprint, signatures = sign_images(images, ws, unsigned, err.print)
    layout = plan_layout(media, disc_bytes(signatures) if signatures else 0)
    layout = Layout(layout.media, layout.payload_bytes, min(part_max, PART_MAX))
    if delta is None and (need := known_need(images, ws)):
        require_room("--out", out, need, "the images zstd-compressed as their build records measured them, twice: "
                     "the parts, then the ISOs", "nothing was written")
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("volume-*")) or any(out.glob("rapidship-*.iso")):
        raise ConfigError("--out", f"{out} already holds an export", "pass an empty or new --out directory")
    record = ExportRecord(export_id=uuid.uuid4().hex, created=_now(), tool_version=__version__,
                          media=media, images=images, signing_key_fingerprint=key_fingerprint,
                          extends=delta.extends if delta else {})
    progress = progress or QuietProgress()
    # by id: the engine's names carry a run's identity; the disc names each image by its release
    # name (MANIFEST.json's ref), which is what import gives it, whatever the archive says
    refs = list(dict.fromkeys(i.image_id for i in images))

    writer = PartWriter(layout, out)
    try:
        _write(record, refs, writer, out, keep_dirs, progress, signatures, delta)
    except BaseException as exc:
        _remove_partial(out)  # nothing half-written stays for a later step to take as an export
        if is_full(exc):  # what the disk took before it refused more is the least the export needs
            raise no_room("--out", out, f"more than {sized(writer.total)}", "nothing was published "
                          "(the partial volumes were removed)",
                          "free space there, or pass --out on a larger file system: the export needs the compressed "
                          "images about twice (parts, then ISOs)") from None
        raise
    save(out / "export.json", record_json(record))
    record_location(ws, out, record.export_id)
    signed = sum(1 for i in images if i.signed_digest)
    if delta:
        err.print(f"a delta disc: extends export {delta.extends['export_id'][:12]} ({delta.extends['created']}); "
                  f"{len(delta.extends['layers'])} layer(s) are taken from the host's copy of that release")
    err.print(f"exported {len(images)} image(s) into {record.volume_count} volume(s) of {media.name}: "
              f"{record.tar_bytes / 1e6:.0f} MB -> {record.archive_bytes / 1e6:.0f} MB zstd; "
              + (f"{signed} signed with {key_fingerprint[:19]}" if signed else "none signed")
              + (f", {len(images) - signed} UNSIGNED" if signed < len(images) else ""))
    return record


def known_need(images: list[ImageRecord], ws: Workspace) -> int | None:
    """Bytes an export of `images` needs under --out, by each build record's `zstd -3` figure of the
    image (the parts, then the ISOs beside them); None when an image has no build record of its id."""
    from rapidship.imagebuild.buildkit import read_record

    total = 0
    for image in images:
        if not image.variant or not ws.build(image.variant, image.arch).is_file():
            return None
        built = read_record(ws, image.variant, image.arch)
        if built.image_id != image.image_id:
            return None
        total += built.zstd_bytes
    return 2 * total + len(images) * (ISO_RESERVE + METADATA_RESERVE)


def _remove_partial(out: Path) -> None:
    for path in [*out.glob("volume-*"), *out.glob("rapidship-*.iso"), out / SUMS]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _write(record: ExportRecord, refs: list[str], writer: PartWriter, out: Path, keep_dirs: bool, progress,
           signatures: dict[str, bytes], delta: "Delta | None") -> None:
    """save | zstd | split into the volume folders, then the volume files, ISOs and their checksums."""
    from rapidship.console import err

    images, media = record.images, record.media
    start = time.monotonic()
    estimate = sum(i.size_bytes for i in images)  # upper bound: shared layers are counted per image
    saving = progress.add_task("save | zstd | split", total=estimate)
    if delta is None:
        record.tar_bytes = save_compressed(refs, writer, lambda n: progress.advance(saving, n), lambda n: None)
    else:  # a delta disc: only what the release the sites hold lacks
        record.tar_bytes = compressed(lambda sink: write_archive(refs, delta.held, sink, out,
                                                                 lambda n: progress.advance(saving, n), err.print),
                                      writer, lambda n: None)
    progress.update(saving, total=record.tar_bytes, completed=record.tar_bytes)
    record.parts, record.archive_bytes, record.archive_sha256 = writer.parts, writer.total, writer.whole.hexdigest()
    record.seconds["save_compress_split"] = round(time.monotonic() - start, 2)
    if not record.parts:
        raise RapidshipError("docker save", "produced no data", "check the engine")

    start = time.monotonic()
    write_volume_files(record, out, signatures)
    count = record.volume_count
    total = sum(volume_bytes(volume_dir(out, v)) for v in range(1, count + 1))
    require_room("--out", out, total + count * ISO_RESERVE, f"{count} ISO(s) of the {sized(total)} written",
                 "nothing was published (the partial volumes were removed)",
                 "free space there, or pass --out on a larger file system: the export needs the compressed images "
                 "about twice (parts, then ISOs)")
    isos = progress.add_task(f"ISO x{count}", total=total)
    for volume in range(1, count + 1):
        folder = volume_dir(out, volume)
        iso = out / iso_name(record.export_id, volume, count)
        write_iso(folder, iso, volume_label(record.export_id, volume, count), lambda n: progress.advance(isos, n))
        size = iso.stat().st_size
        if size > media.bytes:  # fail closed: a volume that does not fit the disc is useless
            raise RapidshipError(f"volume {volume} ({iso.name})", f"ISO is {size} bytes, over the medium's {media.bytes}",
                                 "report this: the per-volume reserve is too small")
        files = json.loads((folder / MANIFEST).read_text())["files"]
        record.volumes.append(VolumeRecord(number=volume, iso=iso.name, iso_bytes=size, iso_sha256="", files=files))
    progress.update(isos, total=sum(v.iso_bytes for v in record.volumes), completed=sum(v.iso_bytes for v in record.volumes))
    record.seconds["iso"] = round(time.monotonic() - start, 2)

    start = time.monotonic()
    hashing = progress.add_task("ISO checksums", total=sum(v.iso_bytes for v in record.volumes))
    for i, vol in enumerate(record.volumes):
        digest = sha256_file(out / vol.iso, lambda n: progress.advance(hashing, n))
        record.volumes[i] = VolumeRecord(vol.number, vol.iso, vol.iso_bytes, digest, vol.files)
    (out / SUMS).write_text(sums_text({v.iso: v.iso_sha256 for v in record.volumes}))
    record.seconds["iso_sha256"] = round(time.monotonic() - start, 2)
    if not keep_dirs:
        for volume in range(1, count + 1):
            shutil.rmtree(volume_dir(out, volume))


def record_location(ws: Workspace, out: Path, export_id: str) -> Path:
    """Leave in the workspace where this export's record is, wherever --out put it (the report reads it
    from there). Relative to the workspace when inside it, so a copied workspace still finds it."""
    where = out.resolve()
    try:
        named = where.relative_to(ws.root.resolve()).as_posix()
    except ValueError:
        named = str(where)
    return save(ws.exports_dir() / f"{export_id}.json", {"export_id": export_id, "out": named})


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


class QuietProgress:
    """Stands in for rich Progress where nobody watches (library use)."""

    def add_task(self, *a, **k) -> int:
        return 0

    def advance(self, *a, **k) -> None:
        pass

    def update(self, *a, **k) -> None:
        pass
