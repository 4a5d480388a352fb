"""A Debian security update through the site's own apt repository (`invoke base --apt-source`),
against the real engine and mmdebstrap: the repository's newer zlib1g (the security suite's real
build, served on 127.0.0.1 behind Basic auth) replaces the suite's, the record names the source with
its credential hidden, and the credential is in no layer of the base (mmdebstrap writes the sources
it is given into the rootfs's /etc/apt/sources.list). Against the base made without the source in
the same clone, the two differ in two layers only: the one holding zlib1g and dpkg's state (the
base in layers by package; in one layer, the whole base differed)."""

from __future__ import annotations

import json
import os
import subprocess
from urllib.parse import unquote

import pytest

from support.apt_repo import fetch_update, write_index
from support.channel_server import serve
from support.commands import CPU_VARIANT, ROOT

pytestmark = pytest.mark.docker

USER, TOKEN = "site-apt", "tok-5b1e0c9d7a"


def test_the_sites_repository_wins_and_its_credential_stays_out_of_the_image(tmp_path):
    from rapidship.config.matrix import load_matrix
    from rapidship.records import Workspace

    repo = tmp_path / "repo"
    update = fetch_update("zlib1g", "amd64", repo)
    write_index(repo, [update])
    other = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(other)], check=True)
    run = os.environ["RAPIDSHIP_RUN_ID"] + "apt"
    env = dict(os.environ, RAPIDSHIP_RUN_ID=run)
    name = load_matrix(ROOT / "variants.yaml").variants[CPU_VARIANT].bases.runtime
    ref = plain_ref = ""
    try:
        plain_env = dict(os.environ, RAPIDSHIP_RUN_ID=run + "0")
        plain = subprocess.run(["invoke", "base", "--os", "debian12", "--force"], cwd=other, env=plain_env,
                               capture_output=True, text=True)
        assert plain.returncode == 0, plain.stdout + plain.stderr
        plain_record = json.loads(Workspace(other / "build").base(name, "amd64", run + "0").read_text())
        plain_ref = plain_record["ref"]
        with serve(repo, USER, TOKEN) as (port, seen):
            source = f"deb [trusted=yes] http://{USER}:{TOKEN}@127.0.0.1:{port}/ ./"
            made = subprocess.run(["invoke", "base", "--os", "debian12", "--force", "--apt-source", source], cwd=other,
                                  env=env, capture_output=True, text=True)
        assert made.returncode == 0, made.stdout + made.stderr
        assert any(unquote(p).endswith(update.filename) for p in seen), f"apt did not fetch from the site's repository: {seen}"
        assert TOKEN not in made.stdout + made.stderr
        record = json.loads(Workspace(other / "build").base(name, "amd64", run).read_text())
        ref = record["ref"]
        assert record["inputs"]["packages"]["zlib1g"] == update.version
        assert record["inputs"]["sources"] == [f"deb [trusted=yes] http://***@127.0.0.1:{port}/ ./"]
        saved = subprocess.run(["docker", "save", ref], capture_output=True, check=True).stdout
        assert TOKEN.encode() not in saved and USER.encode() not in saved
        listed = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "cat", ref,
                                 "/etc/apt/sources.list"], capture_output=True, text=True, check=True).stdout
        assert "deb http://deb.debian.org/debian bookworm main" in listed and "***@127.0.0.1" in listed
        labels = json.loads(subprocess.run(["docker", "image", "inspect", ref], capture_output=True, text=True,
                                           check=True).stdout)[0]["Config"]["Labels"]
        assert TOKEN not in json.dumps(labels) and "127.0.0.1" in labels["io.rapidship.base.sources"]

        layers = [_diff_ids(plain_ref), _diff_ids(ref)]
        assert len(layers[0]) == len(record["layers"]) == len(plain_record["layers"]) > 10
        differ = [layer["name"] for layer, a, b in zip(record["layers"], *layers) if a != b]
        holding = next(layer["name"] for layer in record["layers"] if "zlib1g" in layer["packages"])
        assert differ == [holding, "dpkg-state"], differ
    finally:
        refs = [r for r in (ref, plain_ref) if r]
        if refs:
            subprocess.run(["docker", "rmi", *refs], capture_output=True, check=False)  # this test's bases only


def _diff_ids(ref: str) -> list[str]:
    got = subprocess.run(["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", ref], capture_output=True,
                         text=True, check=True)
    return json.loads(got.stdout)
