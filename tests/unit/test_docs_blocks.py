"""Every fenced block in the README and docs/ that shows commands says, on the line before its
fence, whether the test suite runs it:

    <!-- doc-check: run by tests/PATH.py -->        that test runs these commands (every `invoke
                                                    TASK` of the block appears in it)
    <!-- doc-check: not run here: REASON -->        why a plain CI machine cannot (a GPU, Harbor,
                                                    a mirror, the network, ...)

A block nobody runs and nobody explains is how a doc goes stale. docs/quickstart.md carries no
markers: tests/integration/walkthrough/test_quickstart.py runs its blocks as written."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from support.commands import ROOT

QUICKSTART = "docs/quickstart.md"
QUICKSTART_TEST = "tests/integration/walkthrough/test_quickstart.py"
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
COMMANDS = {"invoke", "docker", "docker-compose", "sh", "bash", "python", "python3", "curl", "sudo", "promtool",
            "nvidia-smi", "rapids-doctor", "rapids-smoke", "dask", "export", "cd", "git", "pip", "skopeo", "cosign",
            "trivy", "mount", "xorriso", "genisoimage", "apt", "apt-get", "kubectl"}
# A row of a diagram or an output table may start with a command's word (`export ──▶ disc volumes ...
# <out>/export.json`, the doctor's `dask worker memory_limit   106.99 GiB`, `dask target/spill/...`):
# aligned columns (a run of spaces before more than a comment), or an argument no shell would give
# that word, say it is no command.
COLUMNS = re.compile(r"\S {3,}[^\s#]")
ARGUMENT = {"export": re.compile(r"-|[A-Za-z_][A-Za-z0-9_]*(=|$)"),
            "dask": re.compile(r"-|(scheduler|worker|cuda|ssh|spec|config|info|docs|mpi)$")}
OPEN = re.compile(r"^(\s*)(`{3,})([^`\s]*)[^`]*$")
MARKER = re.compile(r"^<!--\s*doc-check:\s*(.*?)\s*-->$")
RUN_BY = re.compile(r"run by (tests/\S+\.py)")
NOT_RUN = re.compile(r"not run here:\s*(.*)", re.S)


@dataclass
class Block:
    line: int           # 1-based line of the opening fence
    lang: str
    body: list[str]
    before: str         # the non-blank line before the fence, stripped ("" at the top of the file)


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a markdown text (``` fences, indented ones in lists too)."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(2)
        j = i + 1
        while j < len(lines) and not re.fullmatch(rf"\s*{fence}`*\s*", lines[j]):
            j += 1
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        found.append(Block(i + 1, m.group(3), lines[i + 1:j], before))
        i = j + 1
    return found


def command_lines(block: Block) -> list[str]:
    """The block's lines that run a command (after an optional `$ ` prompt)."""
    out = []
    for line in block.body:
        words = line.strip().removeprefix("$ ").split()
        if not words or words[0] not in COMMANDS:
            continue
        if COLUMNS.search(line.strip()) or (len(words) > 1 and words[0] in ARGUMENT
                                            and not ARGUMENT[words[0]].match(words[1])):
            continue
        out.append(line.strip())
    return out


def invoked_tasks(block: Block, known: set[str] | None = None) -> list[str]:
    """The tasks the block's `invoke` commands name: the first word after `invoke`, and the words
    after it that are tasks too (`invoke base build gates` runs three)."""
    tasks: list[str] = []
    text = "\n".join(block.body).replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip().removeprefix("$ ")
        for part in re.split(r"&&|;|\|\||\|", line):
            words = part.split()
            if len(words) < 2 or words[0] != "invoke" or words[1].startswith("-"):
                continue
            named = [words[1]]
            for word in words[2:]:
                if known is None or word not in known:
                    break
                named.append(word)
            tasks += [t for t in named if t not in tasks]
    return tasks


def marker_problem(block: Block, root: Path, known: set[str] | None = None) -> str | None:
    """What is wrong with the block's marker (None: it is fine, or there is none to judge)."""
    m = MARKER.match(block.before)
    if not m:
        return None
    what = m.group(1)
    if run := RUN_BY.fullmatch(what):
        path = run.group(1)
        test = root / path
        if not test.is_file():
            return f"marker names {path}, which does not exist"
        source = test.read_text()
        missing = [t for t in invoked_tasks(block, known) if f'"{t}"' not in source and f"invoke {t}" not in source]
        if missing:
            return f"{path} never runs invoke {', '.join(missing)} (no \"TASK\" or `invoke TASK` in it)"
        return None
    if not_run := NOT_RUN.fullmatch(what):
        reason = not_run.group(1).strip()
        if len(reason.split()) < 3:
            return f"'not run here' needs a reason of at least 3 words, not {reason!r}"
        return None
    return (f"doc-check marker {what!r} is neither 'run by tests/PATH.py' "
            "nor 'not run here: REASON'")


