"""Release runners exist, and only protected ones carry their tag: asked of GitLab's runner API.

GitLab holds a job whose tags no runner carries as pending until it is dropped as stuck, hours
later; and a runner that carries the release tag but is not protected also takes merge-request
jobs whose tags it has (a job goes to any runner holding all of its tags). So before the first
release job the pipeline asks GitLab (`release-runners`, docs/ci.md): pure `problems` over the
runners the project can use, thin `fetch` over the REST API (`GET /projects/:id/runners?tag_list=`,
then `GET /runners/:id` for each: tags, access level, whether it runs untagged jobs), with a
read_api token from the environment, never an argument.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from rapidship.errors import ConfigError, GateFailure, RapidshipError

TOKEN_ENV = "RAPIDSHIP_GITLAB_TOKEN"


@dataclass(frozen=True)
class Runner:
    id: int
    description: str
    online: bool
    paused: bool
    tags: tuple[str, ...]
    protected: bool      # access_level ref_protected: jobs of protected branches and tags only
    run_untagged: bool


def problems(runners: list[Runner], tag: str) -> list[str]:
    """Pure: why the runners carrying `tag` cannot be trusted with release jobs ([] = they can)."""
    carrying = [r for r in runners if tag in r.tags]
    found = [f"runner {r.id} ({r.description or 'no description'}) carries the tag {tag} but is not protected, so "
             "merge-request jobs whose tags it has run there too: make it protected (Settings > CI/CD > Runners) or "
             "remove the tag" for r in carrying if not r.protected]
    found += [f"runner {r.id} ({r.description or 'no description'}) carries the tag {tag} and also runs untagged "
              "jobs: register it with --run-untagged=false" for r in carrying if r.run_untagged]
    if not any(r.protected and r.online and not r.paused for r in carrying):
        found.append(f"no protected runner carrying the tag {tag} is online, so the release jobs would wait for one "
                     f"until GitLab drops them: register a protected runner with the tag {tag} on a host no "
                     "merge-request job reaches (docs/ci.md, Runner topology)")
    return found


def runner_of(doc: dict) -> Runner:
    """One runner as `GET /runners/:id` describes it."""
    status = doc.get("status")
    return Runner(id=int(doc["id"]), description=str(doc.get("description") or ""),
                  online=bool(doc.get("online")) or status == "online", paused=bool(doc.get("paused"))
                  or doc.get("active") is False, tags=tuple(str(t) for t in doc.get("tag_list") or ()),
                  protected=doc.get("access_level") == "ref_protected", run_untagged=bool(doc.get("run_untagged")))


def fetch(api: str, project: str, token: str, tag: str) -> list[Runner]:
    """Edge: every runner of the project that carries `tag`, with its details."""
    listed, page = [], 1
    while True:
        query = urllib.parse.urlencode({"tag_list": tag, "per_page": 100, "page": page})
        batch = _get(f"{api}/projects/{urllib.parse.quote(project, safe='')}/runners?{query}", token)
        if not isinstance(batch, list):
            raise RapidshipError("GitLab API", "the runner list is not a list", "check CI_API_V4_URL")
        listed += batch
        if len(batch) < 100:
            break
        page += 1
    return [runner_of(_get(f"{api}/runners/{int(r['id'])}", token)) for r in listed]


def _get(url: str, token: str):
    request = urllib.request.Request(url, headers={"PRIVATE-TOKEN": token, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:  # noqa: S310 - the instance's own API URL
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        hint = ("the token needs the read_api scope and a role that may see the project's runners (Maintainer)"
                if err.code in (401, 403) else "check CI_API_V4_URL and CI_PROJECT_ID")
        raise RapidshipError("GitLab API", f"GET {urllib.parse.urlsplit(url).path} answered HTTP {err.code}",
                             hint) from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise RapidshipError("GitLab API", f"cannot read {urllib.parse.urlsplit(url).path}: {err}",
                             "check CI_API_V4_URL and that the runner reaches the GitLab instance") from None


def require(tag: str, env: dict[str, str] | None = None) -> list[Runner]:
    """Fail closed: no token, no API, no protected online runner with `tag`: one error each."""
    env = os.environ if env is None else env
    token = env.get(TOKEN_ENV, "")
    api, project = env.get("CI_API_V4_URL", ""), env.get("CI_PROJECT_ID", "")
    if not token:
        raise ConfigError(TOKEN_ENV, "not set: the release-runners check asks GitLab which runners carry the tag "
                          f"{tag}", "create a project access token (role Maintainer, scope read_api) and store it as "
                          f"the masked, protected variable {TOKEN_ENV} scoped to the environment runners (docs/ci.md)")
    if not api or not project:
        raise ConfigError("CI_API_V4_URL / CI_PROJECT_ID", "not set: this check runs inside a GitLab CI job",
                          "run it from the generated pipeline (job release-runners)")
    runners = fetch(api.rstrip("/"), project, token, tag)
    found = problems(runners, tag)
    if found:
        raise GateFailure(f"runners with the tag {tag}", found[0] if len(found) == 1 else
                          f"{len(found)} problems:\n  " + "\n  ".join(found),
                          "nothing was released; fix the runners, then retry the pipeline")
    return runners
