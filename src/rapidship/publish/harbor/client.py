"""Harbor's REST API v2.0 over requests, retried: the one client every Harbor stage uses."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

import requests

from rapidship.errors import ConfigError, RapidshipError
from rapidship.publish.harbor.config import HarborConfig
from rapidship.publish.retrying import OnRetry, RetryPolicy, send


# ---- edge: the REST client ----

def repo_path(repository: str) -> str:
    """Harbor wants a repository name with slashes URL-encoded twice (a/b -> a%252Fb)."""
    return quote(quote(repository, safe=""), safe="")


class HarborClient:
    """Harbor REST API v2.0, only the calls this project makes. Auth: HTTP basic."""

    def __init__(self, url: str, user: str, password: str, ca_bundle: str | None = None,
                 policy: RetryPolicy = RetryPolicy(), on_retry: OnRetry | None = None) -> None:
        self.api = url.rstrip("/") + "/api/v2.0"
        self.session = requests.Session()
        self.session.auth = (user, password)
        self.session.verify = ca_bundle or True
        self.session.headers["Accept"] = "application/json"
        self.policy, self.on_retry = policy, on_retry

    @classmethod
    def from_env(cls, cfg: HarborConfig, url: str | None = None, on_retry: OnRetry | None = None) -> "HarborClient":
        env = os.environ
        user, password = env.get("RAPIDSHIP_HARBOR_USER"), env.get("RAPIDSHIP_HARBOR_PASSWORD")
        if not user or not password:
            raise ConfigError("RAPIDSHIP_HARBOR_USER / RAPIDSHIP_HARBOR_PASSWORD", "not set",
                              "export the credentials of a Harbor administrator (never pass them as flags)")
        return cls(url or env.get("RAPIDSHIP_HARBOR_URL") or cfg.instance.url, user, password,
                   env.get("RAPIDSHIP_HARBOR_CA") or None, RetryPolicy.from_env(), on_retry)

    def call(self, method: str, path: str, *, body: Any = None, params: dict | None = None,
             headers: dict | None = None, ok: tuple[int, ...] = (200,), missing_ok: bool = False) -> requests.Response | None:
        resp = send(self.session, method, self.api + path, policy=self.policy, what="harbor",
                    idempotent=method != "POST", on_retry=self.on_retry, json=body, params=params, headers=headers)
        if resp.status_code in ok:
            return resp
        if missing_ok and resp.status_code == 404:
            return None
        try:
            detail = "; ".join(e.get("message", "") for e in resp.json().get("errors", []))
        except ValueError:
            detail = resp.text[:200]
        fix = {401: "check RAPIDSHIP_HARBOR_USER / RAPIDSHIP_HARBOR_PASSWORD",
               403: "the account lacks the permission: use a Harbor administrator"}.get(resp.status_code, "")
        raise RapidshipError(f"harbor {method} {path}", f"HTTP {resp.status_code}: {detail or resp.reason}", fix)

    def _pages(self, path: str, params: dict | None = None) -> list[dict]:
        out, page = [], 1
        while True:
            batch = self.call("GET", path, params={**(params or {}), "page": page, "page_size": 100}).json()
            out += batch
            if len(batch) < 100:
                return out
            page += 1

    @staticmethod
    def _created_id(resp: requests.Response) -> int:
        tail = (resp.headers.get("Location") or "").rstrip("/").rsplit("/", 1)[-1]
        if not tail.isdigit():
            raise RapidshipError(f"harbor {resp.request.method} {resp.request.path_url}",
                                 f"created, but the Location header {resp.headers.get('Location')!r} names no id",
                                 "run harbor.plan to see the state, then apply again")
        return int(tail)

    # registries
    def registries(self) -> list[dict]:
        return self._pages("/registries")

    def create_registry(self, body: dict) -> int:
        return self._created_id(self.call("POST", "/registries", body=body, ok=(201,)))

    def update_registry(self, registry_id: int, body: dict) -> None:
        self.call("PUT", f"/registries/{registry_id}", body=body)

    # projects
    def project(self, name: str) -> dict | None:
        resp = self.call("GET", f"/projects/{quote(name, safe='')}", headers={"X-Is-Resource-Name": "true"},
                         missing_ok=True)
        return resp.json() if resp is not None else None

    def create_project(self, body: dict) -> None:
        self.call("POST", "/projects", body=body, ok=(201,))

    def update_project(self, name: str, body: dict) -> None:
        self.call("PUT", f"/projects/{quote(name, safe='')}", body=body, headers={"X-Is-Resource-Name": "true"})

    def immutable_rules(self, project: str) -> list[dict]:
        return self._pages(f"/projects/{quote(project, safe='')}/immutabletagrules")

    def create_immutable_rule(self, project: str, body: dict) -> None:
        self.call("POST", f"/projects/{quote(project, safe='')}/immutabletagrules", body=body, ok=(201,),
                  headers={"X-Is-Resource-Name": "true"})

    def update_immutable_rule(self, project: str, rule_id: int, body: dict) -> None:
        self.call("PUT", f"/projects/{quote(project, safe='')}/immutabletagrules/{rule_id}", body=body, ok=(200,),
                  headers={"X-Is-Resource-Name": "true"})

    def delete_immutable_rule(self, project: str, rule_id: int) -> None:
        self.call("DELETE", f"/projects/{quote(project, safe='')}/immutabletagrules/{rule_id}",
                  headers={"X-Is-Resource-Name": "true"})

    # retention
    def retention(self, policy_id: int) -> dict:
        return self.call("GET", f"/retentions/{policy_id}").json()

    def create_retention(self, body: dict) -> int:
        return self._created_id(self.call("POST", "/retentions", body=body, ok=(201,)))

    def update_retention(self, policy_id: int, body: dict) -> None:
        self.call("PUT", f"/retentions/{policy_id}", body=body)

    # robots
    def robots(self) -> list[dict]:
        return self._pages("/robots", {"q": "Level=system"})

    def create_robot(self, body: dict) -> dict:
        return self.call("POST", "/robots", body=body, ok=(201,)).json()

    def update_robot(self, robot_id: int, body: dict) -> None:
        self.call("PUT", f"/robots/{robot_id}", body=body)

    # artifacts and scans
    def _artifact_path(self, project: str, repository: str, reference: str) -> str:
        return f"/projects/{quote(project, safe='')}/repositories/{repo_path(repository)}/artifacts/{quote(reference, safe='')}"

    def scan(self, project: str, repository: str, reference: str) -> None:
        self.call("POST", self._artifact_path(project, repository, reference) + "/scan",
                  body={"scan_type": "vulnerability"}, ok=(202,))

    def artifact(self, project: str, repository: str, reference: str) -> dict:
        return self.call("GET", self._artifact_path(project, repository, reference),
                         params={"with_scan_overview": "true"}).json()

    def vulnerabilities(self, project: str, repository: str, reference: str) -> dict:
        resp = self.call("GET", self._artifact_path(project, repository, reference) + "/additions/vulnerabilities")
        return parse_report(resp.text)


def parse_report(text: str) -> dict:
    """The vulnerabilities addition: a JSON object keyed by report MIME type. The spec types the
    body as a string, so it may arrive JSON-encoded once more; accept both."""
    from rapidship import oci_json

    try:
        doc = oci_json.parse(text)
        if isinstance(doc, str):
            doc = oci_json.parse(doc)
    except oci_json.Ambiguous as err:
        why = "not JSON" if str(err).startswith("not JSON") else f"ambiguous: {err} (readers differ on which counts)"
        raise RapidshipError("harbor vulnerabilities report", why, "check the scanner in Harbor") from None
    if not isinstance(doc, dict):
        raise RapidshipError("harbor vulnerabilities report", f"expected a JSON object, got {type(doc).__name__}",
                             "check the scanner in Harbor")
    return doc
