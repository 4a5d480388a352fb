"""The site directory: what a site keeps between imports, so that the next disc is judged against it.

`--site DIR` (default $RAPIDSHIP_SITE_DIR, else ~/.local/state/rapidship), the same directory for
`invoke import` and install.sh. It holds `releases` (sign/release.py LEDGER): one line per image
loaded from a verified signature, with the serial that signature states, so that another build of
the same commit is ordered by its serial and not guessed; and `tuf/`, the TUF metadata the site
trusts (seeded once from --trust-root), which import, export-verify, verify and promote decide by.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from rapidship.errors import ConfigError
from rapidship.sign import release
from rapidship.sign.release import Release

ENV = "RAPIDSHIP_SITE_DIR"


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
