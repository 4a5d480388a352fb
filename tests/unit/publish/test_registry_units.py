"""Pure parts of push/promote and the retry loop, without a registry."""

from __future__ import annotations

import re

import base64
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from support.commands import ROOT  # noqa: E402

from rapidship.errors import ConfigError, RapidshipError  # noqa: E402
from rapidship.publish.harbor.client import parse_report  # noqa: E402
from rapidship.config.matrix import parse_matrix  # noqa: E402
from rapidship.publish.oci import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST, credentials_for, split_repository  # noqa: E402
from rapidship.publish.push import ArchImage, check_gates, make_index, platform_of  # noqa: E402
from rapidship.publish.retrying import RetryPolicy, backoff, send  # noqa: E402


def child(arch: str, media: str = DOCKER_MANIFEST) -> ArchImage:
    return ArchImage(arch=arch, tag=f"t-{arch}", digest="sha256:" + arch[0] * 64, size=500, media_type=media,
                     platform={"architecture": arch, "os": "linux"})


def test_index_type_follows_the_children():
    data, media = make_index([child("amd64"), child("arm64")])
    doc = json.loads(data)
    assert media == DOCKER_LIST == doc["mediaType"]
    assert [m["platform"]["architecture"] for m in doc["manifests"]] == ["amd64", "arm64"]
    assert make_index([child("amd64", OCI_MANIFEST)])[1] == OCI_INDEX
    with pytest.raises(RapidshipError, match="mix media types"):
        make_index([child("amd64"), child("arm64", OCI_MANIFEST)])
    assert platform_of({"architecture": "arm64", "os": "linux", "variant": "v8"})["variant"] == "v8"


IDS = {"amd64": "sha256:" + "a" * 64, "arm64": "sha256:" + "b" * 64}


def test_gate_records_fail_closed_and_must_name_the_image_published(tmp_path):
    from support.gated_records import write_gated

    vid = "cuda12-ubuntu22"
    v = parse_matrix((ROOT / "variants.yaml").read_text()).get(vid)  # amd64 + arm64
    from rapidship.records import Workspace
    ws = Workspace(tmp_path)
    problems = check_gates(ws, v, IDS)
    assert len(problems) == 8 and all("no " in p for p in problems)  # build, gates, scan, content per arch
    for arch in ("amd64", "arm64"):
        write_gated(tmp_path, vid, {arch: (f"r-{arch}", IDS[arch])}, lock="11" * 32)
    assert check_gates(ws, v, IDS) == []
    doc = json.loads(ws.gates(vid, "arm64").read_text())
    ws.gates(vid, "arm64").write_text(json.dumps(doc | {"passed": "true"}))  # a string is not a pass
    assert check_gates(ws, v, IDS) == [f"{ws.gates(vid, 'arm64')}: gate record of another shape: passed: "
                                       "Input should be a valid boolean"]
    ws.gates(vid, "arm64").write_text("[1]")
    assert "not a JSON object" in check_gates(ws, v, IDS)[0]
    ws.gates(vid, "arm64").write_text('{"passed": true, "gates": []}')  # a pass without the rest of the record
    assert "gate record of another shape" in check_gates(ws, v, IDS)[0]
    write_gated(tmp_path, vid, {"arm64": ("r-arm64", IDS["arm64"])}, lock="11" * 32, passed=False)  # trivy said no
    assert check_gates(ws, v, IDS) == [f"{ws.gates(vid, 'arm64')}: passed is false",
                                       f"{ws.decision(vid, 'arm64')}: passed is false"]
    # a rebuild: the engine's image is new, every record still names the old one: STALE, all four
    write_gated(tmp_path, vid, {"arm64": ("r-arm64", IDS["arm64"])}, lock="11" * 32)
    rebuilt = IDS | {"arm64": "sha256:" + "c" * 64}
    stale = check_gates(ws, v, rebuilt)
    assert len(stale) == 4 and all("-arm64" in p and ": STALE " in p and "sha256:bbbbbbbbbbbb" in p
                                   and "sha256:cccccccccccc" in p for p in stale)
    # only the scan decision is of another image (trivy ran on something else): named alone
    doc = json.loads(ws.decision(vid, "amd64").read_text())
    ws.decision(vid, "amd64").write_text(json.dumps(doc | {"image_id": "sha256:" + "d" * 64}))
    assert check_gates(ws, v, IDS) == [f"{ws.decision(vid, 'amd64')}: STALE scan decision: it names image "
                                       "sha256:dddddddddddd, the image to publish is sha256:aaaaaaaaaaaa: run invoke "
                                       f"scan --variant {vid} --arch amd64 again"]


