"""Every fenced block in the README and docs/ that shows commands is run by a test or says why not.

A runnable block, fenced ```sh / ```bash (commands) or ```console (`$ ` commands and what they
print), runs as written: tests/support/doc_pages.py's PAGES names the test that runs its page's
runnable blocks in order in a scratch checkout (and compares a console block's printout with the
page's). A block the suite cannot run says so on the line before its fence; so does a synopsis
(options in brackets, placeholders), which no shell can run as written:

    <!-- doc-check: not run here: REASON -->        why a CI machine cannot (a GPU, Harbor, a conda
                                                    mirror, the network, a site's own files, ...)
    <!-- doc-check: run by tests/PATH.py -->        a synopsis whose tasks that test runs (every
                                                    `invoke TASK` of the block appears in it)

A block nobody runs and nobody explains is how a doc goes stale; a literal block behind a `run by`
marker is one nobody runs as written, so that marker is refused on a block without placeholders."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from support.commands import ROOT
from support.doc_pages import MARKER, NOT_RUN, PAGES, RUNNABLE, Block, blocks, compare, run_page, runnable

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs/measurements").glob("*.md")])
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
RUN_BY = re.compile(r"run by (tests/\S+\.py)")
# what a synopsis shows and a shell cannot run: [options], <names>, a | b, ..., NAMES in capitals
PLACEHOLDER = re.compile(r"[\[\]<>…]|\.\.\.|\s\|\s|\b[A-Z][A-Z0-9_]*\b(?!=)")


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


def synopsis(block: Block) -> bool:
    """The block's commands show placeholders (comments aside): a shell cannot run them as written."""
    return any(PLACEHOLDER.search(line.split(" #", 1)[0]) for line in command_lines(block))


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
        if command_lines(block) and not synopsis(block):
            return (f"a block that runs as written behind 'run by {path}': fence it ```sh (```console with its "
                    "output) so its page's run runs it, or say why not (not run here: REASON)")
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


def page_problem(name: str, root: Path, pages: dict[str, str]) -> str | None:
    """Why no test runs the page's runnable blocks (None: PAGES names one that runs this page)."""
    test = pages.get(name)
    if test is None:
        return ("a runnable block, and no test runs this page: name its test in PAGES "
                "(tests/support/doc_pages.py), or say why not (not run here: REASON)")
    if not (root / test).is_file():
        return f"PAGES names {test} for this page, which does not exist"
    if name not in (root / test).read_text():
        return f"{test}, named in PAGES for this page, never names {name}"
    return None


def problems(name: str, text: str, root: Path = ROOT, known: set[str] | None = None,
             pages: dict[str, str] = PAGES) -> list[str]:
    """file:line and what is wrong, for each runnable block no test runs, each command block
    without a marker and each bad marker."""
    out = []
    for block in blocks(text):
        marked = MARKER.match(block.before) is not None
        if (why := marker_problem(block, root, known)) is not None:
            out.append(f"{name}:{block.line}: {why}")
        elif not marked and block.lang in RUNNABLE:
            if (why := page_problem(name, root, pages)) is not None:
                out.append(f"{name}:{block.line}: {why}")
        elif not marked and (cmds := command_lines(block)):
            out.append(f"{name}:{block.line}: a block of commands ({cmds[0][:60]!r}) without a doc-check marker "
                       "on the line before its fence (fence it ```sh to run it as written, or run by "
                       "tests/PATH.py for a synopsis, or not run here: REASON)")
    return out


def task_names() -> set[str]:
    sys.path.insert(0, str(ROOT))
    import tasks  # noqa: PLC0415 - the project's own invoke collection

    return set(tasks.ns.task_names)


def test_every_command_block_in_the_docs_is_run_by_a_test_or_says_why_not():
    known = task_names()
    bad = []
    for doc in DOCS:
        bad += problems(doc.relative_to(ROOT).as_posix(), doc.read_text(), ROOT, known)
    assert bad == [], "command blocks neither run by a test nor explained:\n  " + "\n  ".join(bad)


def test_every_page_named_in_pages_has_blocks_its_test_runs():
    for page, test in PAGES.items():
        assert runnable(page), f"{page} is in PAGES but has no runnable block left"
        assert page in (ROOT / test).read_text(), f"{test} never names {page}"


