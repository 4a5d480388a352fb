"""CI's jobs and `invoke release` run one chain: every stage of release.plan.STAGES is the task some
job of the generated pipeline calls, and CI's `needs:` order them as the release does (gates and
scan side by side there, one after the other here)."""

from __future__ import annotations

import pytest

from rapidship.ci import pipeline as ci
from rapidship.config.matrix import load_matrix
from rapidship.release.plan import STAGES
from support.commands import ROOT

# production runners build without a daemon (rootless BuildKit or kaniko): the same stage, another task
ALSO = {"ci.build": "build"}
# CI runs these side by side (gates and scan each need only the build; the GPU runner's smoke and
# sign each need only the push); the release, one after the other
SIDE_BY_SIDE = {("gates", "scan"), ("smoke", "sign")}
PROFILES = {"production": lambda: ci.production(), "local": lambda: ci.local("127.0.0.1:5000/staging")}


def jobs_calling(doc: dict) -> dict[str, list[tuple[str, int]]]:
    """stage -> (job, line index) of every job script line `invoke <stage> ...`."""
    found: dict[str, list[tuple[str, int]]] = {}
    for name, job in doc.items():
        for i, line in enumerate(job.get("script", []) if isinstance(job, dict) else []):
            words = line.split()
            stage = ALSO.get(words[1], words[1]) if words[:1] == ["invoke"] and len(words) > 1 else ""
            if stage in STAGES:
                found.setdefault(stage, []).append((name, i))
    return found


def upstream(doc: dict, job: str) -> set[str]:
    """Every job `job` waits for: its `needs:`, transitively; a job without `needs:` waits for every
    job of the earlier stages (GitLab's rule)."""
    order = doc["stages"]
    jobs = {k: v for k, v in doc.items() if isinstance(v, dict) and v.get("stage") in order}

    def direct(name: str) -> list[str]:
        if "needs" not in jobs[name]:
            rank = order.index(jobs[name]["stage"])
            return [k for k, v in jobs.items() if order.index(v["stage"]) < rank]
        # a need with `pipeline:` is a job of the parent pipeline, not of this file
        return [n if isinstance(n, str) else n["job"] for n in jobs[name]["needs"]
                if isinstance(n, str) or "pipeline" not in n]

    seen, todo = set(), [job]
    while todo:
        for name in direct(todo.pop()):
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


@pytest.mark.parametrize("profile", PROFILES)
def test_every_release_stage_is_a_ci_job_in_the_release_order(profile):
    doc = ci.pipeline(load_matrix(ROOT / "variants.yaml"), PROFILES[profile](), ["cpu-debian12"])
    calls = jobs_calling(doc)
    assert set(calls) == set(STAGES), f"stages no CI job runs: {set(STAGES) - set(calls)}"
    for j, after in enumerate(STAGES):
        for before in STAGES[:j]:
            for job, line in calls[after]:
                earlier = [x for x, i in calls[before] if x in upstream(doc, job) or (x == job and i < line)]
                if (before, after) not in SIDE_BY_SIDE:
                    assert earlier, f"CI's {job} runs {after} without a {before} job before it"
                later = [x for x, _ in calls[before] if job in upstream(doc, x)]
                assert not later, f"CI runs {before} ({later}) after {after} ({job})"
