"""The engine adapter's contract, against a stand-in `docker` CLI that logs its calls (the real
engine is exercised by every integration test through the same adapter)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from rapidship.engine import Engine
from rapidship.errors import RapidshipError
from support.commands import ROOT

FAKE = r"""#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls.log"
case "$1 $2" in
  "image inspect") [ "$3" = present ] && echo '[{"Id": "sha256:aa", "Architecture": "amd64"}]' && exit 0
                   echo "Error: No such image: $3" >&2; exit 1 ;;
  "create --name") echo cid; exit 0 ;;
esac
case "$1" in
  export) cat "$(dirname "$0")/fs.tar"; exit 0 ;;
  save) echo "Error response from daemon: reference does not exist" >&2; exit 1 ;;
  rm) exit 0 ;;
esac
exit 3
"""


@pytest.fixture
def fake(tmp_path) -> tuple[Engine, Path]:
    cli = tmp_path / "docker"
    cli.write_text(FAKE)
    cli.chmod(0o755)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"hello"
        info = tarfile.TarInfo("etc/motd")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (tmp_path / "fs.tar").write_bytes(buf.getvalue())
    return Engine(str(cli)), tmp_path / "calls.log"


def test_inspect_finds_or_names_the_missing_image(fake):
    engine, _ = fake
    assert engine.inspect("present")["Id"] == "sha256:aa" and engine.exists("present")
    assert engine.try_inspect("absent") is None and not engine.exists("absent")
    with pytest.raises(RapidshipError, match="absent: image not found in the engine"):
        engine.inspect("absent")


def test_export_streams_the_filesystem_and_always_removes_the_container(fake):
    engine, calls = fake
    with engine.exported("present") as raw:
        names = [m.name for m in tarfile.open(fileobj=raw, mode="r|")]
    assert names == ["etc/motd"]
    log = calls.read_text().splitlines()
    assert log[0].startswith("create --name rapidship-") and log[1].startswith("export rapidship-")
    assert log[-1].startswith("rm -f rapidship-")


def test_a_failed_stream_is_one_error_with_the_engines_words(fake):
    engine, _ = fake
    with pytest.raises(RapidshipError, match="docker save failed: Error response from daemon: reference does not"):
        with engine.save("absent") as raw:
            raw.read()


def test_a_cli_answering_garbage_to_inspect_is_named(tmp_path):
    cli = tmp_path / "docker"
    cli.write_text("#!/bin/sh\necho not-json\n")
    cli.chmod(0o755)
    with pytest.raises(RapidshipError, match="not JSON"):
        Engine(str(cli)).inspect("x")


def test_no_module_but_the_engine_runs_the_docker_cli():
    # The adapter is the one place that talks to Docker: no other module spawns the CLI itself.
    src = ROOT / "src" / "rapidship"
    offenders = []
    for path in src.rglob("*.py"):
        if path.name == "engine.py" or "runtime" in path.parts:
            continue
        text = path.read_text()
        for needle in ('["docker"', "[\"docker\",", "'docker'"):
            if needle in text:
                offenders.append(f"{path.relative_to(src)}: {needle}")
    assert offenders == [], offenders
    json.dumps(offenders)
