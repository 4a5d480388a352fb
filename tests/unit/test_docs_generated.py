"""The docs' generated parts are what their sources make: docs/tasks.md is every task's own
`invoke --help`, the README's picture and variant table and docs/sizes.md's table are the code's
and the records'. A task whose help changes, a record that changes, or a hand edit inside a
generated region fails here until `invoke docs.generate` is run. The README stays an entry: its
two set-up-and-go commands are what CI runs, and it stays under 120 lines."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from rapidship.config.matrix import load_matrix
from rapidship.docs import reference, regions
from rapidship.docs.pages import TASKS_PAGE, generated, stale
from support.commands import ROOT


@pytest.fixture(scope="module")
def ns():
    sys.path.insert(0, str(ROOT))
    import tasks  # noqa: PLC0415 - the project's own invoke collection

    return tasks.ns


def copy(tmp_path):
    """The pages with generated parts and the records they read, in a scratch root."""
    for rel in ("README.md", "docs/sizes.md", "docs/measurements/benchmarks.md", "docs/measurements/export.md",
                TASKS_PAGE):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, tmp_path / rel)
    for records in [ROOT / "docs/measurements/images", *(ROOT / "docs/measurements").glob("release-chain-*"),
                    *(ROOT / "docs/measurements").glob("patch-day-*"),
                    *(ROOT / "docs/measurements").glob("import-floor-*")]:
        shutil.copytree(records, tmp_path / records.relative_to(ROOT))
    return tmp_path


def test_the_committed_pages_are_what_invoke_docs_generate_makes():
    run = subprocess.run(["invoke", "docs.generate", "--check"], cwd=ROOT, capture_output=True, text=True,
                         check=False, timeout=120)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("task", ["build", "ci.generate", "prune"])
def test_the_reference_holds_what_invoke_help_prints(task):
    printed = subprocess.run(["invoke", "--help", task], cwd=ROOT, capture_output=True, text=True, check=True,
                             timeout=60).stdout
    page = (ROOT / TASKS_PAGE).read_text()
    block = page.split(f"### `invoke {task}`\n", 1)[1].split("```text\n", 1)[1].split("\n```", 1)[0]
    assert block == "\n".join(line.rstrip() for line in printed.strip("\n").splitlines())


def test_every_task_has_its_section(ns):
    page = (ROOT / TASKS_PAGE).read_text()
    assert sorted(re.findall(r"^### `invoke (\S+)`$", page, re.M)) == sorted(ns.task_names)


def test_a_help_that_changed_a_record_that_changed_and_a_hand_edit_are_each_stale(tmp_path, ns):
    root, m = copy(tmp_path), load_matrix(ROOT / "variants.yaml")
    assert stale(root, ns, m) == []
    tasks_page = root / TASKS_PAGE
    tasks_page.write_text(tasks_page.read_text().replace("variant id", "variant name", 1))
    assert stale(root, ns, m) == [TASKS_PAGE]
    record = root / "docs/measurements/images/cuda12-debian12-amd64-80-90.json"
    raw = json.loads(record.read_text())
    record.write_text(json.dumps({**raw, "size_bytes": raw["size_bytes"] + 1}))
    assert stale(root, ns, m) == [TASKS_PAGE, "docs/sizes.md"]     # the README's 3.50 GB still holds
    record.write_text(json.dumps({**raw, "size_bytes": raw["size_bytes"] + 20_000_000}))
    assert stale(root, ns, m) == [TASKS_PAGE, "README.md", "docs/sizes.md"]
    for page, text in generated(root, ns, m).items():
        (root / page).write_text(text)
    assert stale(root, ns, m) == []
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("| `cpu-debian12` | - |", "| `cpu-debian12` | 12.9 |"))
    assert stale(root, ns, m) == ["README.md"]


def test_a_release_chain_record_that_changed_makes_the_benchmarks_page_stale(tmp_path, ns):
    root, m = copy(tmp_path), load_matrix(ROOT / "variants.yaml")
    (record,) = sorted((root / "docs/measurements").glob("release-chain-*"))[-1].glob("cpu-debian12-amd64.json")
    raw = json.loads(record.read_text())
    raw["releases"]["delta"]["chain_s"] += 1
    record.write_text(json.dumps(raw))
    assert stale(root, ns, m) == ["docs/measurements/benchmarks.md"]


def test_a_task_in_no_family_is_named():
    from rapidship.errors import ConfigError

    with pytest.raises(ConfigError, match="tasks in no family: brand-new"):
        reference.grouping(["build", "brand-new"])


def test_a_page_without_its_region_is_one_clear_error():
    from rapidship.errors import ConfigError

    with pytest.raises(ConfigError, match="README.md: has no generated region 'variants'"):
        regions.splice("# no markers\n", "README.md", "variants", "x")


def test_the_readme_is_an_entry_with_the_two_commands_ci_runs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 120
    ci = (ROOT / ".ci/run").read_text()
    setup = re.search(r"^```sh\n(.*?)^```", text.split("## Set up and go", 1)[1], re.S | re.M).group(1)
    commands = [line.split("#", 1)[0].strip() for line in setup.splitlines()]
    assert commands == ["bash scripts/setup && invoke base build gates", "bash scripts/setup && python3 -m pytest"]
    assert "bash scripts/setup" in ci and "\npython3 -m pytest\n" in ci


def test_a_patch_day_record_that_changed_makes_the_export_page_stale(tmp_path, ns):
    root, m = copy(tmp_path), load_matrix(ROOT / "variants.yaml")
    (record,) = sorted((root / "docs/measurements").glob("patch-day-*"))[-1].glob("a-cudf-hotfix-*.json")
    raw = json.loads(record.read_text())
    raw["imports"]["delta_import_s"] += 1
    record.write_text(json.dumps(raw))
    assert stale(root, ns, m) == ["docs/measurements/export.md"]
