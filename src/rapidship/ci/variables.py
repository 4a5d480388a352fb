"""The project's CI/CD variables keep every credential off merge-request jobs (docs/ci.md, CI
variables): pure `problems` over the variables as GitLab's API lists them
(`GET /projects/:id/variables`: key, value, variable_type, protected, masked, environment_scope),
thin `read` of that JSON from a file.

A credential of protected and release builds must be masked, protected and scoped to the one
environment only the jobs that use it declare; a merge request's own credential masked and scoped
to its environment; the names jobs map a credential to (`rules: variables:`) never project
variables, which would reach every job; and an MR credential never the value of a protected one
(an MR could then read what a release build trusts)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rapidship.ci import pipeline as ci
from rapidship.errors import ConfigError


@dataclass(frozen=True)
class Credential:
    name: str
    scope: str            # the environment scope it must have (docs/ci.md)
    protected: bool
    file: bool = False    # a file variable (GitLab cannot mask those)


def _pair(prefix: str, scope: str, protected: bool, names=("NAME", "SECRET")) -> tuple[Credential, ...]:
    return tuple(Credential(f"{prefix}{n}", scope, protected) for n in names)


_MIRRORS = ("PIP_INDEX_URL", "CONDA_CHANNELS")
CREDENTIALS = (
    *_pair("HARBOR_CI_ROBOT_", "ci-*", True),
    *_pair("HARBOR_MR_ROBOT_", "mr-*", False),
    *_pair("HARBOR_PROMOTE_ROBOT_", ci.RELEASE_ENVIRONMENT, True),
    *_pair("RAPIDSHIP_CI_", ci.CI_BUILD_ENVIRONMENT, True, _MIRRORS),
    *_pair("RAPIDSHIP_MR_", ci.MR_BUILD_ENVIRONMENT, False, _MIRRORS),
    Credential(ci.SIGNING_KEY, ci.SIGNING_ENVIRONMENT, True, file=True),
    Credential(ci.SIGNING_PASSWORD, ci.SIGNING_ENVIRONMENT, True),
    Credential("RAPIDSHIP_GITLAB_TOKEN", ci.RUNNERS_ENVIRONMENT, True),
)
# what jobs map a credential to: set as a project variable, it would reach every job
MAPPED = tuple(sorted({k for d in (ci.CI_ROBOT, ci.CI_MIRRORS) for k in d}
                      | {"RAPIDSHIP_HARBOR_USER", "RAPIDSHIP_HARBOR_PASSWORD"}))
# a merge request's credential and the protected one it stands in for: never one value
STANDS_FOR = {**{f"HARBOR_MR_ROBOT_{n}": f"HARBOR_CI_ROBOT_{n}" for n in ("NAME", "SECRET")},
              **{f"RAPIDSHIP_MR_{n}": f"RAPIDSHIP_CI_{n}" for n in _MIRRORS}}


def problems(variables: list[dict]) -> list[str]:
    """Pure: why this variables setup lets a merge-request job see what protected or release
    builds use ([] = it does not)."""
    wanted = {c.name: c for c in CREDENTIALS}
    found = []
    for v in variables:
        key, scope = str(v.get("key")), str(v.get("environment_scope") or "*")
        where = f"{key} (environment scope {scope})"
        if key in MAPPED:
            found.append(f"{where} is a project variable, so every job gets it, merge requests' included: delete "
                         "it; the jobs that need it map it from their environment's own credential (docs/ci.md, "
                         "CI variables)")
            continue
        c = wanted.get(key)
        if c is None:
            continue
        if scope != c.scope:
            found.append(f"{where} must be scoped to the environment {c.scope}: any other scope hands it to jobs "
                         "that do not use it")
        if c.protected and not v.get("protected"):
            found.append(f"{where} is not protected, so merge-request pipelines get it: mark it protected")
        if not c.file and not v.get("masked"):
            found.append(f"{where} is not masked: mark it masked (or masked and hidden)")
        if c.file and v.get("variable_type") != "file":
            found.append(f"{where} must be a file variable")
    values = {str(v.get("key")): v.get("value") for v in variables if v.get("value")}
    for mr, protected in STANDS_FOR.items():
        if mr in values and values[mr] == values.get(protected):
            found.append(f"{mr} holds the same value as {protected}: a merge request could read the credential "
                         f"protected and release builds use; give merge requests a credential of their own, or none")
    return found


def read(path: Path) -> list[dict]:
    """The variables as GitLab's API lists them; one error naming the file for anything else."""
    fix = ("save what GitLab answers to GET /projects/:id/variables (a JSON list of objects with key, "
           "environment_scope, protected, masked)")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ConfigError(str(path), f"cannot read it as JSON: {err}", fix) from None
    if not isinstance(doc, list) or not all(isinstance(v, dict) and "key" in v for v in doc):
        raise ConfigError(str(path), "is not a list of variables (objects with a key)", fix)
    return doc


def check(path: Path) -> int:
    """Fail closed: every problem of the file in one ConfigError (exit 2); the count checked otherwise."""
    variables = read(path)
    found = problems(variables)
    if found:
        raise ConfigError(str(path), found[0] if len(found) == 1 else
                          f"{len(found)} variables break the rules:\n  " + "\n  ".join(found),
                          "fix them in Settings > CI/CD > Variables (docs/ci.md, CI variables), then check again")
    return len(variables)
