"""Disc volumes -> a checked, ordered list of parts, or one message naming the bad volume.

Volumes come as directories (a mounted disc, a copy) or as ISO files, read without mounting:
`xorriso -find -exec report_lba` gives each file's extent, and the bytes are read straight from
the ISO at that offset. Pure core: `check_identity` (manifests, SHA256SUMS, which volume is which,
what is missing) and `check_hashes` (measured sizes and digests against the manifests). Thin edge:
`open_volume`, `measure`. Nothing is loaded until both passed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rapidship.errors import ConfigError, GateFailure
from rapidship.export.carry import SIGNATURES
from rapidship.export.write import FORMAT, MANIFEST, SUMS, sums_text

SECTOR = 2048
_LABEL = re.compile(r"Volume id\s*:\s*'RAPIDSHIP_([0-9A-F]{8})_(\d+)OF(\d+)'")
_LBA = re.compile(r"^File data lba:\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*'/(.+)'$")


@dataclass(frozen=True)
class FileSlice:
    """Where a volume's file lies: a whole file in a directory, or an extent inside an ISO."""

    path: Path
    offset: int
    length: int


@dataclass
class Volume:
    source: str  # what the user passed: shown in every message
    files: dict[str, FileSlice]
    manifest: dict | None = None
    sums: str | None = None
    manifest_sha256: str = ""
    problem: str = ""  # set when the volume cannot even be read
    label: tuple[int, int] | None = None  # (volume, count) from an ISO's volume id, for naming damaged discs

    @property
    def number(self) -> int | None:
        return self.manifest.get("volume") if self.manifest else None

    def name(self) -> str:
        if self.manifest:
            return f"volume {self.number} of {self.manifest.get('volume_count')} ({self.source})"
        if self.label:
            return f"volume {self.label[0]} of {self.label[1]} ({self.source})"
        return f"volume {self.source}"


@dataclass(frozen=True)
class Checked:
    """An export whose volumes are all present and consistent: parts in stream order."""

    export_id: str
    manifest: dict
    volumes: dict[int, Volume]
    parts: list[tuple[dict, FileSlice]] = field(default_factory=list)

    @property
    def images(self) -> list[dict]:
        return self.manifest["images"]


# ---- edge: reading volumes ---------------------------------------------------------------------

def expand_sources(sources: list[str]) -> list[str]:
    """An export's output directory (ISOs, no MANIFEST.json of its own) stands for its ISOs,
    so `--from DIR` works on what `invoke export --out DIR` wrote as well as on one volume."""
    out: list[str] = []
    for source in sources:
        path = Path(source)
        isos = sorted(path.glob("rapidship-*.iso")) if path.is_dir() and not (path / MANIFEST).exists() else []
        out += [str(p) for p in isos] or [source]
    return out


def open_volume(source: str | Path) -> Volume:
    path = Path(source)
    if path.is_dir():  # names relative to the volume: signatures/ holds folders
        files = {p.relative_to(path).as_posix(): FileSlice(p, 0, p.stat().st_size) for p in path.rglob("*") if p.is_file()}
        label = None
    elif path.is_file() or path.is_block_device():  # an ISO file, or the disc in a drive (/dev/sr0)
        files, label = iso_files(path)
        label = label or _label_from_name(path.name)
        if isinstance(files, str):
            return Volume(str(source), {}, problem=files, label=label)
    elif path.exists():
        raise ConfigError("--from", f"{source} is not a volume directory, an ISO file or a disc drive",
                          "pass volume directories, ISO files or the drive holding the disc (/dev/sr0)")
    else:
        raise ConfigError("--from", f"{source} does not exist", "pass volume directories or ISO files")
    if path.is_dir() and not {MANIFEST, SUMS} & set(files):   # no file of an export at all: the wrong folder
        raise ConfigError("--from", f"{source} is not a disc: it holds no MANIFEST.json or SHA256SUMS of a volume and "
                          "no rapidship-*.iso", "pass the folder invoke export --out wrote, one of its volume-NN "
                          "folders, its ISO files, or the drive holding the disc (/dev/sr0)")
    volume = Volume(str(source), files, label=label)
    cut = _cut_short(path, files) if not path.is_dir() else ""
    if MANIFEST not in files or available(files[MANIFEST]) < files[MANIFEST].length:
        volume.problem = cut or "no MANIFEST.json: not a volume of a rapidship export (or the disc is damaged)"
        return volume
    raw = read_slice(files[MANIFEST])
    volume.manifest_sha256 = hashlib.sha256(raw).hexdigest()
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and doc.get("format") == FORMAT:
        volume.manifest = doc
    else:
        volume.problem = "MANIFEST.json is damaged or not a rapidship export manifest"
    if SUMS in files:
        volume.sums = read_slice(files[SUMS]).decode("utf-8", errors="replace")
    volume.problem = volume.problem or cut
    return volume


