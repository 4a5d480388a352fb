"""A registry on this machine's loopback for a local run of the whole pipeline: Debian's
docker-registry (CNCF distribution) with TLS from a throwaway CA made here and one htpasswd
user, started in the background and stopped by its pid (`invoke registry.up` / `registry.down`).

rapidship speaks HTTPS only (docs/supply-chain.md), so the local route past `gates` is this, not a
plain-HTTP registry: the CA and the credential go to `<dir>/env.sh` (0600), which the user sources
(`RAPIDSHIP_REGISTRY`, `RAPIDSHIP_REGISTRY_CA`, `RAPIDSHIP_REGISTRY_USER`, `_PASSWORD`). Nothing is
trusted system-wide and nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import datetime as dt
import http.client
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from rapidship.errors import ConfigError, RapidshipError

USER = "local-robot"


def make_tls(directory: Path, days: int = 7) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it: (ca.crt, server.crt, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rapidship loopback CA (throwaway)")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = directory / "ca.crt", directory / "server.crt", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(paths[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    return paths


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Loopback:
    directory: Path
    port: int
    pid: int

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


def _htpasswd(path: Path, user: str, password: str) -> None:
    """bcrypt htpasswd (what distribution reads) with apache2-utils' htpasswd; the password on stdin."""
    tool = shutil.which("htpasswd")
    if tool is None:
        raise ConfigError("invoke registry.up", "htpasswd is not installed", "apt-get install apache2-utils")
    proc = subprocess.run([tool, "-niB", user], input=password + "\n", capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RapidshipError("htpasswd", proc.stderr.strip()[-300:] or "failed", "check apache2-utils")
    path.write_text(proc.stdout.strip() + "\n")


def up(directory: Path, port: int | None = None) -> Loopback:
    """Start the registry in the background (its own session: it outlives this command); refuse
    when one of this directory is already running. env.sh names absolute paths: it is sourced, and
    read by jobs, from other directories."""
    directory = directory.resolve()
    binary = shutil.which("docker-registry")
    if binary is None:
        raise ConfigError("invoke registry.up", "docker-registry is not installed", "apt-get install docker-registry")
    running = status(directory)
    if running is not None:
        raise ConfigError("invoke registry.up", f"a loopback registry of {directory} already runs on {running.host} "
                          f"(pid {running.pid})", "use it (. env.sh there), or stop it: invoke registry.down")
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    ca, cert, key = make_tls(directory)
    password = secrets.token_urlsafe(24)
    _htpasswd(directory / "htpasswd", USER, password)
    port = port or free_port()
    (directory / "config.yml").write_text(f"""version: 0.1
log: {{level: warn}}
storage:
  filesystem: {{rootdirectory: {directory / 'data'}}}
  delete: {{enabled: true}}
http:
  addr: 127.0.0.1:{port}
  tls: {{certificate: {cert}, key: {key}}}
auth:
  htpasswd: {{realm: rapidship-loopback, path: {directory / 'htpasswd'}}}
""")
    with open(directory / "registry.log", "ab") as log:
        proc = subprocess.Popen([binary, "serve", str(directory / "config.yml")], stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    _wait(proc, ca, port, directory / "registry.log")
    (directory / "pid").write_text(f"{proc.pid} {port}\n")
    env = directory / "env.sh"
    fd = os.open(env, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"# the loopback registry of `invoke registry.up` (stop it: invoke registry.down)\n"
                  f"export RAPIDSHIP_REGISTRY=127.0.0.1:{port}\nexport RAPIDSHIP_REGISTRY_CA={ca}\n"
                  f"export RAPIDSHIP_REGISTRY_USER={USER}\nexport RAPIDSHIP_REGISTRY_PASSWORD={password}\n")
    return Loopback(directory, port, proc.pid)


def _wait(proc: subprocess.Popen, ca: Path, port: int, log: Path) -> None:
    context = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RapidshipError("docker-registry", f"exited at start: {log.read_text()[-500:]}", "check its config")
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=2)
            conn.request("GET", "/v2/")
            if conn.getresponse().status == 401:  # up, and asking for the credential
                return
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise RapidshipError("docker-registry", "did not answer on loopback within 20 s", f"see {log}")


def status(directory: Path) -> Loopback | None:
    """The registry this directory started, if its process still runs."""
    try:
        pid, port = (int(x) for x in (directory / "pid").read_text().split())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return Loopback(directory, port, pid)


def down(directory: Path) -> Loopback | None:
    """Stop the registry this directory started (by its pid); its data stays unless removed."""
    running = status(directory)
    if running is None:
        (directory / "pid").unlink(missing_ok=True)
        return None
    os.kill(running.pid, signal.SIGTERM)
    for _ in range(100):
        try:
            os.kill(running.pid, 0)
        except OSError:
            break
        time.sleep(0.1)
    (directory / "pid").unlink(missing_ok=True)
    return running
