"""Write a small trivy vulnerability DB (schema 2) for tests and offline demos.

Trivy reads `<cache-dir>/db/trivy.db` (a bbolt file) and `<cache-dir>/db/metadata.json` when run
with `--skip-db-update`. Production sites mirror the real DB into Harbor (see docs/scan.md); this
writer exists so the gate can be proven on a real trivy run where that DB cannot be downloaded.

Layout trivy 0.59 reads:
  bucket "<source>" (e.g. "debian 12") / bucket "<source package>" / "<CVE>" -> {"FixedVersion": ...}
  bucket "vulnerability" / "<CVE>" -> {"Title", "Description", "Severity", ...}
  bucket "data-source" / "<source>" -> {"ID", "Name", "URL"}

The PyPI `boltdb` package writes valid pages but leaves the meta-page checksum at 0, which bbolt
rejects; `seal_meta_pages` fills it in (FNV-1a 64 over the meta struct before the checksum field).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from rapidship.errors import ConfigError

PAGE_HEADER = 16  # id u64, flags u16, count u16, overflow u32
META_FORMAT = struct.Struct("<IIIIQQQQQQ")  # magic version pagesize flags root seq freelist pgid txid checksum
META_MAGIC = 0xED0CDAED
SEVERITIES = ("UNKNOWN", "LOW", "MEDIUM", "HIGH", "CRITICAL")

# Data sources trivy names by OS release; add more as sites need them.
DATA_SOURCES = {
    "debian": {"ID": "debian", "Name": "Debian Security Tracker",
               "URL": "https://salsa.debian.org/security-tracker-team/security-tracker"},
    "ubuntu": {"ID": "ubuntu", "Name": "Ubuntu CVE Tracker", "URL": "https://git.launchpad.net/ubuntu-cve-tracker"},
}


@dataclass(frozen=True)
class Advisory:
    """One vulnerable package: `package` is the SOURCE package name trivy looks up for dpkg."""

    source: str  # bucket name, e.g. "debian 12"
    package: str
    vulnerability_id: str
    severity: str
    fixed_version: str | None = None  # None: no fix published (trivy reports it as affected)
    title: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ConfigError(f"advisory {self.vulnerability_id}", f"severity {self.severity!r} is unknown",
                              f"use one of {', '.join(SEVERITIES)}")
        if self.source.split(" ")[0] not in DATA_SOURCES:
            raise ConfigError(f"advisory {self.vulnerability_id}", f"data source {self.source!r} is not known",
                              f"use one of: {', '.join(DATA_SOURCES)} followed by the release, e.g. 'debian 12'")


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bit: the hash bbolt uses for its meta-page checksum."""
    h = 0xCBF29CE484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def meta_checksum(meta: bytes) -> int:
    """The checksum bbolt expects: FNV-1a over the meta struct up to (not including) the checksum."""
    return fnv1a64(meta[: META_FORMAT.size - 8])


def seal_meta_pages(db: bytearray, page_size: int = 4096) -> bytearray:
    """Pure: write the checksum into both meta pages (0 and 1) of a bbolt file image."""
    for page in (0, 1):
        start = page * page_size + PAGE_HEADER
        fields = list(META_FORMAT.unpack_from(db, start))
        if fields[0] != META_MAGIC:
            raise ValueError(f"page {page} is not a bbolt meta page (magic {fields[0]:#x})")
        fields[-1] = meta_checksum(bytes(db[start:start + META_FORMAT.size]))
        META_FORMAT.pack_into(db, start, *fields)
    return db


def write_db(cache_dir: Path, advisories: list[Advisory], now: datetime | None = None) -> Path:
    """Write `<cache_dir>/db/{trivy.db,metadata.json}`; returns the db directory."""
    from boltdb import BoltDB  # test/demo dependency, imported only where a DB is written

    now = now or datetime.now(timezone.utc)
    db_dir = Path(cache_dir) / "db"
    db_dir.mkdir(parents=True, exist_ok=True)
    path = db_dir / "trivy.db"
    path.unlink(missing_ok=True)
    db = BoltDB(str(path))
    try:
        with db.update() as tx:
            sources = tx.create_bucket(b"data-source")
            vulns = tx.create_bucket(b"vulnerability")
            buckets: dict[str, object] = {}
            for adv in sorted(advisories, key=lambda a: (a.source, a.package, a.vulnerability_id)):
                if adv.source not in buckets:
                    buckets[adv.source] = tx.create_bucket(adv.source.encode())
                    sources.put(adv.source.encode(), _json(DATA_SOURCES[adv.source.split(" ")[0]]))
                src = buckets[adv.source]
                pkg = src.bucket(adv.package.encode()) or src.create_bucket(adv.package.encode())
                value = {"FixedVersion": adv.fixed_version} if adv.fixed_version else {}
                pkg.put(adv.vulnerability_id.encode(), _json(value))
                vulns.put(adv.vulnerability_id.encode(), _json({
                    "Title": adv.title or f"{adv.package}: planted test vulnerability",
                    "Description": "Written by rapidship.gates.trivydb for tests and offline demos.",
                    "Severity": adv.severity}))
    finally:
        db.close()
        db.close = lambda: None  # the library's __del__ would close (and unlock) a second time
    path.write_bytes(seal_meta_pages(bytearray(path.read_bytes())))
    stamp = now.replace(microsecond=0)
    (db_dir / "metadata.json").write_text(json.dumps({
        "Version": 2, "NextUpdate": _iso(stamp + timedelta(days=1)), "UpdatedAt": _iso(stamp),
        "DownloadedAt": _iso(stamp)}))
    return db_dir


def _json(value: dict) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_advisories(path: Path) -> list[Advisory]:
    """A yaml list of {source, package, id, severity, fixed?, title?} -> advisories (demo DBs)."""
    from rapidship.config.yamlconf import load_yaml, read_config

    # the shared loader: unreadable, binary or oversized files, alias bombs, bad YAML: one ConfigError
    doc = load_yaml(read_config(Path(path), "pass the advisories file (--advisories)"), str(path))
    if not isinstance(doc, list):
        raise ConfigError(str(path), "expected a list of advisories",
                          "write entries like - {source: debian 12, package: zlib, id: CVE-2099-0001, severity: HIGH, fixed: 1:1.3-1}")
    out = []
    for i, entry in enumerate(doc):
        missing = [k for k in ("source", "package", "id", "severity") if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise ConfigError(f"{path}: [{i}]", f"missing {', '.join(missing)}", "each advisory needs source, package, id, severity")
        fixed = entry.get("fixed")
        out.append(Advisory(source=str(entry["source"]), package=str(entry["package"]), vulnerability_id=str(entry["id"]),
                            severity=str(entry["severity"]).upper(), fixed_version=str(fixed) if fixed else None,
                            title=str(entry.get("title", ""))))
    return out
