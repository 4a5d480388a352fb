"""The typed summary a release report is made of (pure data; report.json is this, as JSON).

Every verdict on the page is a `Cell`: a status and one line saying why. A record that was not
there is MISSING ("not run"), one that could not be read is CORRUPT, one that speaks of another
image than the build record is STALE: none of them ever reads as a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PASS, FAIL, MISSING, CORRUPT, STALE = "pass", "fail", "missing", "corrupt", "stale"
SITE = "site"  # no record of a check only a site can run (Harbor's scan, a GPU smoke): never a pass either
# What the page prints for each status (it must read in black and white, without the colours).
LABELS = {PASS: "PASS", FAIL: "FAIL", MISSING: "NOT RUN", CORRUPT: "CORRUPT", STALE: "STALE", SITE: "SITE ONLY"}
MARKS = {PASS: "\u2713", FAIL: "\u2717", MISSING: "\u2013", CORRUPT: "!", STALE: "~", SITE: "\u25c7"}
# Worst first: a row, a column or the release is as good as its worst cell.
SEVERITY_OF_STATUS = (FAIL, CORRUPT, STALE, MISSING, SITE, PASS)

# The matrix columns: the build, the image gates (gates-<arch>.json), trivy, Harbor, smoke, signature.
IMAGE_GATES = ("size", "labels", "user", "suid", "secrets")
COLUMNS = ("build", *IMAGE_GATES, "trivy", "harbor", "smoke", "signature")

SEVERITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW", "UNKNOWN")
OUTCOMES = ("fail", "allowlisted", "unfixed-ignored", "below-threshold", "not-gated")
EXPIRY_WARNING_DAYS = 30


def worst(statuses) -> str:
    found = set(statuses)
    return next((s for s in SEVERITY_OF_STATUS if s in found), MISSING)


@dataclass(frozen=True)
class RecordState:
    """One record file the report looked for."""

    path: str
    what: str               # "gate record", "scan decision", ...
    state: str              # "ok", MISSING or CORRUPT
    message: str = ""       # why it is missing or corrupt (the workspace's error)
    writer: str = ""        # the command that writes it


@dataclass(frozen=True)
class Cell:
    status: str
    detail: str = ""    # printed in the cell
    note: str = ""      # more, on hover (the tooltip): e.g. the command that writes a missing record

    @property
    def title(self) -> str:
        return " - ".join(t for t in (self.detail, self.note) if t)

    @property
    def label(self) -> str:
        return LABELS[self.status]

    @property
    def mark(self) -> str:
        return MARKS[self.status]


@dataclass(frozen=True)
class ImageRow:
    """One variant x arch of the matrix and every check's verdict on it."""

    variant: str
    arch: str
    ref: str                # the released name: registry/repository:tag@digest once pushed, else image:tag
    image_id: str
    cells: dict[str, Cell]
    engine_ref: str = ""    # the engine's name of the build (with the run's id), on hover

    @property
    def status(self) -> str:
        return worst(c.status for c in self.cells.values())


@dataclass(frozen=True)
class SizeRow:
    variant: str
    arch: str
    image_bytes: int | None     # uncompressed (the engine's size), None: no build record
    zstd_bytes: int | None      # the normalised archive | zstd -3 (the build record's)
    budget_bytes: int
    cell: Cell

    @property
    def name(self) -> str:
        return f"{self.variant} {self.arch}"


@dataclass(frozen=True)
class PathBytes:
    path: str
    bytes: int
    why: str = ""  # a trim's reason


@dataclass(frozen=True)
class PruneArch:
    arch: str
    before: int
    after: int


@dataclass(frozen=True)
class PruneFile:
    path: str
    status: str
    bytes_before: int
    bytes_after: int
    note: str


@dataclass(frozen=True)
class EnvLayer:
    name: str
    why: str
    bytes: int
    distributions: str  # "numpy 2.4.6, ..."


@dataclass(frozen=True)
class DeltaCostRow:
    distribution: str
    carried: int
    own: int
    ratio: float
    within_goal: bool
    refed: int = 0  # tar bytes an import writes again (imagebuild/delta_cost.py)