def _label_from_name(name: str) -> tuple[int, int] | None:
    """An ISO too damaged to carry its volume id still has the file name export gave it."""
    m = re.search(r"(\d+)of(\d+)\.iso$", name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _cut_short(iso: Path, files: dict[str, FileSlice]) -> str:
    """An ISO file shorter than its own directory says: a copy or download that stopped early."""
    need = max(s.offset + s.length for s in files.values())
    have = size_of(iso)
    return f"the ISO is truncated: {have} bytes, its files reach to byte {need}: copy this volume again" if have < need else ""


def iso_files(iso: Path) -> tuple[dict[str, FileSlice] | str, tuple[int, int] | None]:
    """Files in the root of an ISO image and their extents (or a problem sentence), and the
    (volume, count) its volume id carries."""
    if not shutil.which("xorriso"):
        raise ConfigError("--from", "reading ISO files needs xorriso", "apt-get install xorriso, or mount the ISO and pass the directory")
    # stdio: reads any file or block device as an image (xorriso refuses non-MMC /dev paths otherwise)
    proc = subprocess.run(["xorriso", "-abort_on", "FAILURE", "-indev", f"stdio:{iso}", "-find", "/", "-type", "f",
                           "-exec", "report_lba", "--"], capture_output=True, text=True, check=False)
    files: dict[str, FileSlice] = {}
    label = (int((m := _LABEL.search(proc.stderr)).group(2)), int(m.group(3))) if _LABEL.search(proc.stderr) else None
    for line in proc.stdout.splitlines():
        if m := _LBA.match(line.strip()):
            extent, lba, _blocks, size, name = m.groups()
            # parts stay single-extent; the only folders a volume has are signatures/ and tuf/
            if extent != "0" or ("/" in name and not name.startswith((SIGNATURES + "/", "tuf/"))):
                return f"unexpected layout in the ISO ({name})", label
            files[name] = FileSlice(iso, int(lba) * SECTOR, int(size))
    if proc.returncode != 0 or not files:
        lines = proc.stderr.strip().splitlines()
        said = next((ln for ln in lines if any(w in ln for w in ("FAILURE", "SORRY", "is blank"))), "no files in it")
        return f"not a readable ISO 9660 image ({said.strip()}): burn or copy this volume again", label
    return files, label


def read_slice(s: FileSlice, on_bytes: Callable[[int], None] = lambda _: None,
               digest=None) -> bytes:
    """Read a slice whole (small files), or hash it in chunks when `digest` is given."""
    chunks = []
    with open(s.path, "rb") as fh:
        fh.seek(s.offset)
        left = s.length
        while left > 0:
            chunk = fh.read(min(left, 1 << 20))
            if not chunk:
                break
            left -= len(chunk)
            on_bytes(len(chunk))
            if digest is None:
                chunks.append(chunk)
            else:
                digest.update(chunk)
    return b"".join(chunks)


def available(s: FileSlice) -> int:
    """Bytes of the slice really present (an ISO file cut short holds fewer than its directory says)."""
    return max(0, min(s.length, size_of(s.path) - s.offset))


def size_of(path: Path) -> int:
    """Bytes in a file or a block device (whose stat size is 0)."""
    with open(path, "rb") as fh:
        return fh.seek(0, 2)


# ---- pure core ---------------------------------------------------------------------------------

def check_identity(volumes: list[Volume]) -> Checked:
    """Which volume is which; all of one export; none missing or repeated; files where listed.
    Raises one GateFailure naming every bad volume. Order matters: a volume must agree with itself
    (MANIFEST.json against SHA256SUMS) before its volume number or export id is believed."""
    problems = [f"{v.name()}: {v.problem}" for v in volumes if v.problem]
    problems = problems or [p for v in volumes if (p := _self_check(v))]
    if problems:
        raise _fail(problems)
    ids = Counter(v.manifest["export_id"] for v in volumes)
    export_id = max(ids, key=lambda i: (ids[i], -_first(volumes, i)))  # majority; ties: the first given
    strangers = [f"{v.name()} belongs to export {v.manifest['export_id']} (made {v.manifest.get('created')}), "
                 f"not to export {export_id}: remove it" for v in volumes if v.manifest["export_id"] != export_id]
    if strangers:
        raise _fail(strangers)
    by_number: dict[int, Volume] = {}
    for v in volumes:
        if v.number in by_number:
            problems.append(f"volume {v.number} given twice: {by_number[v.number].source} and {v.source}")
        by_number[v.number] = v
    ref = volumes[0].manifest
    count = ref["volume_count"]
    problems += [f"volume {n} of {count} is missing: pass every volume of export {export_id}"
                 for n in range(1, count + 1) if n not in by_number]
    problems += [f"{v.name()}: its manifest disagrees with volume {volumes[0].number}'s on the parts or images: "
                 "copy this volume again" for v in volumes[1:] if _shared(v.manifest) != _shared(ref)]
    for v in by_number.values():
        problems += _sizes(v)
    if problems:
        raise _fail(problems)
    parts = [(p, by_number[p["volume"]].files[p["name"]]) for p in sorted(ref["parts"], key=lambda p: p["index"])]
    return Checked(export_id=export_id, manifest=ref, volumes=by_number, parts=parts)


def _first(volumes: list[Volume], export_id: str) -> int:
    return next(i for i, v in enumerate(volumes) if v.manifest["export_id"] == export_id)


def _shared(doc: dict) -> tuple:
    return (doc["volume_count"], json.dumps(doc["parts"], sort_keys=True), json.dumps(doc["images"], sort_keys=True),
            json.dumps(doc["archive"], sort_keys=True), json.dumps(doc.get("extends") or {}, sort_keys=True))


def _self_check(v: Volume) -> str:
    """SHA256SUMS must be exactly what the manifest implies, and carry the manifest's own hash."""
    files = v.manifest.get("files", {})
    expected = sums_text({n: m["sha256"] for n, m in files.items()} | {MANIFEST: v.manifest_sha256})
    if v.sums is None:
        return f"{v.name()}: SHA256SUMS is missing"
    if v.sums == expected:
        return ""
    if f"{v.manifest_sha256}  {MANIFEST}\n" in v.sums:
        return f"{v.name()}: SHA256SUMS is damaged"
    return f"{v.name()}: MANIFEST.json does not match SHA256SUMS (one of them is damaged)"


def _sizes(v: Volume) -> list[str]:
    """Every listed file present with its full size, and every part of this volume listed."""
    files = v.manifest.get("files", {})
    problems = []
    for name, meta in sorted(files.items()):
        if name not in v.files:
            problems.append(f"{v.name()}: {name} is missing")
        elif (have := min(available(v.files[name]), v.files[name].length)) != meta["bytes"]:
            problems.append(f"{v.name()}: {name} is truncated or resized: {have} of {meta['bytes']} bytes")
    for p in v.manifest.get("parts", []):
        if p["volume"] == v.number and p["name"] not in files:
            problems.append(f"{v.name()}: the manifest does not list its own part {p['name']}")
    return problems


def check_hashes(checked: Checked, measured: dict[tuple[int, str], str]) -> None:
    """Measured sha256 of every file against the manifests; one GateFailure naming every bad file."""
    problems = []
    for number, v in sorted(checked.volumes.items()):
        for name, meta in sorted(v.manifest["files"].items()):
            got = measured.get((number, name))
            if got != meta["sha256"]:
                problems.append(f"{v.name()}: {name} checksum mismatch (sha256 {str(got)[:16]}..., "
                                f"expected {meta['sha256'][:16]}...): the volume is damaged")
    if problems:
        raise _fail(problems)


def _fail(problems: list[str]) -> GateFailure:
    head = problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n  " + "\n  ".join(problems)
    return GateFailure("export check", head + "\nnothing was loaded",
                       "replace the named volume(s) with a good copy of the same export, then run again")


# ---- edge: measure -----------------------------------------------------------------------------

def total_bytes(checked: Checked) -> int:
    return sum(m["bytes"] for v in checked.volumes.values() for m in v.manifest["files"].values())


def measure(checked: Checked, on_bytes: Callable[[int], None] = lambda _: None) -> dict[tuple[int, str], str]:
    measured = {}
    for number, v in sorted(checked.volumes.items()):
        for name in sorted(v.manifest["files"]):
            digest = hashlib.sha256()
            read_slice(v.files[name], on_bytes, digest)
            measured[(number, name)] = digest.hexdigest()
    return measured


def verify(sources: list[str], on_bytes: Callable[[int], None] = lambda _: None) -> Checked:
    """Open, check identity and completeness, hash every byte. Raises before anything loads."""
    if not sources:
        raise ConfigError("--from", "no volume given", "pass every volume: --from DIR_OR_ISO (repeatable)")
    checked = check_identity([open_volume(s) for s in sources])
    check_hashes(checked, measure(checked, on_bytes))
    return checked


# ---- the release a delta disc extends (invoke export --since) ----------------------------------

def previous_release(source: str) -> tuple[str, str, list[dict]]:
    """(export id, created, images) of PREVIOUS: an export.json, an export folder, a volume or an ISO."""
    path = Path(source)
    doc: dict | None = None
    if path.is_file() and path.suffix == ".json":
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise ConfigError("--since", f"{source} is not readable JSON ({err})", "pass the previous export's "
                              "export.json, its folder, a volume or an ISO of it") from None
    elif path.exists():
        if path.is_dir() and (path / "export.json").is_file():
            return previous_release(str(path / "export.json"))
        volume = open_volume(expand_sources([source])[0])
        doc = volume.manifest
        if doc is None:
            raise ConfigError("--since", f"{source}: {volume.problem or 'no ' + MANIFEST}",
                              "pass the previous export's export.json, its folder, a volume or an ISO of it")
    else:
        raise ConfigError("--since", f"{source} does not exist", "pass the previous release's export.json or disc")
    images = doc.get("images") if isinstance(doc, dict) else None
    if not isinstance(images, list) or not all(isinstance(i, dict) and isinstance(i.get("layers"), list)
                                               and isinstance(i.get("image_id"), str) for i in images):
        raise ConfigError("--since", f"{source} lists no images with their layers",
                          "pass the export.json or a volume of an export made by invoke export")
    return str(doc.get("export_id", "")), str(doc.get("created", "")), images
