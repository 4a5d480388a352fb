"""User gate: a numeric non-root uid is configured, and the image also works as a random uid.

Kubernetes' runAsNonRoot can only verify a numeric USER; OpenShift runs images as an arbitrary
uid in group 0, so home and spill dir must be group-0 writable.
"""

from __future__ import annotations

import random

from rapidship.engine import ENGINE
from rapidship.gates import GateReport, verdict


def configured_user_problems(user: str) -> list[str]:
    """Pure: what is wrong with an image's configured USER."""
    if not user:
        return ["no USER is set: the image runs as root"]
    uid, _, gid = user.partition(":")
    if not uid.isdigit():
        return [f"USER {user!r} is a name, not a numeric uid: runAsNonRoot cannot verify it"]
    if int(uid) == 0:
        return [f"USER {user!r} is root"]
    if gid and gid != "0":
        return [f"USER {user!r}: the group should be 0 so an arbitrary uid shares the group-writable dirs"]
    return []


def random_uid() -> int:
    return random.randint(100_000, 2_000_000_000)


def probe_random_uid(ref: str, uid: int) -> list[str]:
    """Run the image (entrypoint included) as uid:0 and write home and spill dir."""
    script = 'test "$(id -u)" = "$1" && touch "$HOME/.rapidship-probe" "$RAPIDS_SPILL_DIR/.rapidship-probe" && echo ok'
    proc = ENGINE.run_container(["--rm", "--user", f"{uid}:0", "--cap-drop", "ALL", "--security-opt",
                                 "no-new-privileges", ref, "sh", "-c", script, "probe", str(uid)], timeout=300)
    if proc.returncode != 0 or proc.stdout.strip() != "ok":
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return [f"as random uid {uid}: cannot write home and spill dir (exit {proc.returncode}: {' | '.join(tail)})"]
    return []


def check_user(ref: str, config_user: str, uid: int | None = None) -> GateReport:
    reasons = configured_user_problems(config_user)
    uid = uid or random_uid()
    if not reasons:
        reasons += probe_random_uid(ref, uid)
    return verdict("user", reasons, configured=config_user, random_uid=uid)
