"""A real OCI registry on loopback (Debian's docker-registry, CNCF distribution 2.8) with TLS from
a CA made here and htpasswd auth, plus a fault-injecting TLS proxy to put in front of it.

Nothing is trusted system-wide: clients get the CA through their own CA option.
"""

from __future__ import annotations

import datetime as dt
import http.client
import re
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from support.loopback import LoopbackServer
from pathlib import Path

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def make_tls(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 (the product's own, `invoke registry.up`'s)."""
    from rapidship.publish.loopback import make_tls as product_make_tls

    return product_make_tls(directory, days=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RegistryServer:
    """docker-registry serving TLS + htpasswd on 127.0.0.1; stopped by its pid."""

    directory: Path
    user: str = "ci-robot"
    password: str = "s3cret-push-token"
    port: int = 0
    ca: Path | None = None
    proc: subprocess.Popen | None = None
    token_auth: str = ""   # YAML of an auth.token section: bearer tokens instead of htpasswd

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, tls: tuple[Path, Path, Path] | None = None) -> "RegistryServer":
        self.ca, cert, key = tls or make_tls(self.directory)
        htpasswd = self.directory / "htpasswd"
        htpasswd.write_bytes(self.user.encode() + b":" + bcrypt.hashpw(self.password.encode(), bcrypt.gensalt(5)) + b"\n")
        self.port = free_port()
        config = self.directory / "config.yml"
        config.write_text(f"""version: 0.1
log: {{level: warn}}
storage:
  filesystem: {{rootdirectory: {self.directory / 'data'}}}
  delete: {{enabled: true}}
http:
  addr: 127.0.0.1:{self.port}
  tls: {{certificate: {cert}, key: {key}}}
auth:
  {self.token_auth or f"htpasswd: {{realm: rapidship-test, path: {htpasswd}}}"}
""")
        log = open(self.directory / "registry.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        context = ssl.create_default_context(cafile=str(self.ca))
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("docker-registry exited: " + (self.directory / "registry.log").read_text()[-2000:])
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=2)
                conn.request("GET", "/v2/")
                if conn.getresponse().status == 401:  # up, and asking for credentials
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("docker-registry did not answer within 20 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@dataclass
class Fault:
    method: str            # regex on the method
    path: str              # regex on the path (no query)
    kind: str              # "drop" (close without answering), "status" (answer `status`), "slow"
    times: int | None = 1  # None: every matching request, forever
    status: int = 503
    delay: float = 0.0
    retry_after: str | None = None
    fired: int = 0


@dataclass
class FaultProxy:
    """TLS in, TLS out: terminates the client's TLS with a certificate from the same CA and
    forwards each request to the registry unless a fault rule takes it first."""

    upstream_port: int
    ca: Path
    cert: Path
    key: Path
    faults: list[Fault] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    server: LoopbackServer | None = None

    @property
    def host(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.port}"

    def start(self) -> "FaultProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                proxy._handle(self)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self.server = LoopbackServer(Handler, tls=(self.cert, self.key))
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def _read_body(self, h: BaseHTTPRequestHandler) -> bytes:
        if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += h.rfile.read(size)
                h.rfile.readline()
        length = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(length) if length else b""

    def _rule(self, method: str, path: str) -> Fault | None:
        for f in self.faults:
            if re.fullmatch(f.method, method) and re.search(f.path, path) and (f.times is None or f.fired < f.times):
                f.fired += 1
                return f
        return None

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        body = self._read_body(h)
        path = h.path.split("?", 1)[0]
        self.seen.append(f"{h.command} {path}")
        fault = self._rule(h.command, path)
        if fault and fault.kind == "drop":
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault and fault.kind == "status":
            payload = b'{"errors":[{"code":"UNAVAILABLE","message":"injected fault"}]}'
            h.send_response(fault.status)
            if fault.retry_after:
                h.send_header("Retry-After", fault.retry_after)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            return
        if fault and fault.kind == "slow":
            time.sleep(fault.delay)
        context = ssl.create_default_context(cafile=str(self.ca))
        conn = http.client.HTTPSConnection("127.0.0.1", self.upstream_port, context=context, timeout=60)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("transfer-encoding", "connection",
                                                                          "content-length")}
        headers["Content-Length"] = str(len(body))
        conn.request(h.command, h.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        h.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                h.send_header(k, v)
        # HEAD answers carry the length of the body they do not send
        h.send_header("Content-Length", resp.getheader("Content-Length") or str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)
        conn.close()


def _b64url(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenServer:
    """The bearer-token flow Harbor and Docker Hub use (docker distribution's token spec): a
    realm that takes basic credentials and returns an ES256 JWT carrying the granted scopes,
    its signing certificate in the x5c header, trusted by the registry's rootcertbundle."""

    directory: Path
    cert: Path
    key: Path
    user: str = "robot$ci"
    password: str = "robot-secret"
    issuer: str = "rapidship-test-issuer"
    service: str = "rapidship-test-registry"
    requests: list[dict] = field(default_factory=list)
    signer_cert: Path | None = None
    server: LoopbackServer | None = None

    @property
    def realm(self) -> str:
        assert self.server is not None
        return f"https://127.0.0.1:{self.server.port}/token"

    def start(self) -> "TokenServer":
        import base64
        import json
        import uuid as _uuid
        from urllib.parse import parse_qs, urlsplit

        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        now = dt.datetime.now(dt.timezone.utc)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rapidship test token signer")])
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
                .not_valid_after(now + dt.timedelta(days=1)).sign(key, hashes.SHA256()))
        self.signer_cert = self.directory / "token-signer.crt"
        self.signer_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
        tokens = self

        def issue(scopes: list[str]) -> str:
            access = []
            for scope in scopes:
                kind, _, rest = scope.partition(":")
                repo, _, actions = rest.rpartition(":")
                access.append({"type": kind, "name": repo, "actions": actions.split(",")})
            t = int(time.time())
            header = {"typ": "JWT", "alg": "ES256", "x5c": [x5c]}
            claims = {"iss": tokens.issuer, "sub": tokens.user, "aud": tokens.service, "exp": t + 300, "nbf": t - 10,
                      "iat": t, "jti": _uuid.uuid4().hex, "access": access}
            signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
            r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
            return signing_input + "." + _b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                query = parse_qs(urlsplit(self.path).query)
                auth = self.headers.get("Authorization", "")
                ok = auth.startswith("Basic ") and base64.b64decode(auth[6:]).decode() == f"{tokens.user}:{tokens.password}"
                tokens.requests.append({"scopes": query.get("scope", []), "ok": ok})
                if not ok:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps({"token": issue(query.get("scope", [])), "expires_in": 300}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = LoopbackServer(Handler, tls=(self.cert, self.key))
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
