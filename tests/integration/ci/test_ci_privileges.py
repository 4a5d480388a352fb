"""Who gets which secret and needs which runner, measured with gitlab-ci-local, held to docs/ci.md.

`.gitlab-ci.yml` with its includes and the generated production pipeline (cpu-debian12, both
arches) run under gitlab-ci-local in the four kinds of pipeline a project has: a merge request, a
protected branch, a protected tag, an unprotected tag. The child is the file that the trigger job
which ran in that root pipeline names, written by the command line of the generate job it names
(only `--out` and `--variant` added). Only the job scripts change (each writes its
environment to a file; nothing else runs): rules, `rules: variables:`, environments, needs and tags
are the generated ones. The project variables are set as the CI variables table of docs/ci.md
says (each secret's environment scope, read from that table), the protected ones only in pipelines
of protected refs, which is how GitLab hands them out and what gitlab-ci-local cannot know. Every
secret holds a marker value; a job received a secret when its marker is anywhere in its
environment. The jobs that ran, what each received and each job's runner tags must be exactly the
privileges table of docs/ci.md, which this test reads, so the table cannot drift.

gitlab-ci-local treats file variables like plain ones here (the scoping is the same); `tags:` it
does not route by, so they are compared from the YAML it ran, per kind of ref (the table gives the
tags on protected refs and on the others).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from support.commands import ROOT

pytestmark = [pytest.mark.gitlab_local]
GCL = shutil.which("gitlab-ci-local")
DOC = ROOT / "docs" / "ci.md"
LABELS = {"ci robot": "HARBOR_CI_ROBOT_", "mr robot": "HARBOR_MR_ROBOT_", "promote robot": "HARBOR_PROMOTE_ROBOT_",
          "signing key": "RAPIDSHIP_SIGNING_PASSWORD", "gitlab token": "RAPIDSHIP_GITLAB_TOKEN",
          "ci mirrors": "RAPIDSHIP_CI_", "mr mirrors": "RAPIDSHIP_MR_"}   # any other credential: by its own name
PIPELINES = {
    "merge request": {"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_IID": "7",
                      "CI_COMMIT_REF_PROTECTED": "false"},
    "protected branch": {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_BRANCH": "main", "CI_COMMIT_REF_PROTECTED": "true"},
    "protected tag": {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_TAG": "v26.10.0", "CI_COMMIT_REF_PROTECTED": "true"},
    "unprotected tag": {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_TAG": "v0.0.0-test", "CI_COMMIT_REF_PROTECTED": "false"},
}


PROTECTED_KINDS = ("protected branch", "protected tag")


def doc_tables() -> tuple[dict, dict]:
    """(privileges: job pattern -> ({protected refs: tags or None, other refs: tags or None},
    {pipeline: received labels or None}), secrets: variable name -> (environment scope, protected))
    as docs/ci.md states them. A secret is every *masked* variable of the CI variables table, scoped
    or not (no scope: `*`, every job)."""
    text = DOC.read_text()
    table = text[text.index("<!-- privileges-table"):].split("\n\n", 1)[0].splitlines()[1:]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header[:3] == ["job", "runner tags, protected refs", "runner tags, other refs"]
    assert header[3:] == list(PIPELINES)
    rows = {}
    for line in table[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        tags = {refs: None if c == "-" else tuple(re.findall(r"`([^`]+)`", c))
                for refs, c in zip((True, False), cells[1:3])}
        got = {p: None if c == "-" else (set() if c == "none" else {x.strip() for x in c.split(",")})
               for p, c in zip(PIPELINES, cells[3:])}
        for job in re.findall(r"`([^`]+)`", cells[0]):
            rows[job] = (tags, got)
    secrets = {}
    for line in text.splitlines():
        m = re.match(r"\| (`[A-Z_]+`(?:, `[A-Z_]+`)*) \| ([^|]*masked[^|]*) \|", line)
        if m:
            scope = re.search(r"environment scope `([^`]+)`", m.group(2))
            for name in re.findall(r"`([A-Z_]+)`", m.group(1)):
                secrets[name] = (scope.group(1) if scope else "*", "protected" in m.group(2))
    return rows, secrets


def row_for(rows: dict, job: str) -> tuple[str, tuple, dict]:
    for pattern, row in rows.items():
        if re.fullmatch(re.escape(pattern).replace("V", "[a-z0-9-]+").replace("A", "(amd64|arm64)"), job):
            return pattern, *row
    raise AssertionError(f"docs/ci.md's privileges table has no row for the job {job}")


def neutered(doc: dict) -> dict:
    """The pipeline with every script replaced by a dump of the job's environment; no images, no
    artifacts; a trigger job dumps its environment too (which one ran says which child runs): what
    decides who gets what is left as it is."""
    out = {k: v for k, v in doc.items() if k != "include"}
    out["default"] = {k: v for k, v in (doc.get("default") or {}).items() if k not in ("image",)}
    for name, job in doc.items():
        if isinstance(job, dict) and ("script" in job or "trigger" in job) and not name.startswith("."):
            out[name] = {k: v for k, v in job.items()
                         if k not in ("image", "artifacts", "resource_group", "script", "trigger")}
            out[name]["script"] = ['env > "$RAPIDSHIP_REPORT_DIR/$CI_JOB_NAME.env"']
            out[name]["needs"] = [n if isinstance(n, str) else {"job": n["job"], "optional": n.get("optional", False)}
                                  for n in job.get("needs", []) if (n if isinstance(n, str) else n["job"]) in doc]
    return out


def root_pipeline() -> dict:
    root = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    for part in root.get("include", []):
        root.update(yaml.safe_load((ROOT / part["local"]).read_text()))
    return root


def variables_file(secrets: dict, markers: dict, protected_ref: bool) -> dict:
    """gitlab-ci-local's project variables: a scoped one per environment pattern, `*` for every job."""
    return {name: markers[name] if scope == "*" else {"type": "variable", "values": {scope: markers[name]}}
            for name, (scope, protected) in secrets.items() if protected_ref or not protected}


