"""A docs page run as written: its runnable blocks, in order, in a scratch copy of the checkout.

Runnable blocks are fenced ```sh or ```bash (commands, run with `set -eux`: the first failing line
stops the page) or ```console (a transcript: `$ ` commands and what they print; each command's
printout is compared with the page's, so a stale figure or error wording fails). A runnable block
with a doc-check marker on the line before its fence is not run by its page: `not run here:
REASON` (a GPU, Harbor, a conda mirror, the network), or `run by tests/PATH.py` on a synopsis.
PAGES names, for every page with runnable blocks, the test that runs them; the marker test
(tests/unit/test_docs_blocks.py) fails on a runnable block of any other page."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from support.commands import ROOT

RUNNABLE = {"sh", "bash", "console"}
PAGES = {
    "docs/quickstart.md": "tests/integration/walkthrough/test_quickstart.py",
    "docs/deploy.md": "tests/integration/walkthrough/test_after_quickstart.py",
    "docs/scan.md": "tests/integration/walkthrough/test_after_quickstart.py",
    "docs/monitoring.md": "tests/integration/walkthrough/test_after_quickstart.py",
    "docs/ci.md": "tests/integration/ci/test_ci_local.py",
}
# pages run with the page's own image names (no run identity) and fixed names (a compose project,
# the quickstart's registry) take turns on a machine
PAGE_NAMES_LOCK = "/tmp/rapidship-quickstart.lock"

OPEN = re.compile(r"^(\s*)(`{3,})([^`\s]*)[^`]*$")
MARKER = re.compile(r"^<!--\s*doc-check:\s*(.*?)\s*-->$")
NOT_RUN = re.compile(r"not run here:\s*(.*)", re.S)
STEP = "@@doc-step {}@@"


@dataclass
class Block:
    line: int           # 1-based line of the opening fence
    lang: str
    body: list[str]
    before: str         # the non-blank line before the fence, stripped ("" at the top of the file)

    @property
    def marker(self) -> str | None:
        m = MARKER.match(self.before)
        return m.group(1) if m else None

    @property
    def not_run(self) -> bool:
        return self.marker is not None and NOT_RUN.fullmatch(self.marker) is not None


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


def runnable(page: str, root: Path = ROOT) -> list[Block]:
    """The page's blocks that run as written, in order: runnable fences without a marker (a marked
    one is not run here, or is a synopsis whose tasks another test runs)."""
    return [b for b in blocks((root / page).read_text()) if b.lang in RUNNABLE and b.marker is None]


def scratch_checkout(dest: Path, git: bool = False) -> Path:
    """The checkout's tracked and unignored files (what a clone with these edits holds), no build/;
    with git, as a fresh repository of one commit (no remote: a page adds what it needs)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file() and not rel.startswith("build/"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    if git:
        who = ["-c", "user.name=rapidship-test", "-c", "user.email=test@rapidship.invalid"]
        for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "snapshot of the checkout"]):
            subprocess.run(["git", *who, *cmd], cwd=dest, check=True, capture_output=True)
    return dest


def user_env(run_scoped: bool = False, **extra: str) -> dict[str, str]:
    """A new user's shell: no registry or signing variables; without run_scoped no run identity
    either, so images take the names the page prints (hold page_names_lock then)."""
    drop = ("RAPIDSHIP_REGISTRY", "RAPIDSHIP_SIGNING")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    if not run_scoped:
        env.pop("RAPIDSHIP_RUN_ID", None)
    env.update(extra)
    return env


_held = [0]  # how deep this process holds the lock


@contextlib.contextmanager
def page_names_lock():
    """One run at a time may use the page's own names, across processes. Re-entrant in a process:
    the walkthrough's package fixture holds it while a test of the package takes it again (a second
    flock of the same file in one process waits for the first: the suite hung there)."""
    if _held[0]:
        _held[0] += 1
        try:
            yield
        finally:
            _held[0] -= 1
        return
    with open(PAGE_NAMES_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _held[0] = 1
        try:
            yield
        finally:
            _held[0] = 0
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass
class Step:
    line: int            # the page's line of the `$ ` command
    command: str
    expected: list[str]  # what the page shows it printing


def steps(block: Block) -> list[Step]:
    """A console block's commands (`\\` continuations joined) and the lines each prints."""
    out: list[Step] = []
    body = iter(enumerate(block.body, start=block.line + 1))
    for number, line in body:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):
                command += "\n" + next(body)[1]
            out.append(Step(number, command, []))
        elif out:
            out[-1].expected.append(line)
        else:
            raise AssertionError(f"line {number}: a console block starts with a `$ ` command, not {line!r}")
    return out


