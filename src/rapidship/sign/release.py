"""Pure: an image's release and the one rule every loader applies before it moves a name.

An image's release is what its config says of its build, labels `invoke build` sets and the
signature covers (the config digest is the image id the signed manifest names):
  org.opencontainers.image.created   the build's UTC time, whole seconds: the order of releases
  org.opencontainers.image.revision  the source commit, shown beside it
The signed payload repeats both (`io.rapidship.release`), and a verifier requires the two to agree.

The rule (`refusal`): a name may move from the image it points at now to one whose release is
older only when the operator says so (--allow-downgrade). install.sh applies the same rule in sh:
it compares `key` (the 14 digits YYYYMMDDHHMMSS of a UTC time written as `invoke build` writes it,
anything else has no key), so both readers order the same strings the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timezone

from rapidship.sign.formats import RELEASE_KEY

CREATED_LABEL = "org.opencontainers.image.created"
REVISION_LABEL = "org.opencontainers.image.revision"
_UTC = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:Z|\+00:00)$")


@dataclass(frozen=True)
class Release:
    created: str
    revision: str = ""

    @property
    def key(self) -> int:
        return key_of(self.created) or 0

    def describe(self) -> str:
        return self.created + (f" ({self.revision[:12]})" if self.revision else "")

    def payload(self) -> dict[str, str]:
        return {"created": self.created, "revision": self.revision}


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
    revision = stated.get("revision")
    return Release(stated["created"], revision if isinstance(revision, str) else "")


def refusal(name: str, current: Release | None, current_id: str, incoming: Release | None, incoming_id: str) -> str:
    """'' when `name` may move from the image it points at now (`current_id`, '' when none) to
    `incoming_id`; else the sentence saying why not. Only an older release is refused: equal keys
    are the same build, and a name nothing points at (a first install) has nothing to compare."""
    if not current_id or current_id == incoming_id or current is None:
        return ""
    if incoming is None:
        return (f"{name} now points at {current_id[:19]}, release {current.describe()}; the incoming "
                f"{incoming_id[:19]} states no release, so it cannot be shown not to be older")
    if incoming.key < current.key:
        return (f"{name} now points at {current_id[:19]}, release {current.describe()}; the incoming "
                f"{incoming_id[:19]} is the older release {incoming.describe()} (a rollback)")
    return ""
