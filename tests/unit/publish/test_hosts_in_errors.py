"""Every error that names a host, fed a URL carrying credentials, shows where without the secret.

The paths (every place src/ formats a host, netloc or URL into a message):
  - the HTTP transport (publish/retrying.py), through `invoke harbor.plan --url` and
    RAPIDSHIP_HARBOR_URL as a user runs them: nothing listens (a refused loopback port), an HTTP
    server answering HTTPS, a certificate no CA given signs; and a name DNS says does not exist
    (the resolver's answer stood in: tests reach loopback only);
  - the registry flags (publish/oci.split_repository): `invoke push --registry`, `invoke
    ci.generate --profile local --registry`;
  - skopeo's refused push (publish/push.py), which names the host it was given;
  - the token service a registry names in its Bearer challenge (publish/oci.py): the realm is the
    server's word, so it may carry anything;
  - the GitLab API of `invoke ci.runners` (CI_API_V4_URL).
Each error is also checked to still say where (the host and port), or the test would pass on
an error that names nothing.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from rapidship.errors import RapidshipError
from rapidship.publish.retrying import RetryPolicy, nothing_listens, send
from support.commands import ROOT

SECRET = "Sup3rS3cretValue"
USER = "admin"


class Plain(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def plain_http():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture
def untrusted_tls(tmp_path):
    """An HTTPS server whose self-signed certificate no CA the client is given signs."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout", "key.pem", "-out", "cert.pem"],
                   cwd=tmp_path, check=True, capture_output=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAPIDSHIP_HARBOR", "CI_"))}
    base.update({"RAPIDSHIP_HARBOR_USER": "robot", "RAPIDSHIP_HARBOR_PASSWORD": "not-the-secret",
                 "RAPIDSHIP_RETRY_ATTEMPTS": "1", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    return subprocess.run(["invoke", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**base, **(env or {})})


def said(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


def assert_refused_without_secret(proc: subprocess.CompletedProcess, where: str, cause: str) -> None:
    out = said(proc)
    assert proc.returncode in (1, 2) and "Traceback" not in out, out[-2000:]
    assert SECRET not in out and f"{USER}:" not in out, out[-2000:]
    assert where in out and cause in out, out[-2000:]


def test_harbor_url_where_nothing_listens():
    port = closed_port()
    proc = run("harbor.plan", "--url", f"http://{USER}:{SECRET}@127.0.0.1:{port}")
    assert_refused_without_secret(proc, f"127.0.0.1:{port}", "nothing listens on")


def test_harbor_url_from_the_environment_where_nothing_listens():
    port = closed_port()
    proc = run("harbor.plan", env={"RAPIDSHIP_HARBOR_URL": f"https://{USER}:{SECRET}@127.0.0.1:{port}"})
    assert_refused_without_secret(proc, f"127.0.0.1:{port}", "nothing listens on")


def test_harbor_url_answered_in_plain_http(plain_http):
    proc = run("harbor.plan", "--url", f"https://{USER}:{SECRET}@127.0.0.1:{plain_http}")
    assert_refused_without_secret(proc, f"127.0.0.1:{plain_http}", "answered in plain HTTP")


def test_harbor_url_with_a_certificate_no_ca_signs(untrusted_tls):
    proc = run("harbor.plan", "--url", f"https://{USER}:{SECRET}@127.0.0.1:{untrusted_tls}")
    assert_refused_without_secret(proc, f"127.0.0.1:{untrusted_tls}", "TLS verification failed for")


def test_a_name_that_does_not_exist(monkeypatch):
    """The resolver's answer (what requests raises for NXDOMAIN) stands in for a DNS query."""
    def no_such_host(*args, **kwargs):
        raise requests.ConnectionError("HTTPSConnectionPool(host='harbor.invalid', port=443): Max retries exceeded "
                                       "(Caused by NameResolutionError(\"Failed to resolve 'harbor.invalid' ([Errno -2] "
                                       "Name or service not known)\"))")
    session = requests.Session()
    monkeypatch.setattr(session, "request", no_such_host)
    with pytest.raises(RapidshipError) as err:
        send(session, "GET", f"https://{USER}:{SECRET}@harbor.invalid:8443/api/v2.0/projects",
             policy=RetryPolicy(attempts=1), what="harbor")
    text = str(err.value)
    assert SECRET not in text and f"{USER}:" not in text and "harbor.invalid" in text and "does not resolve" in text


def test_skopeo_refused_names_the_host_without_credentials():
    """push.py hands nothing_listens the host it pushes to; whatever it is given, no credential shows."""
    text = str(nothing_listens("push", f"{USER}:{SECRET}@127.0.0.1:9"))
    assert SECRET not in text and f"{USER}:" not in text and "127.0.0.1:9" in text


@pytest.mark.parametrize("args", [
    ("push", "--variant", "cpu-debian12", "--registry", f"{USER}:{SECRET}@127.0.0.1:9/staging"),
    ("push", "--variant", "cpu-debian12", "--registry", f"https://{USER}:{SECRET}@127.0.0.1:9/staging"),
    ("ci.generate", "--profile", "local", "--registry", f"{USER}:{SECRET}@127.0.0.1:9/staging", "--out",
     "build/ci/never-written.yml"),
])
def test_registry_flags_with_credentials(args):
    proc = run(*args)
    assert_refused_without_secret(proc, "127.0.0.1:9", "carries credentials")


def test_gitlab_api_url_with_credentials():
    port = closed_port()
    proc = run("ci.runners", "--require", "release",
               env={"CI_API_V4_URL": f"http://{USER}:{SECRET}@127.0.0.1:{port}/api/v4", "CI_PROJECT_ID": "42",
                    "RAPIDSHIP_GITLAB_TOKEN": "glpat-not-the-secret"})
    assert_refused_without_secret(proc, "/api/v4/projects/42/runners", "cannot read")


class Challenging(BaseHTTPRequestHandler):
    """A registry whose Bearer challenge names a token service URL with credentials and a token."""
    realm = ""

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(401)
        self.send_header("WWW-Authenticate", f'Bearer realm="{self.realm}",service="registry"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET  # noqa: N815 - http.server's name

    def log_message(self, *args):
        pass


def test_a_token_service_named_by_the_registry(tmp_path):
    from rapidship.publish.oci import Credentials, Registry

    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", "key.pem", "-out", "cert.pem"], cwd=tmp_path, check=True, capture_output=True)
    port = closed_port()
    Challenging.realm = f"https://{USER}:{SECRET}@127.0.0.1:{port}/token?private_token={SECRET}"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Challenging)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        reg = Registry(f"127.0.0.1:{server.server_address[1]}", Credentials("robot", "not-the-secret", "test"),
                       str(tmp_path / "cert.pem"), RetryPolicy(attempts=1))
        reg.session.trust_env = False  # loopback: no proxy
        with pytest.raises(RapidshipError) as err:
            reg.head_manifest("staging/image", "latest")
    finally:
        server.shutdown()
    text = str(err.value)
    assert SECRET not in text and f"{USER}:" not in text, text
    assert f"token service ***@127.0.0.1:{port}" in text and "nothing listens on" in text, text
