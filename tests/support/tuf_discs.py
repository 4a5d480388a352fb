"""What the tests of TUF on real discs share: loading a disc on a site that decides by release
metadata, the shape of a refusal, and copies of a release's trust repository to attack."""

from __future__ import annotations

import shutil

from support.signed_discs import error_of, from_args, image_id, run

LATER, LATEST = "2026-12-02T00:00:00+00:00", "2026-12-03T00:00:00+00:00"


def root_v1(disc):
    return str(disc.build / "trust" / "metadata" / "1.root.json")


def load(disc, dirs, site, *flags, key=None):
    return run(disc.env | {"RAPIDSHIP_SITE_DIR": str(site)}, "import", *from_args(dirs), "--key",
               str(key or disc.pub), "--trust-root", root_v1(disc), "--json", *flags)


def refused(proc, *said):
    message = error_of(proc)
    assert proc.returncode == 1 and "nothing was loaded" in message, message
    for text in said:
        assert text in message, message
    return message


def none_of(disc) -> bool:
    return all(image_id(i) is None for i in disc.ids.values())


def trust_copy(disc, to, keys=None):
    """A copy of the disc's workspace trust repository (to/trust), and the signers of the online keys
    (made under `keys`, default the disc's work folder)."""
    from rapidship.sign import tufmeta

    shutil.copytree(disc.build / "trust", to / "trust")
    online = [tufmeta.open_key(str((keys or disc.work) / role / "cosign.key"), role)
              for role in ("snapshot", "timestamp")]
    return tufmeta.Repo(tufmeta.repo_dir(to)), online