@dataclass(frozen=True)
class BytesReport:
    """Where the bytes of one image are (its size report, size-<arch>.json)."""

    variant: str
    arch: str
    state: RecordState
    files_bytes: int = 0
    files: int = 0
    largest_dirs: list[PathBytes] = field(default_factory=list)
    largest_files: list[PathBytes] = field(default_factory=list)
    trims_style: str = ""
    trims_before: int = 0
    trims_saved: int = 0
    trims_pyc: int = 0
    trims: list[PathBytes] = field(default_factory=list)       # pattern -> bytes saved
    prune_keep: list = field(default_factory=list)             # the GPU archs kept ([] = nothing pruned)
    prune_saved: int = 0
    prune_before: int = 0
    prune_after: int = 0
    prune_counts: dict[str, int] = field(default_factory=dict)  # pruned, refused, with_device_code
    prune_archs: list[PruneArch] = field(default_factory=list)
    prune_files: list[PruneFile] = field(default_factory=list)
    layer_budget: int = 0                                      # the env's layer plan ([] = none in this image)
    env_layers: list[EnvLayer] = field(default_factory=list)
    delta_goal: str = ""                                       # the delta-cost table ([] = not measured)
    delta_misses: int = 0
    delta_rows: list[DeltaCostRow] = field(default_factory=list)
    delta_per_year: str = ""                                   # delta_cost.per_year_words ("" = no rates kept)

    @property
    def name(self) -> str:
        return f"{self.variant} {self.arch}"


@dataclass(frozen=True)
class AllowRow:
    """One allowlist entry of the policy a scan was decided under, and which scans carried it."""

    id: str
    package: str
    reason: str
    expires: str
    days_left: int | None       # from the report's day; None: not a date
    images: list[str]

    @property
    def state(self) -> str:
        if self.days_left is None or self.days_left < 0:
            return "expired"
        return "expiring" if self.days_left <= EXPIRY_WARNING_DAYS else "ok"


@dataclass(frozen=True)
class ScanFinding:
    """One finding of a scan, whatever its outcome (LOW ones below the threshold too)."""

    id: str
    severity: str
    what: str       # "gzip 1.12-1 (fixed in 1.12-1+fix1)", or the target and title of a misconfiguration
    outcome: str


@dataclass(frozen=True)
class ScanRow:
    variant: str
    arch: str
    cell: Cell
    artifact: str = ""
    trivy_version: str = ""
    db_updated: str = ""
    decided_on: str = ""
    threshold: str = ""
    policy_source: str = ""
    os: str = ""
    packages: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)   # severity -> outcome -> n
    failing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    findings: list[ScanFinding] = field(default_factory=list)
    sbom: str = ""

    @property
    def name(self) -> str:
        return f"{self.variant} {self.arch}"

    def found(self, severity: str) -> int:
        return sum(self.counts.get(severity, {}).values())

    def outcome(self, outcome: str) -> int:
        return sum(c.get(outcome, 0) for c in self.counts.values())


@dataclass(frozen=True)
class SmokeStage:
    name: str
    data_bytes: int
    device_bytes: int
    host_bytes: int
    disk_bytes: int
    spill_files: int
    spill_file_bytes: int
    spill_tier: str
    result_ok: bool
    seconds: float | None
    error: str = ""

    @property
    def reached_disk(self) -> bool:
        return self.disk_bytes > 0 and self.spill_files > 0 and self.spill_file_bytes > 0


@dataclass(frozen=True)
class ScrapedWorker:
    """What one cluster worker's /metrics said over the run (invoke smoke --cluster N --metrics):
    each series' highest value; None where the worker never reported it."""
    worker: str
    scrapes: int
    failures: int
    cgroup_peak_bytes: float | None
    working_set_bytes: float | None
    spill_dir_bytes: float | None
    spill_written_bytes: float | None    # dask's own spill counter (disk-write)
    oom_kills: float | None


@dataclass(frozen=True)
class SmokeRun:
    file: str
    state: RecordState
    variant: str = ""
    arch: str = ""
    mode: str = ""
    uid: int | None = None
    memory_bytes: int | None = None
    image: str = ""
    cell: Cell = Cell(MISSING)
    seconds: float | None = None
    stages: list[SmokeStage] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    negative: str = ""  # a deliberate negative run (no spill mount, spilling off, ...): listed, never the verdict
    scraped: list[ScrapedWorker] = field(default_factory=list)  # the cluster smoke with --metrics

    @property
    def name(self) -> str:
        base = f"{self.variant} {self.arch} {self.mode} uid {self.uid}" if self.variant else self.file
        return f"{base} (deliberate negative: {self.negative})" if self.negative else base


@dataclass(frozen=True)
class SignedArch:
    arch: str
    digest: str
    signature: str
    attestations: str
    image_id: str


