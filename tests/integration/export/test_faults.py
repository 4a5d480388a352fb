"""Faults on the real thing: a full file system under export and import, two imports of one site at
once, and the litter a killed run leaves. Each case ends on its own within its deadline and says
where, how much and what was (not) done, in one message.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support.commands import ROOT
from support.signed_discs import from_args, load_image, unique_name
from support.small_fs import fill, run_bounded, small_fs

pytestmark = pytest.mark.docker

BIG = 32_000_000  # random bytes: the archive is as large, far over the small file system and zstd's buffers


@pytest.fixture
def image_of(engine):
    """An image of `size` random bytes (zstd cannot shrink it), removed after the test."""
    made = []

    def make(size: int) -> str:
        ref = f"{unique_name()}:1"
        made.append(load_image(ref, "amd64", os.urandom(size)))
        return ref

    yield make
    subprocess.run(["docker", "rmi", "-f", *made], capture_output=True)


def _one_error(stderr: str) -> str:
    assert stderr.count("error:") == 1 and "Traceback" not in stderr, stderr
    return stderr[stderr.index("error:"):]


def test_export_onto_a_full_disk_fails_at_once_naming_the_room(image_of, tmp_path):
    """Was a deadlock: after ENOSPC nobody read zstd's output, zstd stopped reading its input, and the
    feeding thread's join waited forever."""
    with small_fs("1m", tmp_path) as out:
        proc = run_bounded(["invoke", "export", "--image", image_of(BIG), "--unsigned", "--media", "dvd",
                            "--out", str(out)], 60, cwd=ROOT)
        message = _one_error(proc.stderr)
        assert proc.returncode != 0
        assert str(out) in message and "no space" in message.lower(), message
        assert "free" in message and "needed" in message and "nothing was published" in message, message
        assert sorted(p.name for p in out.iterdir()) == [], "partial volumes left behind"


def test_export_checks_room_for_the_isos_before_writing_them(image_of, tmp_path):
    """The archive is measured before the ISOs are made: too little room left for them is said then."""
    with small_fs("8m", tmp_path) as out:
        fill(out, leave=5_000_000)  # room for the 3 MB archive, not for its ISO as well
        proc = run_bounded(["invoke", "export", "--image", image_of(3_000_000), "--unsigned", "--media", "dvd",
                            "--out", str(out)], 60, cwd=ROOT)
        message = _one_error(proc.stderr)
        assert proc.returncode != 0 and "ISO(s) of the 3.0 MB written" in message, message
        assert "needed" in message and "free" in message and "nothing was published" in message, message
        assert sorted(p.name for p in out.iterdir()) == ["filler"], "partial volumes left behind"


# ---- a killed run's work folder: removed on every exit, and by the next run when killed -------------

