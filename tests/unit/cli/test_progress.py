"""Progress outside a terminal: rich's spinner prints nothing into a CI log, so long steps print
timestamped lines instead (a line per new step, a heartbeat with the log's last line, the end)."""

from __future__ import annotations

import io
import time

from rich.console import Console

from rapidship import console


def logged() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200, force_terminal=False), buf


def test_each_new_step_is_one_line_with_the_seconds_since_the_start():
    out, buf = logged()
    now = [100.0]
    with console.LogStatus("building img", every=3600, clock=lambda: now[0], out=out) as s:
        now[0] = 112.4
        s.update("[builder 3/9] RUN conda-pack")
        s.update("[builder 3/9] RUN conda-pack")          # the same step again: no second line
        now[0] = 500.0
        s.update("exporting layers")
    lines = buf.getvalue().splitlines()
    assert lines == ["building img ...", "  [    12 s] [builder 3/9] RUN conda-pack", "  [   400 s] exporting layers",
                     "  [   400 s] done"]


def test_a_long_silent_step_gets_a_heartbeat_with_the_logs_last_line(tmp_path):
    log = tmp_path / "base.log"
    log.write_text("I: Retrieving Packages\nI: Validating libc6 2.36-9\n\n")
    out, buf = logged()
    with console.LogStatus("debootstrap bookworm", every=0.05, detail=lambda: console.last_line(log), out=out):
        time.sleep(0.3)
    beats = [ln for ln in buf.getvalue().splitlines() if "still running" in ln]
    assert beats and beats[0].endswith("still running: debootstrap bookworm | I: Validating libc6 2.36-9")


def test_a_failure_says_so_and_the_spinner_stays_in_a_terminal(tmp_path):
    out, buf = logged()
    try:
        with console.LogStatus("pushing", every=3600, out=out):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert buf.getvalue().splitlines()[-1].endswith("failed (the error follows)")   # no class name
    assert console.last_line(tmp_path / "absent.log") == ""
    assert isinstance(console.status("x"), console.LogStatus)      # the suite's stderr is no terminal
