"""The workspace: the one owner of the records the pipeline writes under build/.

Every stage hands its results to the next as JSON records on disk (so CI jobs can be split across
runners). `Workspace(root)` names every record's path (`ws.gates(variant, arch)`), writes records
atomically (temp file + rename, `schema_version` added) and reads them back validated against
their type: a missing, corrupt, mistyped or newer-schema record is one `RecordError` naming the
file and the command that writes it, never a TypeError or KeyError from deep inside a stage.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, model_validator

from rapidship.errors import RapidshipError

SCHEMA_VERSION = 1  # of every record below; raise it when a record's shape changes
T = TypeVar("T")


class RecordError(RapidshipError):
    """A record that cannot be used: missing, corrupt, of another shape or a newer schema."""


class Workspace:
    """Paths of every record, by variant id and arch; `root` is build/ unless a flag moves it."""

    def __init__(self, root: Path | str = "build") -> None:
        self.root = Path(root)

    def variant_dir(self, variant: str) -> Path:
        return self.root / variant

    def render(self, variant: str) -> Path:
        return self.variant_dir(variant) / "render.json"

    def build(self, variant: str, arch: str) -> Path:
        return self.variant_dir(variant) / f"build-{arch}.json"

    def build_log(self, variant: str, arch: str) -> Path:
        return self.variant_dir(variant) / f"build-{arch}.log"

    def staged(self, variant: str, arch: str) -> Path:
        return self.variant_dir(variant) / f"staged-{arch}.json"

    def gates(self, variant: str, arch: str) -> Path:
        return self.variant_dir(variant) / f"gates-{arch}.json"

    def scan_dir(self, variant: str, arch: str) -> Path:
        return self.variant_dir(variant) / f"scan-{arch}"

    def decision(self, variant: str, arch: str) -> Path:
        return self.scan_dir(variant, arch) / DECISION

    def size(self, variant: str, arch: str) -> Path:
        return self.variant_dir(variant) / f"size-{arch}.json"

    def push(self, variant: str) -> Path:
        return self.variant_dir(variant) / "push.json"

    def promote(self, variant: str) -> Path:
        return self.variant_dir(variant) / "promote.json"

    def content(self, variant: str, arch: str) -> Path:
        return self.variant_dir(variant) / f"content-{arch}.json"

    def reproduce(self, variant: str, arch: str) -> Path:
        return self.variant_dir(variant) / f"reproduce-{arch}.json"

    def base(self, name: str, arch: str, run: str = "") -> Path:
        """The base record of one run: `invoke base` writes it, `invoke build` takes the base it names."""
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        return self.root / "bases" / (f"{slug}-{arch}" + (f"-{run}" if run else "") + ".json")

    def sign(self, variant: str) -> Path:
        return self.variant_dir(variant) / "sign.json"

    def export_verify(self, variant: str) -> Path:
        """What export-verify proved of the release's disc (invoke release writes it)."""
        return self.variant_dir(variant) / "export-verify.json"

    def release(self, variant: str) -> Path:
        """The release chain's own record: each stage's verdict, time and bytes (invoke release)."""
        return self.variant_dir(variant) / "release.json"

    def signed_dir(self, variant: str, digest: str) -> Path:
        """The .sig / .att objects of one digest as they were attached (export carries them)."""
        return self.variant_dir(variant) / "signed" / digest.replace(":", "-")

    def sign_records(self) -> list[Path]:
        return sorted(self.root.glob("*/sign.json"))

    def smoke_dir(self) -> Path:
        return self.root / "smoke"

    def prune(self) -> Path:
        return self.root / "prune" / "prune.json"

    def harbor_dir(self) -> Path:
        return self.root / "harbor"

    def exports_dir(self) -> Path:
        """One pointer per export to the --out folder holding its export.json (the report follows them)."""
        return self.root / "exports"

    def built_arches(self, variant: str, arches) -> list:
        """Those of `arches` (Arch values) that have a build record."""
        return [a for a in arches if self.build(variant, getattr(a, "value", a)).is_file()]

    def default_arches(self, variant) -> list:
        """--arch left out, in every task (build, gates, scan, release, push, export): the arches this
        variant has been built for (its build records), else this machine's. What was built is what a
        user means; an arch never built is named on purpose (an emulated build takes half an hour)."""
        from rapidship.config.matrix import Arch
        from rapidship.imagebuild.base import host_arch

        return self.built_arches(variant.id, variant.arches) or [Arch(host_arch())]

    # ---- I/O ----

    def save(self, path: Path, value: Any) -> Path:
        return save(path, value)

    def load(self, path: Path, kind: type[T], writer: str, what: str = "record") -> T:
        return load(path, kind, writer, what)