def problems(name: str, text: str, root: Path = ROOT, known: set[str] | None = None) -> list[str]:
    """file:line and what is wrong, for each command block without a marker and each bad marker."""
    out = []
    for block in blocks(text):
        marked = MARKER.match(block.before) is not None
        if (why := marker_problem(block, root, known)) is not None:
            out.append(f"{name}:{block.line}: {why}")
        elif not marked and (cmds := command_lines(block)):
            out.append(f"{name}:{block.line}: a block of commands ({cmds[0][:60]!r}) without a doc-check marker "
                       "on the line before its fence (run by tests/PATH.py, or not run here: REASON)")
    return out


def task_names() -> set[str]:
    sys.path.insert(0, str(ROOT))
    import tasks  # noqa: PLC0415 - the project's own invoke collection

    return set(tasks.ns.task_names)


def test_every_command_block_in_the_docs_is_run_by_a_test_or_says_why_not():
    known = task_names()
    bad = []
    for doc in DOCS:
        name = doc.relative_to(ROOT).as_posix()
        if name != QUICKSTART:
            bad += problems(name, doc.read_text(), ROOT, known)
    assert bad == [], "command blocks neither run by a test nor explained:\n  " + "\n  ".join(bad)


def test_the_quickstart_is_run_as_written():
    assert (ROOT / QUICKSTART).is_file() and (ROOT / QUICKSTART_TEST).is_file()
    assert "quickstart.md" in (ROOT / QUICKSTART_TEST).read_text()


def test_the_check_catches_an_unmarked_block_and_a_marker_naming_a_missing_file():
    text = "\n".join([
        "# Demo",                                                                          # 1
        "",
        "<!-- doc-check: run by tests/integration/smoke/test_cluster_docker.py -->",
        "```sh",                                                                           # 4
        "$ invoke smoke --cluster 2",
        "```",
        "",
        "<!-- doc-check: not run here: needs a GPU and the NVIDIA container toolkit -->",
        "```sh",                                                                           # 9
        "nvidia-smi",
        "```",
        "",
        "Some text.",
        "```",                                                                             # 14
        "docker run --rm IMAGE rapids-doctor",
        "```",
        "",
        "<!-- doc-check: run by tests/integration/nowhere/test_missing.py -->",
        "```sh",                                                                           # 19
        "invoke scan --variant cpu-debian12",
        "```",
        "",
        "<!-- doc-check: not run here: GPU -->",
        "```sh",                                                                           # 24
        "rapids-doctor --preflight",
        "```",
        "",
        "<!-- doc-check: run by tests/integration/smoke/test_cluster_docker.py -->",
        "```sh",                                                                           # 29
        "invoke export --variant cpu-debian12 --out d",
        "```",
        "",
        "```",                                                                             # 33
        "error: rapids-doctor: FATAL: output, not a command",
        "   export ─────┼──▶ disc volumes; import / verify check them first       <out>/export.json",
        "   dask worker memory_limit           106.99 GiB x 1 worker(s), headroom 18.88 GiB",
        "   dask target/spill/pause/terminate  default/default/default/default",
        "```",
        "",
    ])
    found = problems("demo.md", text, ROOT, {"smoke", "scan", "export"})
    assert [p.split(": ", 1)[0] for p in found] == ["demo.md:14", "demo.md:19", "demo.md:24", "demo.md:29"], found
    assert "without a doc-check marker" in found[0]
    assert "tests/integration/nowhere/test_missing.py, which does not exist" in found[1]
    assert "at least 3 words" in found[2]
    assert "never runs invoke export" in found[3]
    assert [len(command_lines(b)) for b in blocks(text)] == [1, 1, 1, 1, 1, 1, 0]
    assert command_lines(blocks("```\nexport A=b\n  dask cuda worker tcp://s:8786   # a GPU\n$ cd x\n```\n")[0]) == [
        "export A=b", "dask cuda worker tcp://s:8786   # a GPU", "$ cd x"]
    assert invoked_tasks(blocks("```\n$ invoke base build --os x && invoke gates \\\n  --variant v\n```\n")[0],
                         {"base", "build", "gates"}) == ["base", "build", "gates"]
