"""The error paths a newcomer meets first: each names its cause and the flag or page that fixes it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from support.commands import ROOT


def invoke(*args: str, netns: bool = False) -> subprocess.CompletedProcess:
    cmd = ["invoke", *args]
    if netns:  # a host with no network at all: the air-gapped site, without sending anything anywhere
        cmd = ["unshare", "--net", *cmd]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare for a network namespace")
def test_scan_without_a_db_on_an_air_gapped_host_names_the_cause_and_the_air_gap_flags(tmp_path):
    cache, tar = tmp_path / "cache", tmp_path / "image.tar"
    tar.write_bytes(b"")   # trivy sets up its DB before it reads the image
    run = invoke("scan", "--tar", str(tar), "--cache-dir", str(cache),
                 "--out", str(tmp_path / "out"), netns=True)
    assert run.returncode == 2, run.stderr
    assert f"no vulnerability DB in {cache / 'db'}" in run.stderr and "could not download one" in run.stderr
    assert "--cache-dir" in run.stderr and "--skip-db-update" in run.stderr and "docs/scan.md" in run.stderr
    assert "lookup" not in run.stderr.split("fix:")[0].split("(")[0]   # trivy's words only as the detail
    assert "Traceback" not in run.stderr


def test_release_with_a_missing_key_blames_key_not_public_key(tmp_path):
    missing = tmp_path / "missing.key"
    run = invoke("release", "--variant", "cpu-debian12", "--registry", "127.0.0.1:9/staging", "--key", str(missing))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"error: --key: {missing}" in run.stderr and "--public-key" not in run.stderr.split("fix:")[0]
