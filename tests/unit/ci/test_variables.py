"""invoke ci.variables: a project's CI/CD variables (as GitLab's API lists them) that would hand a
merge-request job a credential of protected or release builds are refused, exit 2, naming the
variable; the setup docs/ci.md describes passes, and the check's rules are that page's table."""

from __future__ import annotations

import json
import re

import pytest

from rapidship.ci import variables
from support.commands import ROOT, invoke

DOC = ROOT / "docs" / "ci.md"


def doc_credentials() -> dict[str, tuple[str, bool]]:
    """name -> (environment scope, protected) of every masked or secret file row of docs/ci.md's
    CI variables table (no scope written: `*`)."""
    text = DOC.read_text()
    table = text[text.index("## CI variables"):].split("\n## ", 1)[0]
    out = {}
    for line in table.splitlines():
        m = re.match(r"\| (`[A-Z_]+`(?:, `[A-Z_]+`)*) \| ([^|]*) \|", line)
        if m and ("masked" in m.group(2) or "environment scope" in m.group(2)):
            scope = re.search(r"environment scope `([^`]+)`", m.group(2))
            for name in re.findall(r"`([A-Z_]+)`", m.group(1)):
                out[name] = (scope.group(1) if scope else "*", "protected" in m.group(2))
    return out


def as_documented() -> list[dict]:
    """The variables set as docs/ci.md says, each credential its own value."""
    return [{"key": c.name, "value": f"value-of-{c.name.lower()}", "variable_type": "file" if c.file else "env_var",
             "protected": c.protected, "masked": not c.file, "environment_scope": c.scope}
            for c in variables.CREDENTIALS] + [
        {"key": "HARBOR_HOST", "value": "harbor.example.internal", "variable_type": "env_var", "protected": False,
         "masked": False, "environment_scope": "*"}]


def test_the_checks_rules_are_the_doc_table():
    assert doc_credentials() == {c.name: (c.scope, c.protected) for c in variables.CREDENTIALS}
    assert not set(variables.MAPPED) & set(doc_credentials())   # never set as project variables
    assert {"RAPIDSHIP_PIP_INDEX_URL", "RAPIDSHIP_CONDA_CHANNELS", "RAPIDSHIP_REGISTRY_PASSWORD"} <= set(variables.MAPPED)


def test_the_documented_setup_passes(tmp_path):
    path = tmp_path / "variables.json"
    path.write_text(json.dumps(as_documented()))
    assert variables.problems(as_documented()) == []
    proc = invoke("ci.variables", "--file", str(path), check=False)
    assert proc.returncode == 0, proc.stderr
    without_mr_mirrors = [v for v in as_documented() if not v["key"].startswith("RAPIDSHIP_MR_")]   # MR builds: none
    assert variables.problems(without_mr_mirrors) == []


def _set(key: str, **fields):
    return [({**v, **fields} if v["key"] == key else v) for v in as_documented()]


MIRROR_FOR_EVERY_JOB = {"key": "RAPIDSHIP_PIP_INDEX_URL", "value": "https://u:token@pypi.mirror/simple",
                        "variable_type": "env_var", "protected": False, "masked": True, "environment_scope": "*"}


@pytest.mark.parametrize("setup, words", [
    # what docs/ci.md used to say: masked only, so every job (merge requests' too) got the mirror token
    (as_documented() + [MIRROR_FOR_EVERY_JOB], "RAPIDSHIP_PIP_INDEX_URL (environment scope *) is a project variable"),
    (as_documented() + [{**MIRROR_FOR_EVERY_JOB, "key": "RAPIDSHIP_CONDA_CHANNELS", "protected": True,
                         "environment_scope": "ci-build"}], "RAPIDSHIP_CONDA_CHANNELS (environment scope ci-build) is a "
                                                           "project variable"),
    (_set("RAPIDSHIP_CI_PIP_INDEX_URL", protected=False), "RAPIDSHIP_CI_PIP_INDEX_URL (environment scope ci-build) is "
                                                          "not protected"),
    (_set("RAPIDSHIP_CI_CONDA_CHANNELS", environment_scope="*"), "RAPIDSHIP_CI_CONDA_CHANNELS (environment scope *) "
                                                                 "must be scoped to the environment ci-build"),
    (_set("RAPIDSHIP_MR_PIP_INDEX_URL", value="value-of-rapidship_ci_pip_index_url"),
     "RAPIDSHIP_MR_PIP_INDEX_URL holds the same value as RAPIDSHIP_CI_PIP_INDEX_URL"),
    (_set("HARBOR_MR_ROBOT_SECRET", value="value-of-harbor_ci_robot_secret"),
     "HARBOR_MR_ROBOT_SECRET holds the same value as HARBOR_CI_ROBOT_SECRET"),
    (_set("HARBOR_MR_ROBOT_SECRET", environment_scope="*"), "must be scoped to the environment mr-*"),
    (_set("HARBOR_CI_ROBOT_SECRET", masked=False), "HARBOR_CI_ROBOT_SECRET (environment scope ci-*) is not masked"),
    (_set("RAPIDSHIP_SIGNING_KEY", variable_type="env_var"), "RAPIDSHIP_SIGNING_KEY (environment scope ci-signing) "
                                                             "must be a file variable"),
])
def test_a_setup_that_hands_merge_requests_a_protected_credential_is_exit_2_naming_it(tmp_path, setup, words):
    path = tmp_path / "variables.json"
    path.write_text(json.dumps(setup))
    proc = invoke("ci.variables", "--file", str(path), check=False)
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and words in said, proc.stderr
    assert proc.stderr.count("error:") == 1 and str(path) in said
    assert "https://u:token@pypi.mirror" not in proc.stderr + proc.stdout and "value-of" not in said   # values unsaid


@pytest.mark.parametrize("text, words", [("not json", "cannot read it as JSON"), ('{"key": "X"}', "is not a list")])
def test_a_file_that_is_no_variables_list_is_one_error_naming_it(tmp_path, text, words):
    path = tmp_path / "variables.json"
    path.write_text(text)
    proc = invoke("ci.variables", "--file", str(path), check=False)
    assert proc.returncode == 2 and words in " ".join(proc.stderr.split()) and "Traceback" not in proc.stderr
    proc = invoke("ci.variables", check=False)
    assert proc.returncode == 2 and "--file" in proc.stderr
