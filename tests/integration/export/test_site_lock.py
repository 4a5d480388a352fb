"""Two imports of one site at once: the site's decide-and-load (downgrade check, load, ledger line) is
one critical section, the lock `import.lock` of the site directory that `invoke import` and install.sh
both take. Two releases of the same two images (tests/support/signed_discs.py), the older and the
newer, imported at the same moment into one engine with one site directory: the newer one is what
the names point at after every round, whichever importer ran each; an import that finds the lock
held says so and waits, and past its deadline fails naming the holder, nothing loaded.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time

import pytest

from support.commands import ROOT
from support.signed_discs import ARCHES, error_of, from_args, image_id, install, make_disc, ok, run, unique_name

pytestmark = pytest.mark.docker
OLD, NEW = "2026-11-01T00:00:00+00:00", "2026-12-01T00:00:00+00:00"


@pytest.fixture(scope="module")
def releases(engine, disc_registry, tmp_path_factory):
    work, name = tmp_path_factory.mktemp("site-lock"), unique_name()
    old = make_disc(work / "old", disc_registry, name, created=OLD)
    new = make_disc(work / "new", disc_registry, name, created=NEW, keys=old.work / "keys")
    yield old, new
    old.remove_images()
    new.remove_images()


def names(disc) -> dict[str, str | None]:
    return {disc.refs[a]: image_id(disc.refs[a]) for a in ARCHES}


def start(disc, importer: str, site, wait: str = "600") -> subprocess.Popen:
    """`invoke import` or install.sh of `disc` into the shared `site`, started and not waited for."""
    env = dict(disc.env, RAPIDSHIP_SITE_DIR=str(site), RAPIDSHIP_SITE_LOCK_WAIT=wait)
    if importer == "invoke":
        cmd = ["invoke", "import", *from_args(disc.isos), "--key", str(disc.pub)]
    else:
        cmd = ["sh", str(disc.dirs[0] / "install.sh"), "--key", str(disc.pub), *map(str, disc.dirs)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("new_by, old_by", [("invoke", "invoke"), ("invoke", "install.sh"), ("install.sh", "invoke"),
                                            ("install.sh", "install.sh")])
def test_two_imports_at_once_leave_the_newer_release(releases, tmp_path, new_by, old_by):
    """Was: the older release won 3 of 6 rounds (no lock between the downgrade check and docker load),
    and the newer disc's import failed with 'loaded images differ'."""
    old, new = releases
    for _ in range(3):
        old.remove_images()
        new.remove_images()
        procs = {"old": start(old, old_by, tmp_path / "site"), "new": start(new, new_by, tmp_path / "site")}
        done = {k: (p.wait(120), *p.communicate()) for k, p in procs.items()}
        assert done["new"][0] == 0, done["new"][2]
        assert names(new) == {new.refs[a]: new.ids[a] for a in ARCHES}, (done["old"][2], done["new"][2])
        code, _, err = done["old"]
        assert code == 0 or "an older release would replace a newer one" in err, err  # first, or refused after


def hold_lock(site, who: str):
    """The site's lock held by this test, as another import would hold it."""
    site.mkdir(parents=True, exist_ok=True)
    fh = open(site / "import.lock", "a+")  # noqa: SIM115 - the caller closes it (that releases the lock)
    fcntl.flock(fh, fcntl.LOCK_EX)
    fh.truncate(0)
    fh.write(who + "\n")
    fh.flush()
    return fh


@pytest.mark.parametrize("importer", ["invoke", "install.sh"])
def test_an_import_waits_for_the_one_that_holds_the_site_then_gives_up_naming_it(releases, tmp_path, importer):
    old, new = releases
    new.remove_images()
    held = hold_lock(tmp_path / "site", "pid 4242, the other import, since a moment ago")
    try:
        proc = start(new, importer, tmp_path / "site", wait="2")
        _, err = proc.communicate(timeout=120)
        assert proc.returncode != 0, err
        last = err if importer == "install.sh" else error_of(subprocess.CompletedProcess([], 1, "", err))
        assert "waiting up to 2 s" in err and "pid 4242, the other import" in last, err
        assert "still holds" in last and "after 2 s" in last and "nothing was loaded" in last, err
        assert all(i is None for i in names(new).values())
        proc = start(new, importer, tmp_path / "site", wait="60")  # the holder ends while it waits: it goes on
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while not any("waiting up to 60 s" in line for line in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.05)
        time.sleep(1)  # still waiting a second later
        assert proc.poll() is None and names(new) == {r: None for r in names(new)}, "".join(lines)
        held.close()
        assert proc.wait(120) == 0, "".join(lines)
        reader.join()
        assert names(new) == {new.refs[a]: new.ids[a] for a in ARCHES}
    finally:
        held.close()
