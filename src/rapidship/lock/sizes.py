"""The wheel sizes of a pip lock, kept beside it: what the layer plan weighs distributions by.

`invoke lock` (and `invoke lock-sizes` for a lock made before) asks the index for each locked
package's files (the JSON simple API, PEP 691, with sizes, PEP 700) and writes
`locks/<env>/wheel-sizes.json`: for each distribution its version, the size of its largest locked
wheel (any arch: one plan serves every arch of a Dockerfile), whether every locked wheel is pure
Python (`none-any`) and `installed_bytes`: the most any locked wheel's members weigh uncompressed,
read from each wheel's zip central directory by Range requests for its tail (lock/installed.py).
An image layer holds the installed files, not the deflated wheel, and the ratio varies from 1.3x
(nvidia-cusparse-cu12) to 17.7x (xyzservices): numpy's 17 MB wheel is 57 MB installed. Render
refuses a record whose distributions or versions are not the lock's, or of another FORMAT.
Beside them, `releases_per_year`: how many releases the index shows in the year before the locked
version's series (its major version: 14.x, 2.x, or a year of a date-versioned project) began, from
the files' upload times (PEP 700). The layer plan orders layers by it per installed byte
(render/layer_plan.py); counting before the series began keeps it the same for every version of the
series, up or down, so a patch release plans its layers as its release did. A minor series moved
it: cupy 14.1.1 counted 5, 14.2.0 counted 4, and the patch moved cupy's layer. The plan weighs that
rate by `order_bytes`, the installed bytes when the series was first recorded here, and groups small
distributions by `order_wheel_bytes`, the wheels then: a record made again (`invoke lock` after a
pin, up or down) keeps these figures of a distribution whose major series it still pins, and `order_from` names the version they were read at; no first wheel of a
series would do (NVIDIA's 12.9.41 nvjitlink wheel weighs 7x its 12.9.86 one). FORMAT 2: order_bytes
are installed bytes (format 1 weighed the wheel); a record of another format carries nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from rapidship.errors import ConfigError

FORMAT = 2  # 2: order_bytes are installed bytes, 1 weighed wheels
# the series' figures a record made again keeps: the order's, and the wheels the plan groups by
ORDER_KEYS = ("releases_per_year", "order_bytes", "order_wheel_bytes", "order_from")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sizes_path(locks: Path, env: str) -> Path:
    return locks / env / "wheel-sizes.json"


def locked_hashes(text: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Pure: a hashed pip lock -> {canonical name: (version, sha256 of each locked file)}."""
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    current = None
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            pin = _PIN.match(line)
            current = canonical(pin.group(1)) if pin else None
            if pin:
                found[current] = (pin.group(2), ())
        if current is not None:
            version, hashes = found[current]
            found[current] = (version, hashes + tuple(_HASH.findall(line)))
    return found


def releases_per_year(version: str, files: list[dict]) -> int:
    """Pure: final releases first uploaded in the 365 days before `version`'s series (its major
    version) first appeared on the index; 0 where the index gives no upload times."""
    first: dict[Version, datetime] = {}
    for f in files:
        name, when = f.get("filename", ""), f.get("upload-time")
        try:
            found = parse_wheel_filename(name)[1] if name.endswith(".whl") else parse_sdist_filename(name)[1]
            at = datetime.fromisoformat(str(when).replace("Z", "+00:00"))
        except (InvalidWheelFilename, InvalidSdistFilename, ValueError, TypeError):
            continue
        if not (found.is_prerelease or found.is_devrelease):
            first[found] = min(first.get(found, at), at)
    series = [at for v, at in first.items() if v.release[:1] == Version(version).release[:1]]
    if not series:
        return 0
    began = min(series)
    return sum(began - timedelta(days=365) <= at < began for at in first.values())


def _carried(previous: dict | None, version: str) -> dict | None:
    """A previous record's order figures where it pinned the same major series."""
    if previous and all(k in previous for k in ORDER_KEYS) and \
            Version(previous["version"]).release[:1] == Version(version).release[:1]:
        return {key: previous[key] for key in ORDER_KEYS}
    return None


def locked_wheels(lock_text: str, files_by_name: dict[str, list[dict]]) -> list[dict]:
    """Pure: the index's entries of the lock's wheels (those the index lists)."""
    return [f for name, (_, hashes) in sorted(locked_hashes(lock_text).items()) for f in files_by_name.get(name, [])
            if f.get("hashes", {}).get("sha256") in hashes and f.get("filename", "").endswith(".whl")]


