"""Pure: an image's release and the one rule every loader applies before it moves a name.

An image's release is what its config says of its build, labels `invoke build` sets and the
signature covers (the config digest is the image id the signed manifest names):
  org.opencontainers.image.created   the build's UTC time, whole seconds (SOURCE_DATE_EPOCH: the
                                     commit's time, so every rebuild of one commit states the same)
  org.opencontainers.image.revision  the source commit, shown beside it
The signed payload repeats both (`io.rapidship.release`), and a verifier requires the two to agree;
it adds `serial`, the signing time in milliseconds, which only the signature states: the order of
two builds of one commit (a base refreshed for a security fix is the same commit, other content).

The rule (`refusal`), stated once for every loader, install.sh's sh copy aside. On a site that
decides by TUF, TUF's targets version is the order and is authoritative: python-tuf's client
refuses release metadata older than the site trusts, and an image it resolved (`tuf_version` set)
is of the newest release the site has trusted, so it may replace whatever the name points at. On a
site that decides by the key alone, a release's order is (created, serial): a name may move from
the image it points at now to another only when the incoming order is higher, unless the operator
says so (--allow-downgrade). An older `created` is a rollback; an equal `created` is the same commit, and
the move is allowed only when both serials are known (the incoming from its verified signature, the
current from the site's record of what it loaded, `LEDGER`) and the incoming one is higher: the
same commit with other content and no known order is refused, never guessed. install.sh applies
the same rule in sh: it compares `key` (the 14 digits YYYYMMDDHHMMSS of a UTC time written as
`invoke build` writes it, anything else has no key) and then the serials, and writes and reads
the same ledger lines (`ledger_line`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timezone

from rapidship.sign.formats import RELEASE_KEY

CREATED_LABEL = "org.opencontainers.image.created"
REVISION_LABEL = "org.opencontainers.image.revision"
_UTC = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:Z|\+00:00)$")


LEDGER = "releases"  # in the site directory: one `ledger_line` per image loaded with a signed serial


@dataclass(frozen=True)
class Release:
    created: str
    revision: str = ""
    serial: int = 0  # the signing time in ms, from a verified signature; 0: not known
    tuf_version: int = 0  # the trusted targets version that resolved this image on a TUF site; 0: not decided by TUF

    @property
    def key(self) -> int:
        return key_of(self.created) or 0

    def describe(self) -> str:
        return self.created + (f" ({self.revision[:12]})" if self.revision else "")

    def payload(self) -> dict:
        return {"created": self.created, "revision": self.revision} | ({"serial": self.serial} if self.serial else {})

    def built(self) -> "Release":
        """What the image's labels can state (no serial): compared with what a payload repeats."""
        return Release(self.created, self.revision)


def key_of(created: object) -> int | None:
    """20261202142600 for '2026-12-02T14:26:00+00:00' or '...Z'; None for any other spelling."""
    m = _UTC.match(created) if isinstance(created, str) else None
    return int("".join(m.groups())) if m else None


def key_at(moment: datetime | date) -> int:
    """The key of a point in time (a date is its first second, UTC; a time without a zone is UTC)."""
    if not isinstance(moment, datetime):
        moment = datetime(moment.year, moment.month, moment.day, tzinfo=timezone.utc)
    elif moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
    return int(moment.strftime("%Y%m%d%H%M%S"))


def of_labels(labels: object) -> Release | None:
    """The release a config's labels state, or None when they state none a loader can order."""
    if not isinstance(labels, dict) or key_of(labels.get(CREATED_LABEL)) is None:
        return None
    revision = labels.get(REVISION_LABEL)
    return Release(str(labels[CREATED_LABEL]), revision if isinstance(revision, str) else "")


def of_config(config: object) -> Release | None:
    inner = config.get("config") if isinstance(config, dict) else None
    return of_labels(inner.get("Labels") if isinstance(inner, dict) else None)


def of_payload(payload: object) -> Release | None:
    """What a (verified, parsed) signed payload says of the release; None when it says nothing."""
    optional = payload.get("optional") if isinstance(payload, dict) else None
    stated = optional.get(RELEASE_KEY) if isinstance(optional, dict) else None
    if not isinstance(stated, dict) or not isinstance(stated.get("created"), str):
        return None
    revision, serial = stated.get("revision"), stated.get("serial")
    return Release(stated["created"], revision if isinstance(revision, str) else "",
                   serial if isinstance(serial, int) and not isinstance(serial, bool) and serial > 0 else 0)


def ledger_line(image_id: str, r: Release) -> str:
    """`<image id> <created> <serial>`: the site's record that it loaded this image as this release."""
    return f"{image_id} {r.created} {r.serial}\n"


def read_ledger(text: str) -> dict[str, int]:
    """image id -> the highest serial the site recorded for it (lines it cannot read are skipped)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].isdigit():
            out[parts[0]] = max(out.get(parts[0], 0), int(parts[2]))
    return out


def refusal(name: str, current: Release | None, current_id: str, incoming: Release | None, incoming_id: str) -> str:
    """'' when `name` may move from the image it points at now (`current_id`, '' when none) to
    `incoming_id`; else the sentence saying why not. A name nothing points at (a first install), or
    one pointing at an image that states no release, has nothing to compare. An image TUF resolved
    in the site's trusted release is that release's: TUF's versions already ordered it."""
    if not current_id or current_id == incoming_id or current is None or (incoming and incoming.tuf_version):
        return ""
    now = f"{name} now points at {current_id[:19]}, release {current.describe()}"
    if incoming is None:
        return (f"{now}; the incoming {incoming_id[:19]} states no release, so it cannot be shown not to be older")
    if incoming.key < current.key:
        return f"{now}; the incoming {incoming_id[:19]} is the older release {incoming.describe()} (a rollback)"
    if incoming.key > current.key or (current.serial and incoming.serial > current.serial):
        return ""
    if current.serial and incoming.serial:
        return (f"{now} signed as serial {current.serial}; the incoming {incoming_id[:19]} is a build of the same "
                f"commit signed earlier, as serial {incoming.serial} (a rollback)")
    unknown = "the site has no record of the current one's signed serial" if not current.serial \
        else "the incoming one states no signed serial"
    return (f"{now}; the incoming {incoming_id[:19]} is another build of the same commit and {unknown}, so it "
            "cannot be shown not to be older (a possible rollback)")