DECISION = "decision.json"


# ---- the records stages hand to each other ----
# Frozen models: a record is what a stage said, not something a later stage edits. (The export,
# size and smoke reports are still built up by their stages as dataclasses; the workspace validates
# them the same way when it reads them.)


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Rendered(Record):
    variant: str
    out_dir: str
    dockerfile: str
    dockerfile_sha256: str
    lock_sha256: str
    files: list[str] = []


class BuiltImage(Record):
    variant: str
    arch: str
    ref: str           # the engine's name of it: the release name and the run's identity (config.matrix.run_id)
    image_id: str
    size_bytes: int
    zstd_bytes: int
    layers: int
    seconds: float
    lock_sha256: str
    base: str
    log: str
    cached_steps: int = 0
    total_steps: int = 0
    extra: dict = {}
    name: str = ""     # its release name (image:tag, no run identity): what signatures and discs call it

    @property
    def release_name(self) -> str:
        return self.name or self.ref


class BaseInputs(Record):
    """What a made base is a function of: one archive state and these flags give one image id."""

    tool: str                    # "mmdebstrap 1.3.5"
    distro: str
    suite: str
    mirror: str                  # any credential hidden (redact)
    include: list[str] = []
    sources: list[str] = []      # extra apt sources (--apt-source), credentials hidden: their newer versions win
    archive_date: str = ""       # the Date of the suite's Release file the packages came from
    archive: dict[str, str] = {}  # apt list file -> sha256: the Release and Packages files used
    packages: dict[str, str] = {}  # package -> version, as dpkg installed them


class BaseRecord(Record):
    """build/bases/<name>-<arch>[-<run>].json: a base `invoke base` made, under this run's own name."""

    name: str          # the base as variants.yaml names it (what FROM says in production)
    arch: str
    ref: str           # the engine's name of it: name, arch and this run's identity (never moved by another run)
    image_id: str
    source_date_epoch: int
    seconds: float
    rootfs_bytes: int
    inputs: BaseInputs
    layers: list[dict] = []  # bottom first: name, packages, bytes, entries (imagebuild/base_layers.py)


class Reproduction(Record):
    """build/<variant>/reproduce-<arch>.json: an image rebuilt from its recorded inputs, and the verdict."""

    variant: str
    arch: str
    digest: str          # the image id asked about
    rebuilt_id: str
    reproduced: bool
    source_date_epoch: int
    revision: str
    seconds: float
    differences: list[str] = []


class StagedImage(Record):
    """A per-arch image a daemonless builder pushed to a candidate tag for later jobs to pull."""

    variant: str
    arch: str
    ref: str      # registry/repository:tag-<arch>-<suffix>
    digest: str   # sha256:... of what was pushed: later jobs pull exactly this
    builder: str
    seconds: float
    log: str


class ArchImage(Record):
    arch: str
    tag: str
    digest: str
    size: int
    media_type: str
    platform: dict
    image_id: str = ""  # the pushed manifest's config digest ("" in records from before it was kept)


class PushRecord(Record):
    variant: str
    registry: str          # host
    repository: str        # project/image inside the registry
    tag: str
    index_digest: str
    index_media_type: str
    arches: dict[str, ArchImage]
    gates_skipped: bool
    pushed_at: str
    seconds: float
    retries: int = 0


class PromoteRecord(Record):
    variant: str
    registry: str
    source: str
    target: str
    tag: str
    digest: str
    blobs_mounted: int
    blobs_copied: int
    promoted_at: str
    seconds: float
    verified_with: str = ""     # the public key's fingerprint; "" = promoted with --no-verify
    signed_objects: int = 0     # .sig / .att manifests copied with the digests
    downgraded_from: list[str] = []  # --allow-downgrade: the newer releases the tag pointed at before



