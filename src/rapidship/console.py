"""Where people read output: one rich console on stderr, so stdout stays clean for JSON."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, is_dataclass
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table

# Outside a terminal (a CI log, a pipe) rich would wrap at 80 columns and cut table cells to "cuda1…":
# logs get a wide console instead; $COLUMNS still wins, as in a terminal.
LOG_WIDTH = 200
err = Console(stderr=True, width=None if sys.stderr.isatty() or os.environ.get("COLUMNS") else LOG_WIDTH)


def as_jsonable(value: Any) -> Any:
    if is_dataclass(value):
        return asdict(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def print_json(value: Any) -> None:
    """Machine-read output goes to stdout as JSON, nothing else."""
    print(json.dumps(as_jsonable(value), indent=2, default=str))


def table(title: str, columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> None:
    err.print(f"[bold]{title}[/]")  # a title above, not in, the table: long image refs would wrap
    tab = Table()
    for column in columns:
        tab.add_column(column, overflow="fold")  # a long id wraps onto the next line, never cut to "…"
    for row in rows:
        tab.add_row(*(str(c) for c in row))
    err.print(tab)