def test_the_check_catches_an_unmarked_block_and_a_marker_naming_a_missing_file():
    text = "\n".join([
        "# Demo",                                                                          # 1
        "",
        "<!-- doc-check: run by tests/integration/smoke/test_cluster_docker.py -->",
        "```sh",                                                                           # 4
        "$ invoke smoke --cluster N",
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
        "invoke export --variant cpu-debian12 --out DIR",
        "```",
        "",
        "```",                                                                             # 33
        "error: rapids-doctor: FATAL: output, not a command",
        "   export ─────┼──▶ disc volumes; import / verify check them first       <out>/export.json",
        "   dask worker memory_limit           106.99 GiB x 1 worker(s), headroom 18.88 GiB",
        "   dask target/spill/pause/terminate  default/default/default/default",
        "```",
        "",
        "<!-- doc-check: run by tests/integration/gates/test_scan.py -->",
        "```",                                                                             # 41
        "invoke scan --variant cpu-debian12 --arch amd64",
        "```",
        "",
        "```sh",                                                                           # 45
        "invoke gates --variant cpu-debian12",
        "```",
        "",
    ])
    found = problems("demo.md", text, ROOT, {"smoke", "scan", "export", "gates"}, pages={})
    assert [p.split(": ", 1)[0] for p in found] == ["demo.md:14", "demo.md:19", "demo.md:24", "demo.md:29",
                                                    "demo.md:41", "demo.md:45"], found
    assert "without a doc-check marker" in found[0]
    assert "tests/integration/nowhere/test_missing.py, which does not exist" in found[1]
    assert "at least 3 words" in found[2]
    assert "never runs invoke export" in found[3]
    assert "runs as written behind 'run by" in found[4]     # a literal block nobody runs as written
    assert "no test runs this page" in found[5]             # a runnable block no page run reaches
    this = "tests/unit/test_docs_blocks.py"                  # names demo.md: a test that runs it
    assert [p.split(": ", 1)[0] for p in problems("demo.md", text, ROOT, {"smoke", "scan", "export", "gates"},
                                                  pages={"demo.md": this})][-1] == "demo.md:41"
    elsewhere = "tests/support/commands.py"                  # a file that never names the page
    assert "never names other.md" in problems("other.md", "```sh\ntrue\n```\n", ROOT, set(),
                                              {"other.md": elsewhere})[0]
    assert [len(command_lines(b)) for b in blocks(text)] == [1, 1, 1, 1, 1, 1, 0, 1, 1]
    assert command_lines(blocks("```\nexport A=b\n  dask cuda worker tcp://s:8786   # a GPU\n$ cd x\n```\n")[0]) == [
        "export A=b", "dask cuda worker tcp://s:8786   # a GPU", "$ cd x"]
    assert invoked_tasks(blocks("```\n$ invoke base build --os x && invoke gates \\\n  --variant v\n```\n")[0],
                         {"base", "build", "gates"}) == ["base", "build", "gates"]


def test_a_console_block_whose_printout_went_stale_fails(tmp_path):
    page = "\n".join([
        "```console",
        "$ printf 'trivy 0.59.1: rapidship/dask (debian 12.15, 132 packages), policy p.yaml\\n'",
        "trivy 0.59.1: rapidship/dask (debian 12.15, 131 packages),",
        "policy p.yaml",
        "$ printf 'LOW\\t2\\t0\\n'; (exit 1)",
        "│ LOW      │ 2     │ 0       │",
        "$ echo $?",
        "1",
        "$ printf 'error: scan: 2 finding(s) fail the policy\\n' >&2; false",
        "error: scan: 2 findings fail the policy",
        "```",
    ])
    (tmp_path / "demo.md").write_text(page)
    got = runnable("demo.md", tmp_path)
    proc = run_page(got, tmp_path, {"PATH": "/usr/bin:/bin"}, timeout=30)
    found = compare("demo.md", got, proc.stdout)
    assert [f.split(": ", 1)[0] for f in found] == ["demo.md:3", "demo.md:9", "demo.md:10"], found
    assert "'trivy 0.59.1: rapidship/dask (debian 12.15, 131 packages),'" in found[0]   # the stale figure
    assert "exited 1" in found[1]                    # a failure the page does not show with `echo $?`
    assert "2 findings fail the policy" in found[2]  # the stale wording (stderr is compared too)
    assert not [f for f in found if "LOW" in f or "policy p.yaml'" in f]   # a boxed row = its tab-separated cells
