"""`invoke registry.up`'s env.sh works from any directory: a CI job (docs/ci.md's local pipeline)
sources it, or gets its values, in a directory of its own, so every path in it is absolute."""

from __future__ import annotations

import shlex
import ssl
import subprocess
import urllib.request
from pathlib import Path


def test_env_sh_names_absolute_paths_that_work_from_another_directory(tmp_path, monkeypatch):
    from rapidship.publish.loopback import down, up

    work, elsewhere = tmp_path / "checkout", tmp_path / "job"
    work.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(work)
    up(Path("build/registry"))   # what invoke registry.up passes: its default --dir, relative
    try:
        sourced = subprocess.run(["bash", "-c", f". {shlex.quote(str(work / 'build/registry/env.sh'))} && "
                                 "printf '%s\\n' \"$RAPIDSHIP_REGISTRY\" \"$RAPIDSHIP_REGISTRY_CA\""],
                                 cwd=elsewhere, capture_output=True, text=True, check=True)
        registry, ca = sourced.stdout.split()
        assert Path(ca).is_absolute(), f"env.sh names the CA as {ca!r}: relative to the directory registry.up ran in"
        context = ssl.create_default_context(cafile=ca)   # the CA, read from the job's directory, trusts the registry
        try:
            urllib.request.urlopen(f"https://{registry}/v2/", context=context, timeout=10)
        except urllib.error.HTTPError as answer:
            assert answer.code == 401   # up, and asking for the credential env.sh carries
    finally:
        down(work / "build/registry")
