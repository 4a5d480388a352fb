"""Builder side: install a conda lock into a prefix, exactly as locked, without solving.

Runs inside the builder stage with the installer venv's python (py-rattler + stdlib only; this
file is copied into the build context, rapidship itself is not installed there). The lock names
each package's channel, URL and sha256; the channel base is rewritten to the configured mirror,
every download is verified against the lock's sha256 (a mismatch stops the build), and py-rattler
links the verified files into the prefix. The parsing helpers are shared with `rapidship.lock.conda`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import urllib.parse
import urllib.request
from pathlib import Path

LOCK_FORMAT = 1
_TOKEN_SEGMENT = re.compile(r"/t/[^/]+")
_PLAIN_HOST = re.compile(r"^([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$")


# A layer's part of a lock may carry python's record as a companion (render/layer_plan.py
# conda_lock_parts): py-rattler reads the env's Python version from it to lay out `noarch: python`
# packages, and, told to ignore it, neither fetches nor links it.
COMPANION = "/nonexistent/companion"


class LockInstallError(Exception):
    """One clear line for the build log; never carries a URL with credentials."""


def public_url(url: str) -> str:
    """The URL without credentials: no user:password@, no anaconda.org-style /t/<token> segment."""
    parts = urllib.parse.urlsplit(url.strip())
    host = parts.netloc.rpartition("@")[2]  # nothing before the last "@" is kept: it may be a credential
    if not _PLAIN_HOST.match(host):  # "host:5000@user:password": what follows "@" is no host either
        host = "***"
    path = _TOKEN_SEGMENT.sub("", parts.path).rstrip("/")
    return urllib.parse.urlunsplit((parts.scheme, host, path, "", ""))


def parse_channels(lines: list[str]) -> dict[str, str]:
    """Channel mirror configuration -> {channel name: base URL}.

    One entry per line (or per list item): `NAME=URL`, or a bare URL whose last path segment is
    the channel name (https://mirror/conda/conda-forge). Blank lines and # comments are skipped.
    """
    out: dict[str, str] = {}
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, url = line.partition("=")
        if sep and "://" not in name:
            name, url = name.strip(), url.strip()
        else:
            url = line
            name = public_url(url).rsplit("/", 1)[-1]
        if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url) or not name:
            raise LockInstallError(f"channel entry {public_url(line) if '://' in line else line!r} is not "
                                   "NAME=URL or a URL ending in the channel name")
        out[name] = url.rstrip("/")
    return out


def read_lock(text: str) -> tuple[dict[str, str], list[dict]]:
    """Lock text -> (header fields, package records). Header lines are `# key: value`."""
    header: dict[str, str] = {}
    records: list[dict] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if sep:
                header.setdefault(key.strip(), value.strip())
            continue
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise LockInstallError(f"lock line {number} is not JSON ({err.msg})") from None
        missing = {"name", "version", "build", "subdir", "fn", "channel", "url", "sha256"} - set(rec)
        if missing:
            raise LockInstallError(f"lock line {number} ({rec.get('name', '?')}) lacks {', '.join(sorted(missing))}")
        records.append(rec)
    if header.get("lock-format") != str(LOCK_FORMAT):
        raise LockInstallError(f"not a rapidship conda lock of format {LOCK_FORMAT} (lock-format: {header.get('lock-format')})")
    return header, records


def mirror_url(record: dict, mirrors: dict[str, str]) -> str:
    """Where to fetch a locked package: the mirror of its channel, else the URL in the lock."""
    base = mirrors.get(record["channel"])
    if base is None:
        return record["url"]
    return f"{base}/{record['subdir']}/{record['fn']}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_verified(record: dict, url: str, cache: Path) -> Path:
    """Download (or reuse from the cache) one package file and prove it is the locked one."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"{record['sha256']}-{record['fn']}"
    if target.is_file() and sha256_of(target) == record["sha256"]:
        return target
    partial = target.with_suffix(target.suffix + ".part")
    request = _request(url)
    try:
        with urllib.request.urlopen(request, timeout=120) as resp, open(partial, "wb") as out:
            shutil.copyfileobj(resp, out, 1 << 20)
    except OSError as err:
        partial.unlink(missing_ok=True)
        raise LockInstallError(f"{record['fn']}: download from {public_url(url)} failed: "
                               f"{getattr(err, 'reason', err)}") from None
    got = sha256_of(partial)
    if got != record["sha256"]:
        partial.unlink()
        raise LockInstallError(f"{record['fn']}: sha256 mismatch from {public_url(url)}: lock says "
                               f"{record['sha256']}, got {got}; the mirror serves another file")
    partial.replace(target)
    return target


def _request(url: str) -> urllib.request.Request:
    """user:password@ in a mirror URL becomes a Basic auth header (urllib does not do it itself)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return urllib.request.Request(url)
    import base64

    plain = public_url(url)  # drops userinfo and keeps the path
    bare = urllib.parse.urlunsplit((parts.scheme, urllib.parse.urlsplit(plain).netloc, parts.path, "", ""))
    token = base64.b64encode(f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
                             .encode()).decode()
    return urllib.request.Request(bare, headers={"Authorization": f"Basic {token}"})


def to_repodata_record(record: dict, local: Path):
    """A lock record as py-rattler's RepoDataRecord, pointing at the verified local file."""
    import rattler

    package = rattler.PackageRecord(
        name=record["name"], version=record["version"], build=rattler.BuildString(record["build"]),
        build_number=int(record.get("build_number", 0)), subdir=record["subdir"],
        noarch=rattler.NoArchType(record["noarch"]) if record.get("noarch") else None, depends=list(record.get("depends", [])),
        constrains=list(record.get("constrains", [])), sha256=bytes.fromhex(record["sha256"]),
        md5=bytes.fromhex(record["md5"]) if record.get("md5") else None, size=record.get("size"),
        license=record.get("license"),
    )
    return rattler.RepoDataRecord(package, record["fn"], local.resolve().as_uri(), record["url"].rsplit("/", 2)[0])


def install(lock: Path, prefix: Path, mirrors: dict[str, str], cache: Path, platform: str | None = None) -> int:
    import asyncio

    import rattler

    header, records = read_lock(lock.read_text())
    platform = platform or header.get("platform")
    if prefix.exists() and any(prefix.iterdir()):
        raise LockInstallError(f"prefix {prefix} is not empty: the lock installs into a fresh prefix")
    local = []
    for record in records:  # a companion (a layer's python) is read, never fetched nor linked
        path = Path(COMPANION) if record.get("companion") else fetch_verified(record, mirror_url(record, mirrors), cache / "downloads")
        local.append(to_repodata_record(record, path))
    try:
        asyncio.run(rattler.install(local, target_prefix=str(prefix), cache_dir=str(cache / "rattler"),
                                    platform=rattler.Subdir(platform) if platform else None,
                                    ignored_packages={r["name"] for r in records if r.get("companion")},
                                    execute_link_scripts=False, show_progress=False))
    except Exception as err:  # py-rattler raises its own exception types
        detail = " / ".join(line.strip() for line in str(err).splitlines() if line.strip())
        raise LockInstallError(f"py-rattler could not link the env into {prefix}: {detail}") from None
    _record_public_urls(prefix, {r["fn"]: r["url"] for r in records})
    return sum(not r.get("companion") for r in records)


def _record_public_urls(prefix: Path, urls: dict[str, str]) -> None:
    """conda-meta says where a package came from: the lock's public URL, not the local cache file."""
    for meta in (prefix / "conda-meta").glob("*.json"):
        data = json.loads(meta.read_text())
        if data.get("fn") in urls:
            data["url"] = urls[data["fn"]]
            data["channel"] = urls[data["fn"]].rsplit("/", 2)[0]
            meta.write_text(json.dumps(data, indent=1, sort_keys=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", type=Path, required=True)
    parser.add_argument("--prefix", type=Path, required=True)
    parser.add_argument("--channels-secret", type=Path, help="file of channel mirrors, one NAME=URL or URL a line")
    parser.add_argument("--cache", type=Path, default=Path("/root/.cache/rapidship-conda"))
    args = parser.parse_args(argv)
    try:
        lines = args.channels_secret.read_text().splitlines() if args.channels_secret and args.channels_secret.is_file() else []
        mirrors = parse_channels(lines)
        count = install(args.lock, args.prefix, mirrors, args.cache)
    except LockInstallError as err:
        print(f"install_lock: {err}", file=sys.stderr)
        return 2
    via = ", ".join(f"{name} -> {public_url(url)}" for name, url in sorted(mirrors.items())) or "the lock's URLs"
    print(f"install_lock: {count} packages from {args.lock.name} into {args.prefix} (channels: {via})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