class ContentEntry(Record):
    path: str
    mode: str          # octal permission bits, or "link"
    size: int
    sha256: str = ""   # files
    link: str = ""     # symlinks: the target


class ContentRecord(Record):
    """build/<variant>/content-<arch>.json: every file of the image's env, hashed (gates writes it)."""

    variant: str
    arch: str
    image_id: str
    roots: list[str]
    digest: str
    files: int
    bytes: int
    entries: list[ContentEntry]


class SignedDigest(Record):
    digest: str
    signature: str            # digest of the .sig manifest
    attestations: str = ""    # digest of the .att manifest ("" for the index: signed only)
    image_id: str = ""        # per-arch images: the config digest = the engine's image id
    predicates: dict[str, str] = {}  # predicate type -> sha256 of the signed statement


class SignRecord(Record):
    """build/<variant>/sign.json: what `invoke sign` attached, and with which key (its fingerprint)."""

    variant: str
    registry: str
    repository: str
    tag: str
    key_fingerprint: str
    key_reference: str
    index: SignedDigest
    arches: dict[str, SignedDigest]
    content_digests: dict[str, str]
    signed_at: str
    seconds: float


class ExportVerified(Record):
    """build/<variant>/export-verify.json: a disc export-verify checked, bound to the ISOs' hashes."""

    export_id: str
    iso_sha256: dict[str, str]     # ISO file name -> sha256, as export.json lists them
    verified_with: str             # the public key's fingerprint
    images: dict[str, str]         # image id the disc carries -> the id the import's archive gives it (read back)
    seconds: float


class ReleaseStage(Record):
    """One stage of `invoke release`, as the chain saw it."""

    name: str
    verdict: str                   # pass, skipped (its record was current), FAIL, not run, running
    record: str = ""               # the stage's own record
    why: str = ""                  # skipped: that it was current; ran: what was not; FAIL: what said no
    started_at: str = ""
    seconds: float = 0.0
    read_bytes: int | None = None  # None: not measured (see docs/quickstart.md, "invoke release")
    written_bytes: int | None = None
    bound: dict[str, str] = {}     # what its record was bound to (report: the records it read)


class ReleaseRecord(Record):
    """build/<variant>/release.json: the chain's record, saved at every step (the report reads it)."""

    variant: str
    arches: list[str]
    since: str = ""
    started_at: str
    seconds: float = 0.0
    passed: bool | None = None     # None while it runs
    stopped_at: str = ""           # the stage that said no
    stages: list[ReleaseStage]


class GateReport(Record):
    gate: str
    passed: bool
    reasons: list[str] = []  # why it failed; empty when it passed
    details: dict = {}  # what was measured, for the record


class GatesRecord(Record):
    """build/<variant>/gates-<arch>.json: every image gate of one built image; push reads `passed`.
    A record that contradicts itself (a gate listed twice; `passed` not what its gates say) is of
    another shape: CORRUPT for every reader, never read one way by push and another by the report."""

    ref: str
    image_id: str
    arch: str
    passed: bool
    gates: list[GateReport]
    read: str = ""  # how the image was read: its layers' facts, or whole (gates.run.read_image)

    @model_validator(mode="after")
    def _consistent(self) -> "GatesRecord":
        names = [g.gate for g in self.gates]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"gate(s) listed twice: {', '.join(twice)}")
        if self.passed != all(g.passed for g in self.gates):
            raise ValueError(f"passed is {str(self.passed).lower()}, its gates say {str(not self.passed).lower()}")
        return self


class ScanRecord(Record):
    artifact: str
    image_id: str = ""  # the config digest trivy scanned (its Metadata.ImageID); "" = unknown: never gated
    variant: str | None
    arch: str | None
    passed: bool
    reasons: list[str]
    notes: list[str]
    counts: dict[str, dict[str, int]]
    policy: dict[str, Any]
    os: str
    packages: int
    trivy_version: str
    db: dict[str, Any]
    outputs: dict[str, str | None]
    seconds: float
    decided_on: str
    verdicts: list[dict[str, Any]] = []


def read_gates(ws: Workspace, variant: str, arch: str) -> GatesRecord:
    return ws.load(ws.gates(variant, arch), GatesRecord, f"invoke gates --variant {variant} --arch {arch}",
                   "gate record")