def script(page_blocks: list[Block]) -> str:
    """One bash script of the blocks in order: sh blocks stop at their first failing line, console
    steps print a separator before each command so each printout is its own."""
    parts, n = [], 0
    for block in page_blocks:
        if block.lang != "console":
            parts.append("set -eux\n" + "\n".join(block.body) + "\nset +eux")
            continue
        for step in steps(block):
            # the separators keep $? for a next step `echo $?`
            parts.append(f"__rc=$?; echo '{STEP.format(n)}'; (exit $__rc)\n{step.command}\n"
                         "__rc=$?; echo \"@@doc-rc $__rc@@\"; (exit $__rc)")
            n += 1
    return "\n".join(parts) + "\n"


def run_page(page_blocks: list[Block], cwd: Path, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    """The blocks in one bash, stdout and stderr merged as a terminal shows them."""
    return subprocess.run(["bash", "-c", script(page_blocks)], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def printouts(output: str, count: int) -> list[tuple[str, int | None]]:
    """What each console step printed (the text between its separators) and its exit status."""
    pieces = re.split(r"^@@doc-step (\d+)@@\n", output, flags=re.M)
    found: dict[int, str] = {int(pieces[i]): pieces[i + 1] for i in range(1, len(pieces) - 1, 2)}
    out = []
    for i in range(count):
        text = found.get(i, "")
        rc = re.search(r"^@@doc-rc (\d+)@@$", text, re.M)
        out.append((text[:rc.start()] if rc else text, int(rc.group(1)) if rc else None))
    return out


BOX_RULE = re.compile(r"^[\s┏┳┓┡╇┩└┴┘━─┃│]*$")


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"[│┃\t]", line) if c.strip()]


def mismatches(page: str, step: Step, printed: str) -> list[str]:
    """Each line the page shows for the step that the run did not print: plain lines as words in the
    run's output (a terminal wraps them where a pipe does not), table rows as their cells, boxed on
    the page and tab-separated in a pipe."""
    words = " ".join(printed.split())
    rows = [cells(line) for line in printed.splitlines()]
    out = []
    if step.command.strip() == "echo $?":   # a status: the whole printout
        shown = "\n".join(step.expected).strip()
        return [] if printed.strip() == shown else [f"{page}:{step.line + 1}: the page shows exit status {shown}; "
                                                    f"the command before it exited {printed.strip()}"]
    for offset, line in enumerate(step.expected, start=1):
        where = f"{page}:{step.line + step.command.count(chr(10)) + offset}"
        if BOX_RULE.match(line):
            continue
        if "│" in line or "┃" in line:
            if cells(line) not in rows:
                out.append(f"{where}: the page's row {cells(line)} is not among the printed rows")
        elif " ".join(line.split()) not in words:
            out.append(f"{where}: the page says {line.strip()!r}; the run printed no such line")
    return out


def compare(page: str, page_blocks: list[Block], output: str) -> list[str]:
    """Every console step's printout against the page's; a step that failed must be followed by the
    page's `echo $?` showing it."""
    all_steps = [s for b in page_blocks if b.lang == "console" for s in steps(b)]
    out = []
    for i, (step, (printed, rc)) in enumerate(zip(all_steps, printouts(output, len(all_steps)))):
        shown = i + 1 < len(all_steps) and all_steps[i + 1].command.strip() == "echo $?"
        if rc is None:
            out.append(f"{page}:{step.line}: `{step.command[:60]}` never ran (an earlier sh line failed?)")
            continue
        if rc != 0 and not shown:
            out.append(f"{page}:{step.line}: `{step.command[:60]}` exited {rc}: {printed.strip()[-600:]}")
        out += mismatches(page, step, printed)
    return out
