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


def counted(n: int, one: str, many: str | None = None) -> str:
    """'1 arch', '2 arches': a count and its word, agreeing."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def print_json(value: Any) -> None:
    """Machine-read output goes to stdout as JSON, nothing else."""
    print(json.dumps(as_jsonable(value), indent=2, default=str))


def table(title: str, columns: Iterable[str], rows: Iterable[Iterable[Any]], stdout: bool = False) -> None:
    """A table for people: boxed in a terminal; outside one (a pipe, a CI log) one tab-separated
    line per row under a header, which neither folds a long id into a tall cell nor runs 200
    columns wide, and which grep, cut and less read. `stdout`: the table is the task's output (no
    JSON beside it), so `| less` shows it."""
    stream = sys.stdout if stdout else sys.stderr
    rows = [[str(c) for c in row] for row in rows]
    if not stream.isatty():
        print(f"# {title}", file=stream)
        for line in ([list(columns)] + rows):
            print("\t".join(cell.replace("\t", " ").replace("\n", " ") for cell in line), file=stream)
        stream.flush()
        return
    console = Console() if stdout else err
    console.print(f"[bold]{title}[/]")  # a title above, not in, the table: long image refs would wrap
    tab = Table()
    for column in columns:
        tab.add_column(column, overflow="fold")  # a long id wraps onto the next line, never cut to "…"
    for row in rows:
        tab.add_row(*row)
    console.print(tab)


class LogStatus:
    """What `status` gives outside a terminal (a CI log, a pipe), where rich's spinner prints nothing:
    a line when the work starts, one per new step with the seconds since the start, a heartbeat
    every `every` seconds while a step is long (with `detail()`, e.g. a log's last line), and one
    when it ends. Stepping the same message twice prints it once."""

    def __init__(self, text: str, every: float = 60.0, detail=None, clock=None, out=None) -> None:
        import time

        self.text, self.every, self.detail = text, every, detail
        self.clock = clock or time.monotonic
        self.out = out or err
        self.last = ""
        self._stop = None

    def _line(self, msg: str) -> None:
        self.out.print(f"  [{self.clock() - self.t0:6.0f} s] {msg}", markup=False, highlight=False)

    def update(self, msg: str) -> None:
        if msg != self.last:
            self.last = msg
            self._line(msg)

    def beat(self) -> None:
        extra = self.detail() if self.detail else ""
        self._line(f"still running: {self.last or self.text}" + (f" | {extra}" if extra else ""))

    def __enter__(self) -> "LogStatus":
        import threading

        self.t0 = self.clock()
        self.out.print(f"{self.text} ...", markup=False, highlight=False)
        self._stop = threading.Event()

        def heartbeat() -> None:
            while not self._stop.wait(self.every):
                self.beat()
        threading.Thread(target=heartbeat, daemon=True).start()
        return self

    def __exit__(self, kind, value, tb) -> None:
        self._stop.set()
        self._line("failed (the error follows)" if kind else "done")   # a class name tells a user nothing


def status(text: str, detail=None):
    """Progress for long work: rich's spinner in a terminal, timestamped lines in a log (LogStatus).
    Both have update(msg)."""
    return err.status(text) if err.is_terminal else LogStatus(text, detail=detail)


def last_line(path) -> str:
    """The last non-empty line of a log file (for a heartbeat), '' when it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:150] if lines else ""


def on_retry(attempt, fault, delay):
    """Registry and Harbor clients report each retry here (one yellow line)."""
    err.print(f"[yellow]retry {attempt} in {delay:.1f}s: {fault}[/]")