def read_decision(ws: Workspace, variant: str, arch: str) -> ScanRecord:
    return ws.load(ws.decision(variant, arch), ScanRecord, f"invoke scan --variant {variant} --arch {arch}",
                   "scan decision")


def read_content(ws: Workspace, variant: str, arch: str) -> ContentRecord:
    return ws.load(ws.content(variant, arch), ContentRecord, f"invoke gates --variant {variant} --arch {arch}",
                   "content manifest")


def read_sign(ws: Workspace, variant: str) -> SignRecord:
    return ws.load(ws.sign(variant), SignRecord, f"invoke sign --variant {variant}", "sign record")


def gated_problems(ws: Workspace, variant: str, arch: str, image_id: str,
                   only: tuple[str, ...] | None = None) -> list[str]:
    """Why the records of one arch do not vouch for image `image_id` (empty: they do). Each of the
    build record, the gate record, the trivy decision and the content manifest must be readable,
    name exactly that image (else STALE: it speaks of an earlier build) and, for gates and scan,
    say passed. Push, promote, Harbor's gate, sign, export and the release chain all ask this one
    question; `only` names the records asked about (the chain asks per stage: "gate record")."""
    gates_cmd = f"invoke gates --variant {variant} --arch {arch}"
    readers = ((ws.build(variant, arch), BuiltImage, f"invoke build --variant {variant} --arch {arch}", "build record"),
               (ws.gates(variant, arch), GatesRecord, gates_cmd, "gate record"),
               (ws.decision(variant, arch), ScanRecord, f"invoke scan --variant {variant} --arch {arch}", "scan decision"),
               (ws.content(variant, arch), ContentRecord, gates_cmd, "content manifest"))
    problems: list[str] = []
    for path, kind, writer, what in readers:
        if only is not None and what not in only:
            continue
        try:
            record = ws.load(path, kind, writer, what)
        except RecordError as err:
            problems.append(f"{err.where}: {err.problem}")
            continue
        named = getattr(record, "image_id", "")
        of = {k: getattr(record, k) for k in ("variant", "arch") if getattr(record, k, None) is not None}
        if of != {k: want for k, want in (("variant", variant), ("arch", arch)) if k in of}:
            problems.append(f"{path}: the {what} is of {' '.join(str(x) for x in of.values())}, not of {variant} {arch}: "
                            f"run {writer} again")
        elif named != image_id:
            problems.append(f"{path}: STALE {what}: it names image {named[:19] or '(none)'}, the image to publish is "
                            f"{image_id[:19]}: run {writer} again")
        elif getattr(record, "passed", True) is not True:
            problems.append(f"{path}: passed is {json.dumps(record.passed)}")
    return problems


def as_document(value: Any) -> dict:
    """A record as the JSON object written to disk, `schema_version` first."""
    if hasattr(value, "to_json"):
        doc = value.to_json()
    elif is_dataclass(value):
        doc = asdict(value)
    elif hasattr(value, "model_dump"):
        doc = value.model_dump(mode="json")
    elif isinstance(value, dict):
        doc = dict(value)
    else:
        raise TypeError(f"not a record: {type(value).__name__}")
    version = doc.pop("schema_version", SCHEMA_VERSION)  # a record with its own schema (prune) keeps it
    return {"schema_version": version, **doc}


def save(path: Path, value: Any) -> Path:
    """Write a record atomically: readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, json.dumps(as_document(value), indent=2, default=str) + "\n")


def write_atomic(path: Path, text: str) -> Path:
    """Temp file in the same folder, then rename: no reader ever sees half of `path`."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_document(path: Path, writer: str, what: str = "record") -> dict:
    """The JSON object of a record, its schema checked; `schema_version` removed."""
    fix = f"run {writer}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordError(str(path), f"no {what}", f"{fix} first") from None
    except (OSError, UnicodeDecodeError) as err:
        raise RecordError(str(path), f"{what} cannot be read ({err.__class__.__name__})", fix) from None
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise RecordError(str(path), f"corrupt {what}: not JSON ({err.msg} at line {err.lineno})", fix) from None
    if not isinstance(doc, dict):
        raise RecordError(str(path), f"corrupt {what}: not a JSON object", fix)
    version = doc.pop("schema_version", SCHEMA_VERSION)  # records from before versioning have the same shape
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RecordError(str(path), f"corrupt {what}: schema_version {version!r}", fix)
    if version > SCHEMA_VERSION:
        raise RecordError(str(path), f"{what} has schema {version}, newer than this rapidship reads ({SCHEMA_VERSION})",
                          f"update rapidship, or {fix} with this one")
    return doc


