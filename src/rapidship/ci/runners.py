"""Release runners exist, and only protected ones carry their tag: asked of GitLab's runner API.

GitLab holds a job whose tags no runner carries as pending until it is dropped as stuck, hours
later; and a runner that carries the release tag but is not protected also takes merge-request
jobs whose tags it has (a job goes to any runner holding all of its tags). So before the first
release job the pipeline asks GitLab (`protected-runners`, docs/ci.md): pure `problems` over the
runners the project can use, thin `fetch` over the REST API (`GET /projects/:id/runners?tag_list=`,
then `GET /runners/:id` for each: tags, access level, whether it runs untagged jobs), with a
read_api token from the environment, never an argument.

Tags alone keep a secret off the runners merge requests share only when every job that receives
one carries a protected tag: `pipeline_problems` reads the generated file as GitLab runs it and
names each job with a protected secret (a protected environment, or a protected variable mapped in
its `rules:`/`variables:`) that lacks one, and each job carrying one that may run on an unprotected
ref. `check_pipeline` then asks GitLab, for every job there, whether protected online runners, and
only protected ones, carry all its tags.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from rapidship.ci import pipeline as ci
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


# the protected variables of docs/ci.md's CI variables table that jobs map by name
PROTECTED_VARIABLES = tuple(sorted({v.lstrip("$") for robot in (ci.CI_ROBOT, ci.PROMOTE_ROBOT, ci.CI_MIRRORS)
                                    for v in robot.values()}
                                   | {ci.SIGNING_KEY, ci.SIGNING_PASSWORD, TOKEN_ENV}))
_KEYWORDS = {"stages", "variables", "default", "include", "workflow", "image", "services", "cache", "before_script",
             "after_script"}


def protected_secrets(job: dict) -> list[str]:
    """What protected secret `job` receives: a protected environment it declares (every variable
    scoped there reaches it), a protected variable it maps. A name only known at run time
    (`environment: $X`) may be any: counted, failing closed."""
    found = []
    name = str((job.get("environment") or {}).get("name", "")) if isinstance(job.get("environment"), dict) \
        else str(job.get("environment") or "")
    if name in ci.PROTECTED_ENVIRONMENTS or "$" in name:
        found.append(f"environment {name}")
    blocks = [job.get("variables") or {}, *((r.get("variables") or {}) for r in job.get("rules") or [])]
    mapped = {v for block in blocks for v in PROTECTED_VARIABLES for val in block.values() if v in str(val)}
    return found + [f"variable {v}" for v in sorted(mapped)]


def only_on_protected_refs(job: dict) -> bool:
    """True when no rule lets `job` run on an unprotected ref: before any rule that runs it, a
    `when: never` rule for unprotected refs, or each rule that runs it requires a protected ref."""
    rules = job.get("rules")
    if not rules:
        return False
    for rule in rules:
        cond = str(rule.get("if", ""))
        if rule.get("when") == "never":
            if cond == ci.UNPROTECTED_REF:
                return True
            continue
        if ci.PROTECTED_REF not in cond:
            return False
    return True


def pipeline_problems(doc: dict) -> list[str]:
    """Pure: why the pipeline `doc` (as GitLab reads it) could hand a protected secret to a runner
    that merge-request jobs share, or put a merge-request job where secrets are ([] = neither)."""
    found = []
    for name, job in doc.items():
        if name in _KEYWORDS or name.startswith(".") or not isinstance(job, dict) or "trigger" in job:
            continue
        tags = [str(t) for t in job.get("tags") or []]
        protected = [t for t in tags if t in ci.PROTECTED_RUNNER_TAGS]
        secrets = protected_secrets(job)
        if secrets and not protected:
            found.append(f"job {name} receives a protected secret ({', '.join(secrets)}) but carries neither runner "
                         f"tag {' nor '.join(ci.PROTECTED_RUNNER_TAGS)}, so it may run on a runner merge-request jobs "
                         f"share: tag it {ci.PROTECTED_RUNNER_TAG} (docs/ci.md, Runner topology)")
        if protected and not only_on_protected_refs(job):
            found.append(f"job {name} carries the runner tag {protected[0]} but may run on an unprotected ref: "
                         f"merge-request jobs never carry it; leave it out there (rules: if: {ci.UNPROTECTED_REF} "
                         "when: never first)")
    return found


def job_tags(doc: dict) -> dict[str, tuple[str, ...]]:
    """Every job that carries a protected runner tag, with all its tags."""
    return {n: tuple(str(t) for t in j.get("tags") or []) for n, j in doc.items()
            if isinstance(j, dict) and any(t in ci.PROTECTED_RUNNER_TAGS for t in j.get("tags") or [])}


def unreachable(runners: list[Runner], jobs: dict[str, tuple[str, ...]]) -> list[str]:
    """Pure: the jobs no protected online runner takes (one carrying all of the job's tags)."""
    ready = [r for r in runners if r.protected and r.online and not r.paused]
    return [f"job {name}: no protected online runner carries all of its tags ({', '.join(tags)}), so GitLab would "
            "hold it as pending until it drops it: register one (docs/ci.md, Runner topology)"
            for name, tags in jobs.items() if not any(set(tags) <= set(r.tags) for r in ready)]


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
        raise ConfigError(TOKEN_ENV, "not set: the protected-runners check asks GitLab which runners carry the tag "
                          f"{tag}", "create a project access token (role Maintainer, scope read_api) and store it as "
                          f"the masked, protected variable {TOKEN_ENV} scoped to the environment runners (docs/ci.md)")
    if not api or not project:
        raise ConfigError("CI_API_V4_URL / CI_PROJECT_ID", "not set: this check runs inside a GitLab CI job",
                          "run it from the generated pipeline (job protected-runners)")
    runners = fetch(api.rstrip("/"), project, token, tag)
    found = problems(runners, tag)
    if found:
        raise GateFailure(f"runners with the tag {tag}", found[0] if len(found) == 1 else
                          f"{len(found)} problems:\n  " + "\n  ".join(found),
                          "nothing was released; fix the runners, then retry the pipeline")
    return runners


def check_pipeline(doc: dict, env: dict[str, str] | None = None, ask: bool = True) -> list[Runner]:
    """Fail closed on the pipeline file first (no API needed), then, with `ask`, on the runners
    GitLab has for each protected tag the file uses and for each job that carries one."""
    found = pipeline_problems(doc)
    if found:
        raise GateFailure("the generated pipeline", found[0] if len(found) == 1 else
                          f"{len(found)} problems:\n  " + "\n  ".join(found),
                          "generate it with `invoke ci.generate` (docs/ci.md, Who reaches what); nothing ran")
    if not ask:
        return []
    jobs = job_tags(doc)
    runners: dict[int, Runner] = {}
    for tag in sorted({t for tags in jobs.values() for t in tags if t in ci.PROTECTED_RUNNER_TAGS}):
        runners.update({r.id: r for r in require(tag, env)})
    found = unreachable(list(runners.values()), jobs)
    if found:
        raise GateFailure("protected runners", found[0] if len(found) == 1 else
                          f"{len(found)} problems:\n  " + "\n  ".join(found),
                          "nothing was built or released; register the runners, then retry the pipeline")
    return list(runners.values())
