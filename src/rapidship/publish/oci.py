"""A small OCI distribution API client: manifests, blobs, cross-repository mounts, auth.

What skopeo does not do for us: build and push a manifest list / OCI index from per-arch
manifests already in the registry, check digests with HEAD, and promote by digest (mount blobs,
put the very same manifest bytes) so nothing is rebuilt or re-encoded. Every request goes
through `retrying.send`. Auth: HTTP basic, or the bearer-token flow (Harbor, Docker Hub) that a
401 challenge asks for, with the same credentials.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import requests

from rapidship import oci_json
from rapidship.errors import ConfigError, RapidshipError
from rapidship.redact import host_of, redact
from rapidship.publish.retrying import OnRetry, RetryPolicy, send

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST_TYPES = (OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str
    source: str  # where they came from, for messages (never the values)

    def __repr__(self) -> str:  # keep the password out of any traceback or log
        return f"Credentials(user={self.user!r}, source={self.source!r})"


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def credentials_for(host: str) -> Credentials | None:
    """Environment first (RAPIDSHIP_REGISTRY_USER / _PASSWORD, e.g. a CI robot's masked
    variables), then a docker / containers auth file entry for `host`. Never a flag."""
    env = os.environ
    user, password = env.get("RAPIDSHIP_REGISTRY_USER"), env.get("RAPIDSHIP_REGISTRY_PASSWORD")
    if user and password:
        return Credentials(user, password, "RAPIDSHIP_REGISTRY_USER/PASSWORD")
    if bool(user) != bool(password):
        raise ConfigError("RAPIDSHIP_REGISTRY_USER / RAPIDSHIP_REGISTRY_PASSWORD", "only one of the two is set",
                          "set both (a robot account's name and secret) or neither")
    files = [Path(p) for p in (env.get("REGISTRY_AUTH_FILE"),) if p]
    files.append(Path(env.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json")
    for path in files:
        if not path.is_file():
            continue
        try:
            auths = json.loads(path.read_text()).get("auths", {})
        except ValueError:
            raise ConfigError(str(path), "not valid JSON", "fix or remove the auth file") from None
        for key in (host, f"https://{host}", f"http://{host}"):
            entry = auths.get(key)
            if entry and entry.get("auth"):
                user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
                return Credentials(user, password, f"{path} ({key})")
    return None


class Registry:
    """One registry host. `repo` arguments are repository names inside it (project/image)."""

    def __init__(self, host: str, creds: Credentials | None, ca_bundle: str | None = None,
                 policy: RetryPolicy = RetryPolicy(), on_retry: OnRetry | None = None) -> None:
        self.host, self.creds, self.policy, self.on_retry = host, creds, policy, on_retry
        self.where = f"registry {host_of(host)}"  # messages name the host through the one redaction rule
        self.base = f"https://{host}"
        self.session = requests.Session()
        self.session.verify = ca_bundle or True
        self._tokens: dict[str, str] = {}
        self._basic: str | None = None  # basic auth answers every scope

    # ---- transport and auth ----
    def request(self, method: str, url: str, scope: str, idempotent: bool = True, **kw) -> requests.Response:
        url = urljoin(self.base, url)
        for _ in range(2):
            headers = dict(kw.pop("headers", None) or {})
            auth = self._basic or self._tokens.get(scope)
            if auth:
                headers["Authorization"] = auth
            resp = send(self.session, method, url, policy=self.policy, what=self.where,
                        idempotent=idempotent, on_retry=self.on_retry, headers=headers, **kw)
            kw["headers"] = headers
            if resp.status_code != 401 or auth:
                return resp
            auth = self._authorize(resp.headers.get("WWW-Authenticate", ""), scope)
            if auth.startswith("Basic "):
                self._basic = auth
            else:
                self._tokens[scope] = auth
        return resp

    def _authorize(self, challenge: str, scope: str) -> str:
        if self.creds is None:
            raise ConfigError(self.where, "the registry asks for credentials and none are set",
                              "export RAPIDSHIP_REGISTRY_USER / RAPIDSHIP_REGISTRY_PASSWORD (a robot account) "
                              "or log in with docker login")
        basic = "Basic " + base64.b64encode(f"{self.creds.user}:{self.creds.password}".encode()).decode()
        if challenge.lower().startswith("basic"):
            return basic
        if not challenge.lower().startswith("bearer"):
            raise RapidshipError(self.where, f"unsupported auth challenge {challenge.split(' ')[0]!r}")
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", "")
        params["scope"] = scope.split(" ")
        # the realm is the registry's word: it may carry anything, so it is shown redacted
        resp = send(self.session, "GET", realm, policy=self.policy, what=f"token service {host_of(realm)}",
                    on_retry=self.on_retry, params=params, headers={"Authorization": basic})
        if resp.status_code != 200:
            raise RapidshipError(self.where, f"token service refused the credentials "
                                 f"from {self.creds.source} (HTTP {resp.status_code})",
                                 "check the robot account's name, secret, expiry and permissions")
        body = resp.json()
        return "Bearer " + (body.get("token") or body.get("access_token") or "")

    def _fail(self, resp: requests.Response, what: str) -> RapidshipError:
        if resp.status_code in (401, 403):
            source = self.creds.source if self.creds else "no credentials"
            return RapidshipError(self.where, f"{what}: HTTP {resp.status_code} (credentials from {source})",
                                  "the account lacks the permission, or its secret is wrong or expired")
        return RapidshipError(self.where, f"{what}: HTTP {resp.status_code} {resp.text[:200]}",
                              "see the registry's logs")

    @staticmethod
    def _scope(repo: str, actions: str = "pull") -> str:
        return f"repository:{repo}:{actions}"

    # ---- manifests ----
    def head_manifest(self, repo: str, ref: str) -> Descriptor | None:
        resp = self.request("HEAD", f"/v2/{repo}/manifests/{ref}", self._scope(repo),
                            headers={"Accept": ", ".join(MANIFEST_TYPES)})
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise self._fail(resp, f"HEAD {repo}:{ref}")
        return Descriptor(resp.headers.get("Content-Type", ""), resp.headers.get("Docker-Content-Digest", ""),
                          int(resp.headers.get("Content-Length") or 0))

    def get_manifest(self, repo: str, ref: str) -> tuple[bytes, Descriptor]:
        resp = self.request("GET", f"/v2/{repo}/manifests/{ref}", self._scope(repo),
                            headers={"Accept": ", ".join(MANIFEST_TYPES)})
        if resp.status_code != 200:
            raise self._fail(resp, f"GET manifest {repo}:{ref}")
        data = resp.content
        digest = sha256(data)
        if ref.startswith("sha256:") and digest != ref:
            raise RapidshipError(self.where, f"manifest {repo}@{ref} arrived with digest {digest}",
                                 "the registry or a proxy altered it: do not use this registry path")
        media = self.parse_manifest(data, f"{repo}:{ref}").get("mediaType") or resp.headers.get("Content-Type", "")
        return data, Descriptor(media, digest, len(data))

    def parse_manifest(self, data: bytes, what: str) -> dict:
        """A manifest or index as a Go client reads it, or one error (oci_json): never a second meaning."""
        try:
            return oci_json.parse_manifest(data)
        except oci_json.Ambiguous as err:
            raise RapidshipError(self.where, f"{what} is refused: {err}",
                                 "a Go client (docker, containerd) could read it as something else: do not use it; "
                                 "push it again with rapidship") from None

    def put_manifest(self, repo: str, ref: str, data: bytes, media_type: str) -> str:
        resp = self.request("PUT", f"/v2/{repo}/manifests/{ref}", self._scope(repo, "pull,push"),
                            data=data, headers={"Content-Type": media_type})
        if resp.status_code not in (200, 201):
            raise self._fail(resp, f"PUT manifest {repo}:{ref}")
        digest = sha256(data)
        answered = resp.headers.get("Docker-Content-Digest")
        if answered and answered != digest:
            raise RapidshipError(self.where, f"stored {repo}:{ref} as {answered}, sent {digest}",
                                 "the registry rewrote the manifest")
        return digest

    # ---- blobs ----
    def blob_exists(self, repo: str, digest: str) -> bool:
        resp = self.request("HEAD", f"/v2/{repo}/blobs/{digest}", self._scope(repo))
        if resp.status_code in (200, 404):
            return resp.status_code == 200
        raise self._fail(resp, f"HEAD blob {repo}@{digest[:19]}")

    def get_blob(self, repo: str, digest: str) -> bytes:
        resp = self.request("GET", f"/v2/{repo}/blobs/{digest}", self._scope(repo))
        if resp.status_code != 200:
            raise self._fail(resp, f"GET blob {repo}@{digest[:19]}")
        if sha256(resp.content) != digest:
            raise RapidshipError(self.where, f"blob {digest[:19]} arrived corrupted", "run again")
        return resp.content

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        """Cross-repository mount: the registry links a blob it has; True when it did (201)."""
        scope = f"{self._scope(repo, 'pull,push')} {self._scope(from_repo)}"
        resp = self.request("POST", f"/v2/{repo}/blobs/uploads/", scope, params={"mount": digest, "from": from_repo})
        if resp.status_code == 201:
            return True
        if resp.status_code == 202:  # declined, an upload session was opened instead: abandon it
            return False
        raise self._fail(resp, f"mount {digest[:19]} from {from_repo} into {repo}")

    def copy_blob(self, src: str, dst: str, digest: str) -> str:
        """Make `digest` present in `dst`: "present" already, "mounted" from `src`, or "copied"
        (the registry declined the mount: read from src, uploaded to dst)."""
        if self.blob_exists(dst, digest):
            return "present"
        if self.mount_blob(dst, digest, src):
            return "mounted"
        self.upload_blob(dst, self.get_blob(src, digest), digest)
        return "copied"

    def upload_blob(self, repo: str, data: bytes, digest: str) -> None:
        """Monolithic upload (POST then PUT); a lost PUT answer is settled with a HEAD."""
        scope = self._scope(repo, "pull,push")
        resp = self.request("POST", f"/v2/{repo}/blobs/uploads/", scope)
        if resp.status_code != 202:
            raise self._fail(resp, f"start upload to {repo}")
        location = resp.headers["Location"]
        sep = "&" if "?" in location else "?"
        resp = self.request("PUT", f"{location}{sep}digest={digest}", scope, data=data,
                            headers={"Content-Type": "application/octet-stream"})
        if resp.status_code != 201 and not self.blob_exists(repo, digest):
            raise self._fail(resp, f"upload {digest[:19]} to {repo}")


_HOST = re.compile(r"^(localhost|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+)(:(\d{1,5}))?$", re.IGNORECASE)
_PATH = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$")
REGISTRY_FIX = "write HOST[:PORT]/PROJECT, e.g. harbor.example.internal/staging"


def split_repository(ref: str, flag: str = "--registry") -> tuple[str, str]:
    """'host[:port]/project[/image]' -> (host, 'project[/image]'). Credentials, query strings and
    schemes are refused (and never echoed): credentials come from the environment, not a flag."""
    shown = redact(ref)
    if "@" in ref.split("/", 1)[0] or re.match(r"^[a-z]+://[^/]*@", ref):
        raise ConfigError(flag, f"{shown} carries credentials", "give them as RAPIDSHIP_REGISTRY_USER / "
                          "RAPIDSHIP_REGISTRY_PASSWORD (or a docker config), never in a flag; " + REGISTRY_FIX)
    if "?" in ref or "#" in ref:
        raise ConfigError(flag, f"{shown} carries a query string (a token?)", "tokens belong in the environment; "
                          + REGISTRY_FIX)
    if "://" in ref:
        raise ConfigError(flag, f"{shown} names a scheme", "drop the scheme; " + REGISTRY_FIX)
    host, _, repo = ref.partition("/")
    found = _HOST.match(host)
    if not found or not ("." in host or ":" in host or host == "localhost"):
        raise ConfigError(flag, f"{shown} does not start with a registry host", REGISTRY_FIX)
    if found.group(6) and not 0 < int(found.group(6)) < 65536:
        raise ConfigError(flag, f"{shown}: port {found.group(6)} is not 1-65535", REGISTRY_FIX)
    if not repo or not _PATH.match(repo):
        raise ConfigError(flag, f"{shown} names no project (or one with characters a registry refuses)",
                          REGISTRY_FIX)
    return host, repo
