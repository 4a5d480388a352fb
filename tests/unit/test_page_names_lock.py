"""The walkthrough's lock on the page's own names: re-entrant in one process (the package fixture
holds it while a test of the package takes it again: the suite hung there), exclusive across
processes."""

from __future__ import annotations

import subprocess
import sys
import threading

from support.commands import ROOT
from support.doc_pages import page_names_lock


def test_a_test_may_take_the_lock_its_fixture_holds():
    done = threading.Event()

    def nested():
        with page_names_lock(), page_names_lock():
            done.set()

    worker = threading.Thread(target=nested, daemon=True)
    worker.start()
    assert done.wait(10), "the second page_names_lock of one process waited for the first"


def test_another_process_waits_while_this_one_holds_it():
    probe = ("import fcntl, sys; from support.doc_pages import PAGE_NAMES_LOCK\n"
             "f = open(PAGE_NAMES_LOCK, 'a')\n"
             "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n")
    with page_names_lock(), page_names_lock():
        held = subprocess.run([sys.executable, "-c", probe], cwd=ROOT / "tests", capture_output=True, text=True)
    assert held.returncode == 3, held.stderr
    free = subprocess.run([sys.executable, "-c", probe], cwd=ROOT / "tests", capture_output=True, text=True)
    assert free.returncode == 0, free.stderr