def load(path: Path, kind: type[T], writer: str, what: str = "record") -> T:
    """Read and validate a record into `kind` (a dataclass or pydantic model)."""
    doc = read_document(path, writer, what)
    try:  # strict: "passed": "true" is not a pass, a string is not a number
        return _adapter(kind).validate_json(json.dumps(doc), strict=True)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise RecordError(str(path), f"{what} of another shape: {where}: {first['msg']}",
                          f"run {writer} again") from None


_ADAPTERS: dict[type, TypeAdapter] = {}


def _adapter(kind: type) -> TypeAdapter:
    if kind not in _ADAPTERS:
        _ADAPTERS[kind] = TypeAdapter(kind)
    return _ADAPTERS[kind]


# ---- the cluster smoke (smoke.cluster writes it: build/smoke/<v>-<a>-cluster<N>[-kill]-uid<uid>.json) ----


class ClusterTiers(Record):
    """One worker's tiers at one moment of the cluster smoke, as the worker reported them."""

    worker: str                 # its dask name, which is its container's name
    memory_keys: int
    memory_bytes: int
    disk_keys: int
    disk_bytes: int
    spill_files: int            # non-empty files under its local directory (the 0700 spill mount)
    spill_file_bytes: int
    sent_bytes: int             # bytes it sent to other workers so far
    rss_peak_bytes: int
    oom_kills: int | None = None  # OOM kills its memory cgroup counted (None: unreadable)


class ScrapedMetrics(Record):
    """A worker's /metrics as the cluster smoke scraped it (smoke/scrape.py): series -> value."""
    target: str                 # host:port on the cluster's internal network
    scrapes: int
    failures: int
    last_error: str | None = None
    highest: dict[str, float] = {}   # the highest value each series took over the run
    last: dict[str, float] = {}      # its value at the last scrape that answered
    # scrapes by other readers after the job's end values were in (the Prometheus --metrics-targets
    # told); None: not waited for (no targets file, or the worker never answered after the job)
    others_since_end: int | None = None


class ClusterContainer(Record):
    name: str
    role: str                   # scheduler, worker or client
    memory_bytes: int           # its --memory (= --memory-swap)
    exit_code: int | None       # None: still running when the job ended (scheduler, workers)
    oom_killed: bool            # State.OOMKilled, or an engine OOM event for it
    oom_events: int = 0         # OOM kills the engine reported for it while the job ran
    killed_by_smoke: bool = False
    networks: list[str] = []
    published_ports: int = 0
    spill_peak_files: int = 0   # workers: the most files seen in its host spill dir while the job ran
    spill_peak_bytes: int = 0
    metrics: ScrapedMetrics | None = None   # workers, with --metrics: its own /metrics over the run


class ClusterSmokeRecord(Record):
    variant: str
    arch: str
    ref: str
    uid: int
    workers: int
    network: str
    network_internal: bool
    memory_bytes: int           # each worker's cap
    memory_limit: int           # each worker's dask --memory-limit
    service_memory_bytes: int   # the scheduler's and the client's cap
    data_bytes: int
    kill_worker: bool
    killed: str | None          # the worker container the smoke docker-killed
    killed_after_s: float | None
    argv: dict[str, list[str]]
    containers: list[ClusterContainer]
    tiers: dict[str, list[ClusterTiers]]   # phase (persisted, shuffled) -> one row per worker
    expected: int | None
    got: int | None
    result_exact: bool
    seconds: float
    job_seconds: dict[str, float]
    verdict: str
    problems: list[str]
    notes: list[str]
    report: dict | None
    logs_tail: dict[str, str]
    metrics_targets: str | None = None      # --metrics-targets: the Prometheus file_sd file the run wrote
