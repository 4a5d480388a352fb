"""Reproducible digests, against the real engine: the cpu-debian12 image this suite built, rebuilt
without cache from a second clone in another directory at least a minute later, on the base that
clone made itself (another run: its own name, the same id), is the same image id; what a registry gets from it is the same manifest digest; and an image that is not what the
record's inputs make is refused with each file and field that differs named."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from support.commands import CPU_VARIANT, ROOT

pytestmark = pytest.mark.docker


def _clean_checkout() -> None:
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.strip()
    if dirty and not os.environ.get("CI"):  # CI runs on a clean clone, where this never skips
        pytest.skip("this checkout has uncommitted changes: its image is not what any clone of HEAD builds")


def _clone(into: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(into)], check=True)
    return into


def _invoke(where: Path, *args: str, run: str = "") -> subprocess.CompletedProcess:
    """invoke in `where`; `run` gives its images a name of their own (this suite's stay as they are)."""
    env = dict(os.environ, RAPIDSHIP_RUN_ID=os.environ["RAPIDSHIP_RUN_ID"] + run)
    return subprocess.run(["invoke", *args], cwd=where, capture_output=True, text=True, check=False, env=env)


def _base_record(where: Path, run: str) -> dict:
    """The base record `invoke base` wrote in `where` for this suite's run (+ `run`)."""
    from rapidship.config.matrix import load_matrix
    from rapidship.records import Workspace

    name = load_matrix(ROOT / "variants.yaml").variants[CPU_VARIANT].bases.runtime
    return json.loads(Workspace(where / "build").base(name, "amd64", os.environ["RAPIDSHIP_RUN_ID"] + run).read_text())


def _share_base(clone: Path, run: str) -> None:
    """Run `run` in `clone` takes the suite's base: its base record, as invoke base wrote it."""
    suite = _base_record(ROOT, "")
    from rapidship.records import Workspace

    path = Workspace(clone / "build").base(suite["name"], "amd64", os.environ["RAPIDSHIP_RUN_ID"] + run)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(suite))


def _manifest_digest(ref: str, into: Path) -> str:
    """What a registry would call the image: skopeo's manifest digest of a copy to an OCI layout."""
    subprocess.run(["skopeo", "copy", "--quiet", f"docker-daemon:{ref}", f"oci:{into}:x"], check=True,
                   capture_output=True)
    return json.loads((into / "index.json").read_text())["manifests"][0]["digest"]


def test_a_cold_rebuild_from_another_clone_a_minute_later_is_the_same_image(cpu_image, tmp_path):
    _clean_checkout()
    record = ROOT / "build" / CPU_VARIANT / "build-amd64.json"
    assert cpu_image.extra["source_date_epoch"] > 0 and cpu_image.extra["revision"]
    time.sleep(max(0.0, 60 - (time.time() - record.stat().st_mtime)))  # another minute: another clock
    clone = _clone(tmp_path / "elsewhere" / "second-clone")
    # the clone is another run: it makes its own base, under its own name, from the same archive state
    base = _invoke(clone, "base", "--os", "debian12", run="c")
    assert base.returncode == 0, base.stdout + base.stderr
    suite_base, clone_base = _base_record(ROOT, ""), _base_record(clone, "c")
    assert clone_base["ref"] != suite_base["ref"] and clone_base["ref"].endswith(os.environ["RAPIDSHIP_RUN_ID"] + "c")
    assert clone_base["image_id"] == suite_base["image_id"] == cpu_image.extra["bases"]["RUNTIME_BASE"]["id"]
    assert clone_base["inputs"] == suite_base["inputs"]
    started = time.monotonic()
    proc = _invoke(clone, "reproduce", "--variant", CPU_VARIANT, "--arch", "amd64", "--digest", cpu_image.image_id,
                   "--record", str(record), "--keep", run="c")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"reproduced: {cpu_image.image_id}" in proc.stderr
    result = json.loads((clone / "build" / CPU_VARIANT / "reproduce-amd64.json").read_text())
    assert result["reproduced"] and result["rebuilt_id"] == cpu_image.image_id and result["differences"] == []
    log = (clone / "build" / CPU_VARIANT / "reproduce-amd64.log").read_text()
    # every step ran again (one CACHED line stays: the base image's own metadata, no RUN or COPY)
    assert "--no-cache" in log.splitlines()[0] and log.count(" CACHED") <= 1
    assert f"RUNTIME_BASE={clone_base['ref']}" in log.splitlines()[0]  # on the base made there
    rebuilt = f"{cpu_image.ref}c-reproduce"
    try:
        assert _manifest_digest(cpu_image.ref, tmp_path / "a") == _manifest_digest(rebuilt, tmp_path / "b")
    finally:  # names only: the images stay (the clone's base is the suite's, by id)
        subprocess.run(["docker", "rmi", rebuilt, clone_base["ref"]], capture_output=True, check=False)
    labels = json.loads(subprocess.run(["docker", "image", "inspect", cpu_image.ref], capture_output=True, text=True,
                                       check=True).stdout)[0]["Config"]["Labels"]
    assert labels["io.rapidship.source-date-epoch"] == str(cpu_image.extra["source_date_epoch"])
    print(f"reproduced {cpu_image.image_id[:19]} in {time.monotonic() - started:.0f}s")