def record_from_index(env: str, lock_text: str, files_by_name: dict[str, list[dict]], where: str,
                      installed: dict[str, int], previous: dict[str, dict] | None = None) -> dict:
    """Pure: the lock, the index's file lists (PEP 691 `files`, keyed by canonical name) and each
    locked wheel's installed bytes (by its sha256) -> the record, each distribution's order figures
    carried from `previous` (the record this one replaces, of this FORMAT) within its major series.
    ConfigError naming the package when the index does not list a locked file or its size."""
    distributions = {}
    for name, (version, hashes) in sorted(locked_hashes(lock_text).items()):
        by_hash = {f.get("hashes", {}).get("sha256"): f for f in files_by_name.get(name, [])}
        wheels = [by_hash.get(h) for h in hashes]
        missing = [h for h, f in zip(hashes, wheels) if f is None]
        if missing or not hashes:
            raise ConfigError(f"{where}: {name}=={version}", f"the index lists no file with sha256 {missing[0] if missing else '(none locked)'}",
                              "lock again against this index (invoke lock), or pass the index the lock was made from")
        sized = [f for f in wheels if f["filename"].endswith(".whl")]
        if any(not isinstance(f.get("size"), int) for f in sized):
            raise ConfigError(f"{where}: {name}", "the index serves no file sizes (PEP 700)",
                              "pass an index that does (PyPI does) with --index-url")
        wheel_bytes = max((f["size"] for f in sized), default=0)
        installed_bytes = max((installed[f["hashes"]["sha256"]] for f in sized), default=0)
        order = _carried((previous or {}).get(name), version) or {
            "releases_per_year": releases_per_year(version, files_by_name.get(name, [])),
            "order_bytes": installed_bytes, "order_wheel_bytes": wheel_bytes, "order_from": version}
        distributions[name] = {"version": version, "wheel_bytes": wheel_bytes, "installed_bytes": installed_bytes,
                               "pure": all(f["filename"].endswith("-none-any.whl") for f in sized),
                               "wheels": len(sized)} | order
    return {"format": FORMAT, "env": env, "lock_sha256": hashlib.sha256(lock_text.encode()).hexdigest(),
            "distributions": distributions}


def fetch_files(names: list[str], index_url: str) -> dict[str, list[dict]]:
    """Thin edge: each name's file list from the index's JSON simple API (each file's url absolute)."""
    from urllib.parse import urljoin

    import requests

    out = {}
    for name in names:
        url = f"{index_url.rstrip('/')}/{name}/"
        try:
            got = requests.get(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"}, timeout=60)
            got.raise_for_status()
            out[name] = [f | {"url": urljoin(got.url, f["url"])} if isinstance(f.get("url"), str) else f
                         for f in got.json()["files"]]
        except (requests.RequestException, ValueError, KeyError) as err:
            from rapidship.redact import redact

            raise ConfigError("--index-url", f"cannot read {redact(url)} as a JSON simple index ({redact(str(err))[:200]})",
                              "pass an index that serves PEP 691 JSON (PyPI does)") from None
    return out


def installed_sizes(wheels: list[dict]) -> dict[str, int]:
    """Thin edge: each wheel's installed bytes (lock/installed.py), by its sha256; a wheel the index
    gives no size for is left out (record_from_index refuses it)."""
    import requests

    from rapidship.lock.installed import wheel_installed_bytes
    from rapidship.redact import redact

    out: dict[str, int] = {}
    with requests.Session() as http:
        for f in (f for f in wheels if isinstance(f.get("size"), int)):
            try:
                out[f["hashes"]["sha256"]] = wheel_installed_bytes(f["url"], f["size"], http)
            except (requests.RequestException, ValueError, KeyError, TypeError) as err:
                raise ConfigError("--index-url", f"cannot read the zip directory of {f.get('filename')} "
                                  f"({redact(str(err))[:200]})",
                                  "pass an index whose files are the wheels it lists (PyPI's are)") from None
    return out


def write_sizes(env: str, lock: Path, locks: Path, index_url: str | None = None) -> Path:
    text = lock.read_text()
    files = fetch_files(sorted(locked_hashes(text)), index_url or "https://pypi.org/simple")
    out = sizes_path(locks, env)
    try:  # the record this replaces: its order figures stay within a series, if they mean what they do here
        before = json.loads(out.read_text())
        previous = before["distributions"] if before.get("format") == FORMAT else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        previous = None
    record = record_from_index(env, text, files, str(lock), installed_sizes(locked_wheels(text, files)), previous)
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return out


def read_sizes(locks: Path, env: str, lock_bytes: bytes) -> dict[str, dict]:
    """The record's distributions, or ConfigError naming the file when it is missing, unreadable, of
    another FORMAT (format 1's order_bytes weighed wheels) or records other versions than the lock pins."""
    path = sizes_path(locks, env)
    fix = f"run invoke lock-sizes --env {env} and commit {path}"
    if not path.is_file():
        raise ConfigError(str(path), "missing: the layer plan weighs each distribution by its wheels' installed size", fix)
    try:
        record = json.loads(path.read_text())
        distributions = record["distributions"]
        recorded = {name: d["version"] for name, d in distributions.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ConfigError(str(path), "is not a wheel-sizes record", fix) from None
    if record.get("format") != FORMAT:
        raise ConfigError(str(path), f"is a record of format {record.get('format')}, this rapidship reads format "
                          f"{FORMAT} (order_bytes are installed bytes)", fix)
    pinned = {name: version for name, (version, _) in locked_hashes(lock_bytes.decode()).items()}
    if recorded != pinned:
        name = sorted(set(recorded) ^ set(pinned) or {n for n in pinned if recorded[n] != pinned[n]})[0]
        raise ConfigError(str(path), f"records {name} {recorded.get(name, '(none)')}, the lock "
                          f"({locks / env / 'requirements.txt'}) pins {pinned.get(name, '(none)')}", fix)
    return distributions
