"""Harbor as configuration: desired state vs live state -> a list of changes, then apply them.

Pure core: `desired_state(config)` and `live_*` turn config and Harbor's JSON into the same
comparable shape (a dict keyed by (kind, name)); `diff` compares them; `payload_*` build request
bodies. Thin edge: `HarborClient` (Harbor's REST API v2.0 over requests, retried) and `apply`.
The Harbor-side gate (`scan_gate`) triggers a scan, waits, fetches the report and asks a policy.

Nothing here deletes a project, registry or robot: resources missing from the config are left
alone. Immutable-tag rules and retention rules of managed projects are owned entirely.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import requests

from rapidship.errors import ConfigError, GateFailure, RapidshipError
from rapidship.harbor_config import HarborConfig, Project, Retention
from rapidship.retrying import OnRetry, RetryPolicy, send

KINDS = ("registry", "project", "immutable-rule", "retention", "robot")
Key = tuple[str, str]
State = dict[Key, dict]


# ---- pure: config -> comparable state ----

def _flag(value: bool) -> str:
    return "true" if value else "false"


def project_spec(project: Project) -> dict:
    meta = {"public": _flag(project.public), "auto_scan": _flag(project.auto_scan),
            "prevent_vul": _flag(project.prevent_vul is not None)}
    if project.prevent_vul is not None:
        meta["severity"] = project.prevent_vul.severity
    allow = None
    if project.cve_allowlist is not None:
        meta["reuse_sys_cve_allowlist"] = "false"
        allow = {"expires_at": project.cve_allowlist.expires_at, "items": sorted(project.cve_allowlist.items)}
    return {"metadata": meta, "proxy_cache": project.proxy_cache, "cve_allowlist": allow}


def retention_spec(retention: Retention) -> dict:
    return {"schedule": retention.schedule,
            "rules": [{"template": r.template, "value": r.value, "repositories": r.repositories, "tags": r.tags,
                       "untagged": r.untagged} for r in retention.rules]}


def desired_state(cfg: HarborConfig) -> State:
    state: State = {}
    for name, reg in cfg.instance.registries.items():
        state[("registry", name)] = {"type": reg.type, "url": reg.url, "description": reg.description,
                                     "insecure": reg.insecure,
                                     "access_key": reg.credential.access_key if reg.credential else ""}
    for name, project in cfg.projects.items():
        state[("project", name)] = project_spec(project)
        for rule in project.immutable_tags:
            spec = {"project": name, "repositories": rule.repositories, "tags": rule.tags}
            state[("immutable-rule", _rule_name(spec))] = spec
        if project.retention is not None:
            state[("retention", name)] = retention_spec(project.retention)
    for key, robot in cfg.robots.items():
        state[("robot", cfg.robot_name(key))] = {
            "description": robot.description, "duration": robot.duration_days, "disable": False,
            "permissions": sorted(f"{ns}/{grant}" for ns, grants in robot.permissions.items() for grant in grants)}
    return state


def _rule_name(spec: dict) -> str:
    return f"{spec['project']}: repositories {spec['repositories']} tags {spec['tags']}"


# ---- pure: Harbor JSON -> comparable state ----

def live_registry(reg: dict) -> dict:
    cred = reg.get("credential") or {}
    return {"type": reg.get("type", ""), "url": reg.get("url", ""), "description": reg.get("description", ""),
            "insecure": bool(reg.get("insecure", False)), "access_key": cred.get("access_key", "") or ""}


def live_project(project: dict, registry_names: dict[int, str], wanted: dict) -> dict:
    meta = project.get("metadata") or {}
    # Harbor omits unset metadata; an unset flag reads as "false". Compare only what we manage.
    keys = wanted["metadata"].keys()
    live_meta = {k: meta.get(k, "false" if k != "severity" else None) for k in keys}
    allow = project.get("cve_allowlist") or {}
    items = sorted(i.get("cve_id", "") for i in allow.get("items") or [])
    reg_id = project.get("registry_id") or 0
    return {"metadata": live_meta, "proxy_cache": registry_names.get(reg_id, f"#{reg_id}") if reg_id else None,
            "cve_allowlist": {"expires_at": allow.get("expires_at"), "items": items} if items else None}


def live_immutable_rule(project: str, rule: dict) -> dict:
    tags = (rule.get("tag_selectors") or [{}])[0].get("pattern", "")
    repos = ((rule.get("scope_selectors") or {}).get("repository") or [{}])[0].get("pattern", "")
    return {"project": project, "repositories": repos, "tags": tags}


def live_retention(policy: dict) -> dict:
    rules = []
    for rule in policy.get("rules") or []:
        template = rule.get("template", "")
        tag_sel = (rule.get("tag_selectors") or [{}])[0]
        try:
            untagged = bool(json.loads(tag_sel.get("extras") or "{}").get("untagged", False))
        except (ValueError, AttributeError):
            untagged = False
        rules.append({"template": template, "value": (rule.get("params") or {}).get(template),
                      "repositories": ((rule.get("scope_selectors") or {}).get("repository") or [{}])[0].get("pattern", ""),
                      "tags": tag_sel.get("pattern", ""), "untagged": untagged})
    trigger = policy.get("trigger") or {}
    return {"schedule": (trigger.get("settings") or {}).get("cron", ""), "rules": rules}


def live_robot(robot: dict) -> dict:
    perms = sorted(f"{p.get('namespace')}/{a.get('resource')}:{a.get('action')}"
                   for p in robot.get("permissions") or [] for a in p.get("access") or [])
    return {"description": robot.get("description", ""), "duration": robot.get("duration"),
            "disable": bool(robot.get("disable", False)), "permissions": perms}


# ---- pure: diff ----

@dataclass(frozen=True)
class Change:
    action: str            # create | update | delete
    kind: str
    name: str
    before: dict | None
    after: dict | None
    ref: int | None = None  # Harbor's id of the live object (update/delete)

    @property
    def fields(self) -> dict[str, tuple[Any, Any]]:
        before, after = self.before or {}, self.after or {}
        return {k: (before.get(k), after.get(k)) for k in sorted(set(before) | set(after))
                if before.get(k) != after.get(k)}

    def summary(self) -> str:
        if self.action != "update":
            return f"{self.action} {self.kind} {self.name}"
        return f"update {self.kind} {self.name}: " + "; ".join(
            f"{k} {old!r} -> {new!r}" for k, (old, new) in self.fields.items())


def diff(desired: State, live: State, refs: dict[Key, int] | None = None) -> list[Change]:
    """Pure: the changes that make `live` equal `desired`, in a safe order.

    A changed immutable-tag rule is a new rule plus a deleted one, created first so release
    tags are never mutable in between. A proxy cache's upstream cannot change after creation.
    """
    refs = refs or {}
    changes: list[Change] = []
    for key in desired:
        kind, name = key
        if key not in live:
            changes.append(Change("create", kind, name, None, desired[key]))
        elif live[key] != desired[key]:
            if kind == "project" and live[key]["proxy_cache"] != desired[key]["proxy_cache"]:
                raise ConfigError(f"projects.{name}.proxy_cache",
                                  f"the live project mirrors {live[key]['proxy_cache']!r}, the config says "
                                  f"{desired[key]['proxy_cache']!r}; Harbor fixes a proxy cache's upstream at creation",
                                  "keep the live value, or delete the project in Harbor by hand and apply again")
            changes.append(Change("update", kind, name, live[key], desired[key], refs.get(key)))
    for key in live:
        if key not in desired and key[0] == "immutable-rule":
            changes.append(Change("delete", key[0], key[1], live[key], None, refs.get(key)))
    order = {k: i for i, k in enumerate(KINDS)}
    rank = {"create": 0, "update": 1, "delete": 2}
    return sorted(changes, key=lambda c: (order[c.kind], rank[c.action]))


# ---- pure: request bodies (spec definitions named in each docstring) ----

def payload_registry(name: str, spec: dict, secret: str | None) -> dict:
    """Registry (POST /registries)."""
    body = {"name": name, "type": spec["type"], "url": spec["url"], "description": spec["description"],
            "insecure": spec["insecure"]}
    if spec["access_key"]:
        body["credential"] = {"type": "basic", "access_key": spec["access_key"], "access_secret": secret or ""}
    return body


def payload_registry_update(spec: dict, secret: str | None) -> dict:
    """RegistryUpdate (PUT /registries/{id})."""
    body = {"description": spec["description"], "url": spec["url"], "insecure": spec["insecure"]}
    if spec["access_key"]:
        body |= {"credential_type": "basic", "access_key": spec["access_key"]}
        if secret:
            body["access_secret"] = secret
    return body


def payload_project(name: str | None, spec: dict, registry_id: int | None) -> dict:
    """ProjectReq (POST /projects, PUT /projects/{name})."""
    body: dict[str, Any] = {"metadata": dict(spec["metadata"])}
    if name is not None:
        body["project_name"] = name
        if registry_id is not None:
            body["registry_id"] = registry_id
    allow = spec["cve_allowlist"]
    # The allowlist is owned: a project without one in the config gets an empty one.
    body["cve_allowlist"] = ({"expires_at": allow["expires_at"], "items": [{"cve_id": c} for c in allow["items"]]}
                             if allow is not None else {"items": []})
    return body


def payload_immutable_rule(spec: dict) -> dict:
    """ImmutableRule (POST /projects/{project}/immutabletagrules)."""
    return {"disabled": False, "action": "immutable", "template": "immutable_template",
            "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": spec["tags"]}],
            "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches",
                                                "pattern": spec["repositories"]}]}}


def payload_retention(spec: dict, project_id: int, policy_id: int | None = None) -> dict:
    """RetentionPolicy (POST /retentions, PUT /retentions/{id})."""
    rules = [{"disabled": False, "action": "retain", "template": r["template"], "params": {r["template"]: r["value"]},
              "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": r["tags"],
                                 "extras": json.dumps({"untagged": r["untagged"]})}],
              "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches",
                                                  "pattern": r["repositories"]}]}}
             for r in spec["rules"]]
    body = {"algorithm": "or", "rules": rules,
            "trigger": {"kind": "Schedule", "settings": {"cron": spec["schedule"]}, "references": {}},
            "scope": {"level": "project", "ref": project_id}}
    if policy_id is not None:
        body["id"] = policy_id
    return body


def payload_robot(name: str, spec: dict, robot_id: int | None = None) -> dict:
    """RobotCreate (POST /robots) or Robot (PUT /robots/{id}; `name` is then the full name)."""
    grouped: dict[str, list[dict]] = {}
    for perm in spec["permissions"]:
        namespace, grant = perm.split("/", 1)
        resource, action = grant.split(":", 1)
        grouped.setdefault(namespace, []).append({"resource": resource, "action": action})
    body = {"name": name, "description": spec["description"], "level": "system", "duration": spec["duration"],
            "disable": spec["disable"],
            "permissions": [{"kind": "project", "namespace": ns, "access": access} for ns, access in sorted(grouped.items())]}
    if robot_id is not None:
        body["id"] = robot_id
    return body


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
    try:
        doc = json.loads(text)
        if isinstance(doc, str):
            doc = json.loads(doc)
    except ValueError:
        raise RapidshipError("harbor vulnerabilities report", "not JSON", "check the scanner in Harbor") from None
    if not isinstance(doc, dict):
        raise RapidshipError("harbor vulnerabilities report", f"expected a JSON object, got {type(doc).__name__}",
                             "check the scanner in Harbor")
    return doc


# ---- edge: read live state, apply changes ----

@dataclass
class Live:
    state: State = field(default_factory=dict)
    refs: dict[Key, int] = field(default_factory=dict)
    registry_ids: dict[str, int] = field(default_factory=dict)
    project_ids: dict[str, int] = field(default_factory=dict)
    retention_ids: dict[str, int] = field(default_factory=dict)


def read_live(client: HarborClient, cfg: HarborConfig) -> Live:
    live = Live()
    desired = desired_state(cfg)
    names: dict[int, str] = {}
    for reg in client.registries():
        names[reg["id"]] = reg["name"]
        if reg["name"] in cfg.instance.registries:
            live.state[("registry", reg["name"])] = live_registry(reg)
            live.refs[("registry", reg["name"])] = live.registry_ids[reg["name"]] = reg["id"]
    for name in cfg.projects:
        project = client.project(name)
        if project is None:
            continue
        live.project_ids[name] = project["project_id"]
        live.state[("project", name)] = live_project(project, names, desired[("project", name)])
        for rule in client.immutable_rules(name):
            spec = live_immutable_rule(name, rule)
            live.state[("immutable-rule", _rule_name(spec))] = spec
            live.refs[("immutable-rule", _rule_name(spec))] = rule["id"]
        retention_id = (project.get("metadata") or {}).get("retention_id")
        if retention_id:
            live.retention_ids[name] = int(retention_id)
            live.state[("retention", name)] = live_retention(client.retention(int(retention_id)))
            live.refs[("retention", name)] = int(retention_id)
    for robot in client.robots():
        if robot.get("level") == "system" and ("robot", robot["name"]) in desired:
            live.state[("robot", robot["name"])] = live_robot(robot)
            live.refs[("robot", robot["name"])] = robot["id"]
    return live


def plan(client: HarborClient, cfg: HarborConfig) -> tuple[list[Change], Live]:
    live = read_live(client, cfg)
    return diff(desired_state(cfg), live.state, live.refs), live


class SecretSink:
    """Robot secrets: shown by Harbor once, kept once. A 0600 JSON file (merged with what it
    holds) and/or one print on stdout. Never a log line, never the apply record."""

    def __init__(self, path: Path | None, print_once: bool = False) -> None:
        self.path, self.print_once, self.secrets = path, print_once, {}

    def add(self, name: str, secret: str) -> None:
        self.secrets[name] = secret

    def flush(self) -> None:
        if not self.secrets:
            return
        if self.path is not None:
            kept = json.loads(self.path.read_text()) if self.path.is_file() else {}
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self.path.with_name(self.path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                os.fchmod(out.fileno(), 0o600)
                json.dump(kept | self.secrets, out, indent=2)
            os.replace(tmp, self.path)
        if self.print_once:
            print(json.dumps(self.secrets, indent=2))


def apply(client: HarborClient, cfg: HarborConfig, changes: list[Change], live: Live, secrets: SecretSink,
          on_change: Callable[[Change], None] = lambda _: None) -> list[Change]:
    """Make each change; ids created on the way (registries, projects) feed the later ones."""
    done = []
    try:
        for change in changes:
            _apply_one(client, cfg, change, live, secrets)
            done.append(change)
            on_change(change)
    finally:
        secrets.flush()  # a robot made before a later failure must not lose its only secret
    return done


def _registry_secret(cfg: HarborConfig, name: str, required: bool) -> str | None:
    cred = cfg.instance.registries[name].credential
    if cred is None:
        return None
    secret = os.environ.get(cred.secret_env)
    if required and not secret:
        raise ConfigError(f"registries.{name}.credential.secret_env", f"${cred.secret_env} is not set",
                          f"export {cred.secret_env} with the upstream registry's secret, then apply again")
    return secret


def _apply_one(client: HarborClient, cfg: HarborConfig, c: Change, live: Live, secrets: SecretSink) -> None:
    if c.kind == "registry":
        if c.action == "create":
            secret = _registry_secret(cfg, c.name, required=True)
            live.registry_ids[c.name] = client.create_registry(payload_registry(c.name, c.after, secret))
        else:
            client.update_registry(c.ref, payload_registry_update(c.after, _registry_secret(cfg, c.name, False)))
    elif c.kind == "project":
        if c.action == "create":
            reg = c.after["proxy_cache"]
            reg_id = live.registry_ids.get(reg) if reg else None
            if reg and reg_id is None:
                reg_id = next(r["id"] for r in client.registries() if r["name"] == reg)
            client.create_project(payload_project(c.name, c.after, reg_id))
            live.project_ids[c.name] = client.project(c.name)["project_id"]
        else:
            client.update_project(c.name, payload_project(None, c.after, None))
    elif c.kind == "immutable-rule":
        if c.action == "create":
            client.create_immutable_rule(c.after["project"], payload_immutable_rule(c.after))
        else:
            client.delete_immutable_rule(c.before["project"], c.ref)
    elif c.kind == "retention":
        project_id = live.project_ids[c.name]
        if c.action == "create":
            live.retention_ids[c.name] = client.create_retention(payload_retention(c.after, project_id))
        else:
            client.update_retention(c.ref, payload_retention(c.after, project_id, c.ref))
    elif c.kind == "robot":
        key = c.name.removeprefix(cfg.instance.robot_prefix)
        if c.action == "create":
            created = client.create_robot(payload_robot(key, c.after))
            secrets.add(created.get("name", c.name), created["secret"])
        else:
            client.update_robot(c.ref, payload_robot(c.name, c.after, c.ref))


def change_record(c: Change) -> dict:
    """What the JSON record of plan/apply holds: no secret can be in it (none is in the state)."""
    return {"action": c.action, "kind": c.kind, "name": c.name,
            "fields": {k: {"live": old, "wanted": new} for k, (old, new) in c.fields.items()}}


# ---- the Harbor-side gate ----

@dataclass(frozen=True)
class HarborScan:
    project: str
    repository: str
    digest: str
    scan_status: str
    seconds: float
    passed: bool
    decision: Any
    findings: list[dict]


def findings(report: dict) -> list[dict]:
    """Pure: the vulnerabilities of every report in the addition, flattened."""
    out = []
    for mime, rep in report.items():
        for v in (rep or {}).get("vulnerabilities") or []:
            out.append({"id": v.get("id"), "package": v.get("package"), "version": v.get("version"),
                        "fix_version": v.get("fix_version") or "", "severity": v.get("severity", "Unknown"),
                        "report": mime})
    return out


def _verdict(decision: Any) -> bool:
    passed = decision.get("passed") if isinstance(decision, dict) else getattr(decision, "passed", None)
    if not isinstance(passed, bool):
        raise GateFailure("harbor gate", f"the policy returned no passed=true/false verdict ({decision!r})",
                          "fix the decide function: a gate without a verdict fails closed")
    return passed


def scan_gate(client: HarborClient, project: str, repository: str, digest: str,
              decide: Callable[[dict], Any], timeout: float = 900, poll: float = 5.0,
              sleep: Callable[[float], None] = time.sleep) -> HarborScan:
    """Scan a pushed artifact in Harbor, wait for the report and apply the policy to it.

    Fails closed: a scan that errors, stops or outlives `timeout`, or a decision without a
    boolean verdict, is a GateFailure. `decide` receives the report exactly as Harbor serves it.
    """
    start = time.monotonic()
    client.scan(project, repository, digest)
    where = f"harbor scan {project}/{repository}@{digest[:19]}"
    while True:
        overview = client.artifact(project, repository, digest).get("scan_overview") or {}
        statuses = [s.get("scan_status", "") for s in overview.values()]
        if statuses and all(s == "Success" for s in statuses):
            break
        if any(s in ("Error", "Stopped") for s in statuses):
            raise GateFailure(where, f"scan ended with {', '.join(statuses)}", "see the scan log in Harbor, then scan again")
        if time.monotonic() - start > timeout:
            raise GateFailure(where, f"no finished scan after {timeout:.0f}s (status {statuses or 'none'})",
                              "check Harbor's scanner and job service, then run again")
        sleep(poll)
    report = client.vulnerabilities(project, repository, digest)
    decision = decide(report)
    return HarborScan(project=project, repository=repository, digest=digest, scan_status="Success",
                      seconds=round(time.monotonic() - start, 1), passed=_verdict(decision),
                      decision=decision if isinstance(decision, (dict, list, str, int, float, bool)) else repr(decision),
                      findings=findings(report))


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(value) if hasattr(value, "__dataclass_fields__") else value, indent=2,
                               default=str) + "\n")
    return path