def test_an_image_the_recorded_inputs_do_not_make_is_refused_naming_the_file(cpu_image, tmp_path):
    """A record that claims the suite's image came from a commit that changed one runtime file: the
    rebuild is another image, and reproduce names that file (same commit time, so nothing else)."""
    _clean_checkout()
    clone = _clone(tmp_path / "changed")
    units = clone / "src" / "rapidship" / "runtime" / "units.py"
    units.write_text(units.read_text() + "# one more line\n")
    when = f"@{cpu_image.extra['source_date_epoch']} +0000"
    env = dict(os.environ, GIT_COMMITTER_DATE=when, GIT_AUTHOR_DATE=when)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qam", "one line"],
                   cwd=clone, check=True, env=env)
    _share_base(clone, "x")
    built = _invoke(clone, "build", "--variant", CPU_VARIANT, "--arch", "amd64", run="x")
    assert built.returncode == 0, built.stderr
    claimed = json.loads((clone / "build" / CPU_VARIANT / "build-amd64.json").read_text())
    try:
        proc = _invoke(clone, "reproduce", "--variant", CPU_VARIANT, "--digest", cpu_image.image_id, "--arch", "amd64",
                       run="x")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"not reproduced: rebuilt {claimed['image_id']}, not {cpu_image.image_id}" in proc.stderr
        result = json.loads((clone / "build" / CPU_VARIANT / "reproduce-amd64.json").read_text())
        found = "\n".join(result["differences"])
        assert re.search(r"\(COPY runtime/rapids_runtime/ .*\) /opt/rapidship/rapids_runtime/units.py: size \d+ shipped, "
                         r"\d+ rebuilt; content differs", found)
        assert "/opt/rapidship/rapids_runtime/__pycache__/units.cpython-311.pyc: content differs" in found
        assert "org.opencontainers.image.revision" in found and "mtimes differ" not in found
        assert len(result["differences"]) == 3  # the label, the file, its bytecode: nothing else differs

        # and a checkout at another commit is refused before anything is built
        other = _invoke(ROOT, "reproduce", "--variant", CPU_VARIANT, "--digest", cpu_image.image_id, "--arch", "amd64",
                        "--record", str(clone / "build" / CPU_VARIANT / "build-amd64.json"))
        assert other.returncode == 2 and "git checkout " + claimed["extra"]["revision"][:12] in other.stderr
        bad = _invoke(ROOT, "reproduce", "--variant", CPU_VARIANT, "--digest", "sha256:abc")
        assert bad.returncode == 2 and "--digest" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        subprocess.run(["docker", "rmi", claimed["ref"]], capture_output=True, check=False)


def test_no_bytecode_in_the_image_depends_on_a_file_time(cpu_image):
    """The normaliser gives every file of a rebuilt layer one time, which the distribution's own
    timestamp .pyc files (py3compile's) would no longer match: every start would compile the
    standard library again, unable to save it. So every .pyc is keyed by its source's hash."""
    code = ("import glob, collections, json; c = collections.Counter(open(p, 'rb').read(8)[4] for d in "
            "('/usr/lib/python3.11', '/usr/lib/python3', '/opt/rapids', '/opt/rapidship') "
            "for p in glob.glob(d + '/**/*.pyc', recursive=True)); print(json.dumps(c))")
    proc = subprocess.run(["docker", "run", "--rm", "--entrypoint", "python3.11", cpu_image.ref, "-c", code],
                          capture_output=True, text=True, check=True)
    flags = {int(k): v for k, v in json.loads(proc.stdout).items()}  # {flag: count}: 1 unchecked hash, 0 timestamp
    assert flags.get(1, 0) > 2000 and set(flags) == {1}, flags
    mtime = subprocess.run(["docker", "run", "--rm", "--entrypoint", "stat", cpu_image.ref, "-c", "%Y",
                            "/usr/lib/python3.11/json/decoder.py", "/opt/rapids/pyvenv.cfg"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert mtime == ["946684800", "946684800"]  # LAYER_MTIME: no build's or commit's time
