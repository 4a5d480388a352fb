"""Every `invoke` command the README and docs/ show names a task that exists and flags it takes:
in fenced blocks (continuation lines joined) and in inline code. A renamed task or flag fails here,
not in a newcomer's shell. (docs/quickstart.md is also run as written: tests/integration/walkthrough.)"""

from __future__ import annotations

import re
import shlex
import sys

import pytest

from support.commands import ROOT

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs/measurements").glob("*.md")])
INVOKE_OWN = {"--help", "-h", "--list", "-l", "--complete", "--echo", "-e", "--dry", "-d"}


def task_flags() -> dict[str, set[str]]:
    sys.path.insert(0, str(ROOT))
    import tasks  # noqa: PLC0415 - the project's own invoke collection

    out: dict[str, set[str]] = {}
    for name in tasks.ns.task_names:
        flags: set[str] = set()
        for arg in tasks.ns[name].get_arguments():
            long = arg.names[0]
            flags.add(f"--{long}")
            if arg.kind is bool:
                flags.add(f"--no-{long}")
        out[name] = flags
    return out


def commands(text: str) -> list[str]:
    """`invoke ...` commands: each line of a fenced block (with its `\\` continuations) that runs
    invoke, and each inline code span that starts with it."""
    found = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = " ".join(line.strip().removeprefix("$ ").split())
            line = re.sub(r"^(?:- |script: |command: )+['\"]?", "", line).rstrip("'\"")   # a CI YAML job's script line
            for part in re.split(r"&&|;|\|\|", line):
                part = part.strip()
                if part.startswith("invoke "):
                    found.append(part)
    found += [m for m in re.findall(r"`(invoke [^`]+)`", text)]
    return found


def check(command: str, flags: dict[str, set[str]]) -> str | None:
    """Why the command cannot run as written (None: it can). Synopsis brackets and placeholders are
    read as the flags they show."""
    text = re.sub(r"[\[\]{}()|…]", " ", command.split("#", 1)[0])
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    words = words[1:]
    if not words or words[0].startswith("-"):
        return None if not words or words[0] in INVOKE_OWN else f"invoke's own flag {words[0]} is unknown"
    name = words[0]
    if name not in flags:
        return f"no task {name!r}"
    for word in words[1:]:
        if word.startswith("--"):
            flag = word.split("=", 1)[0]
            if flag not in flags[name] and flag not in INVOKE_OWN:
                return f"task {name} takes no {flag}"
        elif re.fullmatch(r"[a-z][a-z0-9-]*(\.[a-z-]+)?", word) and word in flags and word != name:
            continue   # `invoke lock render`: invoke runs tasks one after another
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_invoke_command_in_the_docs_names_a_task_and_flags_it_takes(doc):
    flags = task_flags()
    bad = [f"{cmd!r}: {why}" for cmd in commands(doc.read_text()) if (why := check(cmd, flags))]
    assert bad == [], f"{doc.relative_to(ROOT)}:\n  " + "\n  ".join(bad)


def test_the_check_catches_a_renamed_task_and_an_unknown_flag():
    flags = task_flags()
    assert check("invoke smoke --cluster 2 --metrics", flags) is None
    assert check("invoke smoke --variant cpu-debian12 [--memory 1g] [--metrics-targets FILE]", flags) is None
    assert check("invoke smoke --metrics-target F", flags) == "task smoke takes no --metrics-target"
    assert check("invoke registry.start", flags) == "no task 'registry.start'"
    assert check("invoke build --variants x", flags) == "task build takes no --variants"
    assert commands("text `invoke push --arch amd64` and\n```\n$ invoke base \\\n  --os debian12 && ls\n```\n") == [
        "invoke base --os debian12", "invoke push --arch amd64"]
    assert commands("```yaml\nscan:\n  script:\n    - invoke scan --variant x\n```\n") == ["invoke scan --variant x"]
