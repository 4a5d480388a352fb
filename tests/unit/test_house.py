"""The house's arrows point down: tasks.py -> cli/ -> release/ -> stages/ -> the stage packages. The
release composes the stage functions its tasks call (it imports no task), and the docs generator reads
the task collection it is handed (it imports no tasks.py back)."""

from __future__ import annotations

import ast
from pathlib import Path

from support.commands import ROOT

SRC = ROOT / "src" / "rapidship"


def imports(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def up(folder: str, above: tuple[str, ...]) -> dict[str, set[str]]:
    return {str(p.relative_to(ROOT)): bad for p in sorted((SRC / folder).rglob("*.py"))
            if (bad := {m for m in imports(p) if m == "tasks" or m.startswith(above)})}


def test_nothing_under_src_imports_tasks_py():
    assert up(".", ("tasks",)) == {}


def test_the_release_and_the_stages_import_no_task():
    assert up("release", ("rapidship.cli",)) == {} and up("stages", ("rapidship.cli", "rapidship.release")) == {}
