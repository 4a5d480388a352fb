"""A plain docker-registry on a free loopback port (optionally with htpasswd), for CI job tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_registry(tmp_path: Path, user: str | None = None, password: str | None = None):
    """A real OCI registry (CNCF distribution) on 127.0.0.1 over plain HTTP (the engine trusts
    loopback registries without TLS), optionally with htpasswd auth. Returns (host, process)."""
    exe = shutil.which("docker-registry")
    if not exe:
        pytest.fail("docker-registry is not installed: scripts/setup installs it")
    port = _free_port()
    auth = ""
    if user:
        import bcrypt

        (tmp_path / "htpasswd").write_bytes(user.encode() + b":" + bcrypt.hashpw(password.encode(), bcrypt.gensalt(5)))
        auth = f"auth:\n  htpasswd:\n    realm: rapidship-test\n    path: {tmp_path / 'htpasswd'}\n"
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'registry'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n{auth}")
    log = open(tmp_path / "registry.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
            return f"127.0.0.1:{port}", proc
        except urllib.error.HTTPError:
            return f"127.0.0.1:{port}", proc  # 401: up, asking for credentials
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    pytest.fail(f"registry did not start: {(tmp_path / 'registry.log').read_text()}")
