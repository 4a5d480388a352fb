"""Every invoke task and flag the pipelines call exists in tasks.py."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from rapidship.ci import pipeline as ci
from rapidship.config.matrix import load_matrix

from support.commands import ROOT  # noqa: E402
PROFILES = {"production-buildctl": lambda: ci.production(ci.Builder.buildctl),
            "production-kaniko": lambda: ci.production(ci.Builder.kaniko),
            "local": lambda: ci.local()}
KEYWORDS = {"stages", "variables", "default", "include", "workflow"}


def _all_scripts(doc: dict):
    for name, job in doc.items():
        if name not in KEYWORDS and isinstance(job, dict):
            yield from ((name, line) for line in job.get("script", []))


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(ROOT / "variants.yaml")


def test_every_task_the_jobs_call_exists_with_its_flags(matrix):
    """A renamed task or flag breaks the pipeline on the runner: catch it here instead."""
    from invoke import Collection

    spec = importlib.util.spec_from_file_location("rapidship_tasks_under_test", ROOT / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tasks = Collection.from_module(module)
    lines = {line for name in PROFILES for _, line in _all_scripts(ci.pipeline(matrix, PROFILES[name](), ["cpu-debian12"]))}
    lines |= {line for path in [ROOT / ".gitlab-ci.yml", *(ROOT / "ci").glob("*.yml")]
              for _, line in _all_scripts(yaml.safe_load(path.read_text()))}
    for line in sorted(lines):
        words = line.split()
        assert words[1] in tasks.task_names, f"`{line}`: no task {words[1]!r}"
        known = {n.replace("-", "_") for arg in tasks[words[1]].get_arguments() for n in arg.names}
        for flag in (w for w in words[2:] if w.startswith("--")):
            assert flag[2:].replace("-", "_") in known, f"`{line}`: {words[1]} has no {flag}"