def test_backoff_grows_and_honours_retry_after():
    p = RetryPolicy(base_delay=1, max_delay=8)
    assert 0.5 <= backoff(p, 1) <= 1 and 4 <= backoff(p, 4) <= 8 and backoff(p, 10) <= 8
    assert backoff(p, 1, retry_after=5) >= 5 and backoff(p, 1, retry_after=600) == 8


def test_credentials_from_env_or_docker_config(tmp_path, monkeypatch):
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("RAPIDSHIP_REGISTRY_USER", raising=False)
    monkeypatch.delenv("RAPIDSHIP_REGISTRY_PASSWORD", raising=False)
    assert credentials_for("harbor.example.internal") is None
    token = base64.b64encode(b"robot$ci:s3cret").decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"harbor.example.internal": {"auth": token}}}))
    creds = credentials_for("harbor.example.internal")
    assert (creds.user, creds.password) == ("robot$ci", "s3cret") and "s3cret" not in repr(creds)
    monkeypatch.setenv("RAPIDSHIP_REGISTRY_USER", "robot$promote")
    with pytest.raises(ConfigError, match="only one of the two"):
        credentials_for("harbor.example.internal")
    monkeypatch.setenv("RAPIDSHIP_REGISTRY_PASSWORD", "p")
    assert credentials_for("harbor.example.internal").user == "robot$promote"


def test_registry_flag_needs_a_host():
    assert split_repository("harbor.example.internal/staging") == ("harbor.example.internal", "staging")
    assert split_repository("127.0.0.1:5000/staging") == ("127.0.0.1:5000", "staging")
    with pytest.raises(ConfigError, match="does not start with a registry host"):
        split_repository("staging/rapids")


def test_vulnerability_report_in_either_encoding():
    report = {"application/vnd.security.vulnerability.report; version=1.1": {"vulnerabilities": []}}
    assert parse_report(json.dumps(report)) == report
    assert parse_report(json.dumps(json.dumps(report))) == report
    with pytest.raises(RapidshipError):
        parse_report('"[1, 2]"')


class Script:
    """A loopback server answering each request with the next scripted step."""

    def __init__(self, steps: list):
        self.steps, self.hits = list(steps), 0
        script = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _serve(self):
                script.hits += 1
                step = script.steps.pop(0) if script.steps else 200
                if step == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if step == "slow":
                    time.sleep(1.0)
                    step = 200
                self.send_response(step)
                if step == 429:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v2/x"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


FAST = RetryPolicy(attempts=4, base_delay=0.01)


def test_send_retries_5xx_429_and_drops_then_succeeds():
    seen = []
    with Script(["drop", 503, 429, 200]) as s:
        resp = send(requests.Session(), "GET", s.url, policy=FAST, what="t", on_retry=lambda *a: seen.append(a))
        assert resp.status_code == 200 and s.hits == 4 and len(seen) == 3


def test_a_response_slower_than_the_timeout_is_retried():
    with Script(["slow", 200]) as s:
        policy = RetryPolicy(attempts=3, base_delay=0.01, timeout=0.3)
        assert send(requests.Session(), "GET", s.url, policy=policy, what="t").status_code == 200 and s.hits == 2


def test_a_server_that_never_answers_is_given_up_on_naming_the_wait_and_the_time():
    with Script(["slow"] * 3) as s:
        policy = RetryPolicy(attempts=2, base_delay=0.01, timeout=0.3)
        with pytest.raises(RapidshipError) as raised:
            send(requests.Session(), "GET", s.url, policy=policy, what="t")
        assert re.search(r"gave up after 2 attempts in [01] s; last fault: no answer from 127\.0\.0\.1:\d+ within "
                         r"0\.3 s \(ReadTimeout\) on GET /v2/x", raised.value.message), raised.value.message


def test_send_gives_up_with_one_message_and_never_retries_4xx():
    with Script([503] * 10) as s:
        with pytest.raises(RapidshipError, match=r"gave up after 4 attempts in \d+ s; last fault: HTTP 503 on GET /v2/x"):
            send(requests.Session(), "GET", s.url, policy=FAST, what="t")
        assert s.hits == 4
    with Script([404]) as s:
        assert send(requests.Session(), "GET", s.url, policy=FAST, what="t").status_code == 404 and s.hits == 1


def test_a_create_that_may_have_landed_is_not_repeated():
    with Script(["drop", 200]) as s:
        with pytest.raises(RapidshipError, match="not retried because it may have been applied"):
            send(requests.Session(), "POST", s.url, policy=FAST, what="t", idempotent=False)
        assert s.hits == 1
    with Script([503, 201]) as s:  # 503: the server says it did not take it
        assert send(requests.Session(), "POST", s.url, policy=FAST, what="t", idempotent=False).status_code == 201
