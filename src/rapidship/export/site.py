"""The site directory: what a site keeps between imports, so that the next disc is judged against it.

`--site DIR` (default $RAPIDSHIP_SITE_DIR, else ~/.local/state/rapidship), the same directory for
`invoke import` and install.sh. It holds `releases` (sign/release.py LEDGER): one line per image
loaded from a verified signature, with the serial that signature states, so that another build of
the same commit is ordered by its serial and not guessed; and `tuf/`, the TUF metadata the site
trusts (seeded once from --trust-root), which import, export-verify, verify and promote decide by.
And `import.lock`: the one lock of the site's decide-and-load (the downgrade check, the load, the
ledger line), which install.sh takes too (flock(1) and flock(2) are one lock), so two imports at
once are one after the other and the newer release stays in place.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from rapidship.errors import ConfigError, RapidshipError
from rapidship.sign import release
from rapidship.sign.release import Release

ENV = "RAPIDSHIP_SITE_DIR"
LOCK = "import.lock"
LOCK_WAIT_ENV = "RAPIDSHIP_SITE_LOCK_WAIT"  # seconds an import waits for another one of the site
LOCK_WAIT = 600


def site_dir(flag: str | None) -> Path:
    return Path(flag or os.environ.get(ENV) or Path.home() / ".local" / "state" / "rapidship")


def trusted_tuf(flag: str | None, trust_root: str | None) -> Path | None:
    """The site's trusted TUF metadata folder when the site decides by TUF (a root was given once,
    now or before), else None. `trust_root` seeds it the first time (sign/tufmeta.seed)."""
    from rapidship.sign import tufmeta

    folder = site_dir(flag) / tufmeta.DISC
    if trust_root:
        if not Path(trust_root).is_file():
            raise ConfigError("--trust-root", f"{trust_root} is not a file",
                              "pass the root.json handed over out of band (N.root.json of invoke trust.init)")
        tufmeta.seed(folder, Path(trust_root))
    return folder if (folder / "root.json").exists() else None


@dataclass(frozen=True)
class Ledger:
    path: Path

    @classmethod
    def at(cls, flag: str | None) -> "Ledger":
        return cls(site_dir(flag) / release.LEDGER)

    def serials(self) -> dict[str, int]:
        try:
            return release.read_ledger(self.path.read_text())
        except FileNotFoundError:
            return {}
        except OSError as err:
            raise ConfigError("--site", f"{self.path} cannot be read ({err.strerror})",
                              "pass --site DIR, a directory this user can read and write") from None

    def current(self, image_id: str, stated: Release | None) -> Release | None:
        """What the name's current image states, with the serial the site recorded for it."""
        return replace(stated, serial=self.serials().get(image_id, 0)) if stated else None

    def record(self, loaded: dict[str, Release]) -> None:
        """Append image id -> release for every image loaded with a signed serial."""
        lines = "".join(release.ledger_line(i, r) for i, r in sorted(loaded.items()) if r.serial)
        if not lines:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as fh:
                fh.write(lines)
        except OSError as err:
            raise ConfigError("--site", f"{self.path} cannot be written ({err.strerror}); the images were loaded, "
                              "but the site has no record of their signed serials",
                              "pass --site DIR, a directory this user can write, and import the disc again") from None


def lock_wait() -> float:
    text = os.environ.get(LOCK_WAIT_ENV, "")
    try:
        return float(text) if text else LOCK_WAIT
    except ValueError:
        raise ConfigError(LOCK_WAIT_ENV, f"{text!r} is not a number of seconds", "set it to e.g. 600") from None


@contextlib.contextmanager
def site_lock(flag: str | None, say: Callable[[str], None]) -> Iterator[None]:
    """Hold the site's import lock: another import of the site holding it is waited for (saying so),
    at most lock_wait() seconds, then refused with the holder named. The lock ends with the process,
    a killed one included, so it is never stale."""
    path = site_dir(flag) / LOCK
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise ConfigError("--site", f"{path} cannot be written ({err.strerror}): the import lock of the site lives "
                          "there; nothing was loaded", "pass --site DIR, a directory this user can write") from None
    try:
        if not _try_lock(fd):
            wait = lock_wait()
            say(f"another import of this site holds {path} ({_holder(fd)}); waiting up to {wait:.0f} s for it")
            deadline = time.monotonic() + wait
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    raise RapidshipError("--site", f"another import of this site ({_holder(fd)}) still holds {path} "
                                         f"after {wait:.0f} s; nothing was loaded",
                                         f"let it finish and import again (or wait longer: {LOCK_WAIT_ENV}=SECONDS)")
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {' '.join(Path(a).name for a in sys.argv[:2])}, since "
                      f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%SZ}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _holder(fd: int) -> str:
    return os.pread(fd, 200, 0).decode(errors="replace").strip() or "a process that has not said who it is yet"