def _killed_when(cmd: list[str], env: dict, appears, grace: float = 60) -> tuple[Path, int]:
    """Start `cmd`; SIGKILL its whole process group the moment `appears()` names a folder. Returns it."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + grace
    while (found := appears()) is None:
        assert proc.poll() is None, f"it ended before the moment to kill it came: {proc.stderr.read().decode()}"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return found, proc.returncode


def _first(where: Path, pattern: str, inside: str = ""):
    return next((d for d in where.glob(pattern) if not inside or (d / inside).exists()), None)


def test_a_killed_install_leaves_its_work_folder_and_the_next_run_removes_it_naming_it(absent, tmp_path):
    disc = absent
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    cmd = ["sh", str(disc.dirs[0] / "install.sh"), "--key", str(disc.pub), "--tmp", str(tmp), *map(str, disc.dirs)]
    env = dict(os.environ, RAPIDSHIP_SITE_DIR=str(tmp_path / "site"))
    left, code = _killed_when(cmd, env, lambda: _first(tmp, "rapidship-install.*", "blobs"))
    assert code == -signal.SIGKILL and left.is_dir()  # nothing can clean up after SIGKILL itself
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"removed {left} (" in proc.stderr and "earlier import that did not end (killed)" in proc.stderr
    assert list(tmp.iterdir()) == []  # the killed run's folder and the rerun's own


def test_a_stopped_install_removes_its_work_folder(absent, tmp_path):
    """SIGTERM (kill PID, a service stop) and SIGINT end the run through its exit trap."""
    disc = absent
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    cmd = ["sh", str(disc.dirs[0] / "install.sh"), "--key", str(disc.pub), "--tmp", str(tmp), *map(str, disc.dirs)]
    proc = subprocess.Popen(cmd, env=dict(os.environ, RAPIDSHIP_SITE_DIR=str(tmp_path / "site")),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while _first(tmp, "rapidship-install.*", "blobs") is None:
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.002)
    proc.terminate()
    assert proc.wait(60) == 143
    assert list(tmp.iterdir()) == []


def test_a_killed_import_leaves_its_work_folder_and_the_next_run_removes_it_naming_it(absent, tmp_path):
    disc = absent
    work = tmp_path / "work"
    work.mkdir()
    cmd = ["invoke", "import", *from_args(disc.isos), "--key", str(disc.pub), "--work", str(work)]
    left, _ = _killed_when(cmd, disc.env, lambda: _first(work, "rapidship-trust-*", "signatures"))
    assert left.is_dir()
    proc = subprocess.run(cmd, cwd=ROOT, env=disc.env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"removed {left} (" in " ".join(proc.stderr.split()), proc.stderr
    assert list(work.iterdir()) == []


# ---- a full work space on the importing side: said before anything is written or loaded ------------

def test_install_on_a_full_tmp_says_where_how_much_and_that_nothing_was_loaded(absent, tmp_path):
    disc = absent
    env = dict(os.environ, RAPIDSHIP_SITE_DIR=str(tmp_path / "site"))
    with small_fs("256k", tmp_path) as tmp:
        proc = run_bounded(["sh", str(disc.dirs[0] / "install.sh"), "--key", str(disc.pub), "--tmp", str(tmp),
                            *map(str, disc.dirs)], 60, env=env)
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode == 1, proc.stderr
        assert f"no space left on --tmp {tmp}:" in last and "KiB) needed" in last and "KiB free" in last, proc.stderr
        assert "nothing was loaded" in last and "--tmp DIR on a larger file system" in last
        assert list(tmp.iterdir()) == [] and disc.nothing_loaded()
    with small_fs("2m", tmp_path) as tmp:  # room enough: the same disc loads
        proc = run_bounded(["sh", str(disc.dirs[0] / "install.sh"), "--key", str(disc.pub), "--tmp", str(tmp),
                            *map(str, disc.dirs)], 60, env=env)
        assert proc.returncode == 0, proc.stderr
        assert list(tmp.iterdir()) == []


def test_import_to_a_registry_with_a_full_work_folder_says_so_before_pushing(absent, tmp_path):
    from rapidship.export.load import scratch_registry

    disc = absent
    with scratch_registry(tmp_path) as registry, small_fs("256k", tmp_path) as work:
        cmd = ["invoke", "import", *from_args(disc.isos), "--key", str(disc.pub), "--registry", registry,
               "--insecure", "--work", str(work)]
        proc = run_bounded(cmd, 60, cwd=ROOT, env=disc.env)
        message = " ".join(_one_error(proc.stderr).split())
        assert proc.returncode == 2, proc.stderr
        assert f"--work: no space left on {work}:" in message, message
        assert "(the images' archive for skopeo) needed" in message and "free; nothing was loaded" in message, message
        assert list(work.iterdir()) == []
        unknown = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                                  f"docker://{registry}/{disc.refs['amd64']}"], capture_output=True, text=True)
        assert unknown.returncode != 0  # nothing pushed


def test_install_whose_tmp_fills_up_while_it_runs_says_so_last(absent, tmp_path):
    """Room enough at the start; something else fills --tmp while install.sh is paused in its work."""
    disc = absent
    env = dict(os.environ, RAPIDSHIP_SITE_DIR=str(tmp_path / "site"))
    with small_fs("2m", tmp_path) as tmp:
        proc = subprocess.Popen(["sh", str(disc.dirs[0] / "install.sh"), "--key", str(disc.pub), "--tmp", str(tmp),
                                 *map(str, disc.dirs)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        while _first(tmp, "rapidship-install.*") is None:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.001)
        os.killpg(proc.pid, signal.SIGSTOP)
        fill(tmp)
        os.killpg(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
        last = err.strip().splitlines()[-1]
        assert proc.returncode != 0 and f"no space left on --tmp {tmp}: about" in last, err
        assert "KiB needed, " in last and "nothing was loaded" in last, err
        assert sorted(p.name for p in tmp.iterdir()) == ["filler"] and disc.nothing_loaded()


def test_import_to_a_frozen_registry_gives_up_at_its_deadline_naming_it(absent, tmp_path):
    """The site registry accepts connections and never answers (SIGSTOP): import's first wait, the
    name's current release, ends at RAPIDSHIP_RETRY_TIMEOUT, nothing pushed."""
    from support.registry_fixtures import RegistryServer

    disc = absent
    (tmp_path / "registry").mkdir()
    server = RegistryServer(tmp_path / "registry").start()
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        env = dict(disc.env, RAPIDSHIP_REGISTRY_USER=server.user, RAPIDSHIP_REGISTRY_PASSWORD=server.password,
                   RAPIDSHIP_RETRY_TIMEOUT="3")
        proc = run_bounded(["invoke", "import", *from_args(disc.isos), "--key", str(disc.pub), "--registry",
                            f"{server.host}/site", "--ca-cert", str(server.ca), "--work", str(tmp_path)], 60,
                           cwd=ROOT, env=env)
        message = " ".join(_one_error(proc.stderr).split())
        assert proc.returncode == 2 and f"skopeo inspect {server.host}/site/" in message, message
        assert "no answer from the registry within 3 s; nothing more was pushed" in message, message
        assert not list(tmp_path.glob("rapidship-import-*"))
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()


def test_export_of_built_images_checks_the_room_their_build_records_measured_first(present, tmp_path):
    """A build record states each image's `zstd -3` size: the export knows its need before it starts."""
    disc = present
    build = Path(shutil.copytree(disc.build, tmp_path / "build"))
    for record in build.glob("cpu-debian12/build-*.json"):  # the real figure, as invoke build measures it
        doc = json.loads(record.read_text())
        doc["zstd_bytes"] = len(subprocess.run(["sh", "-c", f"docker save {doc['image_id']} | zstd -3 -q -c"],
                                               capture_output=True, check=True).stdout)
        record.write_text(json.dumps(doc))
    cmd = ["invoke", "export", "--variant", "cpu-debian12", "--variants-file", str(disc.work / "variants.yaml"),
           "--build-dir", str(build), "--media", "dvd"]
    with small_fs("1m", tmp_path) as out:
        proc = run_bounded([*cmd, "--out", str(out / "disc")], 60, cwd=ROOT, env=disc.env)
        message = " ".join(_one_error(proc.stderr).split())
        assert proc.returncode == 2 and f"--out: no space left on {out}/disc: " in message, message
        assert "(the images zstd-compressed as their build records measured them, twice" in message, message
        assert "free; nothing was written" in message and list(out.iterdir()) == [], message
    with small_fs("8m", tmp_path) as out:  # room enough: the same export is made
        proc = run_bounded([*cmd, "--out", str(out / "disc")], 60, cwd=ROOT, env=disc.env)
        assert proc.returncode == 0, proc.stderr