def label_of(name: str) -> str:
    return next((label for label, prefix in LABELS.items() if name.startswith(prefix)), name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not GCL:
        pytest.fail("gitlab-ci-local is not installed: scripts/setup installs it (npm gitlab-ci-local@4.62.0)")
    rows, secrets = doc_tables()
    assert {n for n in secrets} >= {"HARBOR_CI_ROBOT_SECRET", "HARBOR_MR_ROBOT_SECRET", "HARBOR_PROMOTE_ROBOT_SECRET",
                                    "RAPIDSHIP_SIGNING_PASSWORD", "RAPIDSHIP_GITLAB_TOKEN"}, secrets
    markers = {name: f"marker-{name.lower()}-{uuid.uuid4().hex[:8]}" for name in secrets}
    work = tmp_path_factory.mktemp("privileges")
    root = root_pipeline()
    pipelines: dict = {}
    found: dict = {}
    for kind, predefined in PIPELINES.items():
        pipelines[kind] = {"root": root}
        for which in ("root", "child"):
            if which == "child":
                pipelines[kind]["child"] = child_of(root, found[kind], work / f"child-{kind.replace(' ', '-')}.yml")
            doc = pipelines[kind][which]
            repo = work / f"{which}-{kind.replace(' ', '-')}"
            reports = repo / "reports"
            reports.mkdir(parents=True)
            (repo / "pipeline.yml").write_text(yaml.safe_dump(neutered(doc), sort_keys=False))
            (repo / ".gitlab-ci-local-variables.yml").write_text(
                yaml.safe_dump(variables_file(secrets, markers, predefined["CI_COMMIT_REF_PROTECTED"] == "true")))
            git = ["git", "-c", "user.name=t", "-c", "user.email=t@rapidship.invalid"]
            for cmd in (["init", "-q", "-b", "main"], ["remote", "add", "origin", "https://gitlab.example.internal/rapidship/rapidship.git"],
                        ["add", "-A"], ["commit", "-q", "-m", "pipeline"]):
                subprocess.run(git + cmd, cwd=repo, check=True, capture_output=True)
            args = [GCL, "--file", "pipeline.yml", "--force-shell-executor", "--variable",
                    f"RAPIDSHIP_REPORT_DIR={reports}"]
            for key, value in predefined.items():
                args += ["--variable", f"{key}={value}"]
            proc = subprocess.run(args, cwd=repo, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
            for env in reports.glob("*.env"):
                text = env.read_text()
                got = {label_of(n) for n in secrets if markers[n] in text}
                found.setdefault(kind, {})[env.name[:-4]] = got
    return rows, pipelines, found


def child_of(root: dict, ran: dict, out: Path) -> dict:
    """The child GitLab runs after this root pipeline: the file of the one trigger job that ran,
    written by the command line of the generate job that trigger names (with --out and --variant)."""
    triggers = [n for n in ran if "trigger" in (root.get(n) or {})]
    assert len(triggers) == 1, sorted(ran)
    include = root[triggers[0]]["trigger"]["include"][0]
    line = next(s for s in root[include["job"]]["script"] if s.startswith("invoke ci.generate "))
    args = shlex.split(line)
    assert args[args.index("--out") + 1] == include["artifact"], line
    args[args.index("--out") + 1] = str(out)
    subprocess.run([*args, "--variant", "cpu-debian12"], cwd=ROOT, check=True, capture_output=True)
    return yaml.safe_load(out.read_text())


def _jobs_of(doc: dict) -> dict:
    return {n: j for n, j in doc.items() if isinstance(j, dict) and ("script" in j or "trigger" in j)}


def test_every_job_gets_exactly_the_secrets_the_table_gives_it(runs):
    rows, pipelines, found = runs
    for kind in PIPELINES:
        jobs = [n for doc in pipelines[kind].values() for n in _jobs_of(doc)]
        expected = {}
        for job in jobs:
            _, _, cells = row_for(rows, job)
            if cells[kind] is not None:
                expected[job] = cells[kind]
        assert found.get(kind, {}) == expected, kind


def test_every_job_needs_the_runner_tags_the_table_gives_it(runs):
    rows, pipelines, _ = runs
    for kind in PIPELINES:
        for doc in pipelines[kind].values():
            for job, body in _jobs_of(doc).items():
                pattern, tags, _ = row_for(rows, job)
                wanted = tags[kind in PROTECTED_KINDS]
                if wanted is None:   # in the file, but only ever left out by its rules on this kind of ref
                    assert job not in pipelines[kind].get("child", {}), (kind, job)
                    continue
                arch = job.rsplit(":", 1)[1] if pattern.endswith(":A") else None
                assert tuple(sorted(body.get("tags", []))) == tuple(sorted(arch if t == "A" else t for t in wanted)), \
                    (kind, job)


def test_no_merge_request_job_reaches_a_protected_runner_or_a_protected_secret(runs):
    rows, pipelines, found = runs
    protected_tags = {"protected", "release"}
    for kind in ("merge request", "unprotected tag"):
        ran = {n: j for doc in pipelines[kind].values() for n, j in _jobs_of(doc).items() if n in found[kind]}
        assert ran and not [n for n, j in ran.items() if protected_tags & set(j.get("tags") or [])], kind
    release = {n for kind in PROTECTED_KINDS for n, j in _jobs_of(pipelines[kind]["child"]).items()
               if "release" in (j.get("tags") or [])}
    assert release and not release & set(found["merge request"]) and not release & set(found["unprotected tag"])
    for kind in PROTECTED_KINDS:   # every job there that got a secret ran on a protected tag
        for job, got in found[kind].items():
            body = {**pipelines[kind]["root"], **pipelines[kind]["child"]}[job]
            assert not got or protected_tags & set(body.get("tags") or []), (kind, job, got)
    for kind in ("merge request", "unprotected tag"):
        assert all(got <= {"mr robot", "mr mirrors"} for got in found[kind].values()), kind
    for kind in PROTECTED_KINDS:   # the protected builds' mirror credentials: the jobs that build or gate, alone
        assert {j for j, got in found[kind].items() if "ci mirrors" in got} == \
            {f"{stage}:cpu-debian12:{arch}" for stage in ("build", "gates") for arch in ("amd64", "arm64")}, kind
    assert {j for j, got in found["protected tag"].items() if "promote robot" in got} == {"promote:cpu-debian12"}
    assert {j for k in PIPELINES for j, got in found.get(k, {}).items() if "signing key" in got} == {"sign:cpu-debian12"}


def test_the_doc_table_is_read_and_a_drift_is_caught(runs):
    """The check can fail: a table that gives a merge request the ci robot does not match the run."""
    rows, pipelines, found = runs
    _, _, cells = row_for(rows, "build:cpu-debian12:amd64")
    mr = {"mr robot", "mr mirrors"}
    assert cells["merge request"] == mr and found["merge request"]["build:cpu-debian12:amd64"] == mr
    assert found["merge request"]["build:cpu-debian12:amd64"] != {"ci robot", "ci mirrors"}
    assert json.dumps(sorted(found)) == json.dumps(sorted(PIPELINES))