@dataclass(frozen=True)
class SignRow:
    variant: str
    sign: RecordState
    push: RecordState
    promote: RecordState
    key_fingerprint: str = ""
    signed_at: str = ""
    index_digest: str = ""
    arches: list[SignedArch] = field(default_factory=list)
    pushed_to: str = ""          # registry/repository:tag
    pushed_index: str = ""
    gates_skipped: bool = False
    promoted_to: str = ""
    promoted_digest: str = ""
    promote_verified_with: str = ""


@dataclass(frozen=True)
class ExportImage:
    ref: str
    arch: str
    image_id: str
    size_bytes: int
    signed_digest: str
    variant: str
    stale: str = ""  # the build record names another image: both ids, side by side


@dataclass(frozen=True)
class ExportVolume:
    number: int
    iso: str
    iso_bytes: int
    iso_sha256: str


@dataclass(frozen=True)
class ExportRow:
    state: RecordState
    export_id: str = ""
    created: str = ""
    media: str = ""
    media_bytes: int = 0
    tar_bytes: int = 0
    archive_bytes: int = 0
    archive_sha256: str = ""
    key_fingerprint: str = ""
    images: list[ExportImage] = field(default_factory=list)
    volumes: list[ExportVolume] = field(default_factory=list)
    verify: Cell = Cell(MISSING)  # what export-verify proved of these ISO hashes (its record, bound to them)


@dataclass(frozen=True)
class BaseImage:
    stage: str
    ref: str
    image_id: str
    repo_digests: list[str]


@dataclass(frozen=True)
class ImageVersions:
    arch: str
    built: bool
    image_id: str = ""
    lock_sha256: str = ""           # the build record's
    label_lock_sha256: str = ""     # io.rapidship.lock.sha256 on the image (from the labels gate)
    labels: dict[str, str] = field(default_factory=dict)   # rapids, cuda, python, revision, created
    bases: list[BaseImage] = field(default_factory=list)
    content_digest: str = ""
    content_files: int = 0


@dataclass(frozen=True)
class VersionRow:
    variant: str
    rapids: str
    cuda: str
    python: str
    os: str
    flavour: str
    gpu_archs: str
    budget_bytes: int
    rendered_lock_sha256: str
    render: RecordState
    images: list[ImageVersions]


@dataclass(frozen=True)
class OutOfScope:
    """A variant (or some of its arches) that is not in this release: listed once, with why."""

    variant: str
    arches: list[str]
    why: str


@dataclass(frozen=True)
class Scope:
    """The variants x arches a release contains, and where that came from."""

    source: str                     # "flags", "push records", "build records" or "matrix"
    images: list[tuple[str, str]]
    out_of_scope: list[OutOfScope] = field(default_factory=list)


@dataclass(frozen=True)
class ReleaseStep:
    """One stage of `invoke release`'s last run, as its record (build/<variant>/release.json) says."""

    name: str
    verdict: str          # pass, skipped, FAIL, not run, running
    started_at: str
    seconds: float
    read_bytes: int | None
    written_bytes: int | None
    record: str
    why: str


@dataclass(frozen=True)
class ReleaseRun:
    variant: str
    arches: list[str]
    started_at: str
    seconds: float
    passed: bool | None   # None: it was still running when the report read it (the report is a stage of it)
    stopped_at: str
    since: str
    steps: list[ReleaseStep]


@dataclass(frozen=True)
class Summary:
    generated_at: str
    today: str
    commit: str
    workspace: str
    rows: list[ImageRow]
    sizes: list[SizeRow]
    bytes: list[BytesReport]
    scans: list[ScanRow]
    allowlist: list[AllowRow]
    smoke: list[SmokeRun]
    signatures: list[SignRow]
    exports: list[ExportRow]
    versions: list[VersionRow]
    records: list[RecordState]
    scope: Scope = Scope("matrix", [])
    releases: list[ReleaseRun] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.rows for c in r.cells.values() if c.status == status)

    @property
    def status(self) -> str:
        return worst(r.status for r in self.rows)

    @property
    def site_checks(self) -> list[str]:
        """'harbor (cpu-debian12 amd64)': each check without a record that only a site can run."""
        return [f"{c} ({r.variant} {r.arch})" for r in self.rows for c, cell in r.cells.items() if cell.status == SITE]

    @property
    def corrupt(self) -> list[RecordState]:
        return [r for r in self.records if r.state == CORRUPT]

    @property
    def missing(self) -> list[RecordState]:
        return [r for r in self.records if r.state == MISSING]
