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
from dataclasses import dataclass
from typing import Any


from rapidship.errors import ConfigError
from rapidship.publish.harbor.config import HarborConfig, Project, Retention

KINDS = ("registry", "project", "immutable-rule", "retention", "robot")
Key = tuple[str, str]
State = dict[Key, dict]


# ---- pure: config -> comparable state ----

def _flag(value: bool) -> str:
    return "true" if value else "false"


def project_spec(project: Project) -> dict:
    meta = {"public": _flag(project.public), "auto_scan": _flag(project.auto_scan),
            "prevent_vul": _flag(project.prevent_vul is not None),
            "enable_content_trust_cosign": _flag(project.require_cosign)}
    if project.prevent_vul is not None:
        meta["severity"] = project.prevent_vul.severity
    # owned on every managed project: switched on, the system-wide allowlist would apply too
    meta["reuse_sys_cve_allowlist"] = "false"
    allow = None
    if project.cve_allowlist is not None:
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
            spec = immutable_spec(name, rule.repositories, rule.tags)
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


def immutable_spec(project: str, repositories: str, tags: str) -> dict:
    """Every field that changes what an immutable-tag rule does, as rapidship makes the rule."""
    return {"project": project, "repositories": repositories, "tags": tags, "disabled": False, "action": "immutable",
            "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": tags}],
            "scope_selectors": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": repositories}]}


def _selectors(items: Any) -> list[dict]:
    return [{"kind": s.get("kind", ""), "decoration": s.get("decoration", ""), "pattern": s.get("pattern", "")}
            for s in items or [] if isinstance(s, dict)]


def live_immutable_rule(project: str, rule: dict) -> dict:
    """The same fields read back: disabled, action, every selector's kind, decoration and pattern
    (a selector turned to `excludes`, or a second selector, is a difference, not "no changes")."""
    tag_selectors = _selectors(rule.get("tag_selectors"))
    scope_selectors = _selectors((rule.get("scope_selectors") or {}).get("repository"))
    return {"project": project, "repositories": (scope_selectors or [{}])[0].get("pattern", ""),
            "tags": (tag_selectors or [{}])[0].get("pattern", ""), "disabled": bool(rule.get("disabled", False)),
            "action": rule.get("action", ""), "tag_selectors": tag_selectors, "scope_selectors": scope_selectors}


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
        """What differs, one entry per field; a field holding a mapping on both sides (a
        project's metadata) is compared key by key (`metadata.prevent_vul`)."""
        before, after = self.before or {}, self.after or {}
        out: dict[str, tuple[Any, Any]] = {}
        for k in sorted(set(before) | set(after)):
            old, new = before.get(k), after.get(k)
            if old == new:
                continue
            if isinstance(old, dict) and isinstance(new, dict):
                out |= {f"{k}.{sub}": (old.get(sub), new.get(sub)) for sub in sorted(set(old) | set(new))
                        if old.get(sub) != new.get(sub)}
            else:
                out[k] = (old, new)
        return out

    def loosened(self) -> list[str]:
        """Pure: where the live object is LOOSER than the config (drift that weakens a control):
        the plan marks each loudly, apply tightens it back."""
        if self.action != "update":
            return []
        out = []
        for field, (live, wanted) in self.fields.items():
            if (isinstance(live, str) and (field, live, wanted) in _LOOSER) or (field == "disabled" and live is True) or (
                    field.endswith("_selectors") and "excludes" in json.dumps(live)):
                out.append(f"{field} is {live!r} in Harbor, {wanted!r} in the config")
            elif field == "metadata.severity" and _rank(live) > _rank(wanted):
                out.append(f"{field} is {live!r} in Harbor (blocks less), {wanted!r} in the config")
        return out

    def summary(self) -> str:
        if self.action != "update":
            return f"{self.action} {self.kind} {self.name}"
        loose = self.loosened()
        return (f"update {self.kind} {self.name}: " + "; ".join(
            f"{k} {old!r} -> {new!r}" for k, (old, new) in self.fields.items())
            + (f"  [LOOSER IN HARBOR THAN CONFIGURED: {'; '.join(loose)}]" if loose else ""))


# (field, live, wanted) that mean Harbor enforces less than the config asks
_LOOSER = {("metadata.prevent_vul", "false", "true"), ("metadata.enable_content_trust_cosign", "false", "true"),
           ("metadata.auto_scan", "false", "true"), ("metadata.public", "true", "false"),
           ("metadata.reuse_sys_cve_allowlist", "true", "false")}
_SEVERITY_ORDER = ("none", "low", "medium", "high", "critical")  # prevent_vul blocks this level and above


def _rank(severity: Any) -> int:
    return _SEVERITY_ORDER.index(severity) if severity in _SEVERITY_ORDER else len(_SEVERITY_ORDER)


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
