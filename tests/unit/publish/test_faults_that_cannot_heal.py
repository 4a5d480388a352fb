"""A DNS "no such host", an HTTP answer to an HTTPS client and a refused connection on this machine
fail at once, naming the cause; the faults that may heal are still retried (tests/integration/publish)."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from rapidship.errors import RapidshipError
from rapidship.publish.retrying import RetryPolicy, send

POLICY = RetryPolicy(attempts=5, base_delay=1.0, timeout=5)


def test_a_name_that_does_not_exist_is_not_retried(monkeypatch):
    def no_such_host(*args, **kwargs):
        raise requests.ConnectionError("HTTPSConnectionPool(host='harbor.invalid', port=443): Max retries exceeded "
                                       "(Caused by NameResolutionError(\"Failed to resolve 'harbor.invalid' ([Errno -2] "
                                       "Name or service not known)\"))")
    session = requests.Session()
    monkeypatch.setattr(session, "request", no_such_host)
    retried = []
    t0 = time.monotonic()
    with pytest.raises(RapidshipError, match="no such host: harbor.invalid does not resolve"):
        send(session, "GET", "https://harbor.invalid/v2/", policy=POLICY, what="registry",
             on_retry=lambda *a: retried.append(a))
    assert retried == [] and time.monotonic() - t0 < 1


class Plain(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_an_http_server_answering_https_fails_at_once_naming_the_fix():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        session = requests.Session()
        session.trust_env = False  # loopback: no proxy
        retried = []
        with pytest.raises(RapidshipError, match="answered in plain HTTP, not HTTPS") as err:
            send(session, "GET", f"https://127.0.0.1:{server.server_address[1]}/v2/", policy=POLICY, what="registry",
                 on_retry=lambda *a: retried.append(a))
        assert retried == [] and "--ca-cert" in str(err.value.fix)
    finally:
        server.shutdown()


def test_a_refused_connection_on_this_machine_fails_at_once():
    """Nothing listens on that loopback port: no wait starts it (it cost 68 s of retries)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    session = requests.Session()
    session.trust_env = False
    retried = []
    t0 = time.monotonic()
    with pytest.raises(RapidshipError, match=f"nothing listens on 127.0.0.1:{port}") as err:
        send(session, "GET", f"https://127.0.0.1:{port}/v2/", policy=POLICY, what="registry",
             on_retry=lambda *a: retried.append(a))
    assert retried == [] and time.monotonic() - t0 < 1 and "invoke registry.up" in err.value.fix


def test_a_refused_connection_elsewhere_is_still_retried(monkeypatch):
    """A registry behind a balancer refuses while it restarts: that may heal."""
    def refused(*args, **kwargs):
        raise requests.ConnectionError("HTTPSConnectionPool(host='harbor.example', port=443): Max retries exceeded "
                                       "(Caused by NewConnectionError('[Errno 111] Connection refused'))")
    session = requests.Session()
    monkeypatch.setattr(session, "request", refused)
    retried = []
    with pytest.raises(RapidshipError, match="gave up after 2 attempts"):
        send(session, "GET", "https://harbor.example/v2/", policy=RetryPolicy(attempts=2, base_delay=0.01),
             what="registry", on_retry=lambda *a: retried.append(a))
    assert len(retried) == 1
