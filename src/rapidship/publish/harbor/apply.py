"""Read Harbor's live state through the client, plan the changes against harbor/, apply them."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


from rapidship.errors import ConfigError
from rapidship.publish.harbor.config import HarborConfig
from rapidship.publish.harbor.reconcile import Change, Key, State, _rule_name, desired_state, diff, live_immutable_rule, live_project, live_registry, live_retention, live_robot, payload_immutable_rule, payload_project, payload_registry, payload_registry_update, payload_retention, payload_robot
from rapidship.publish.harbor.client import HarborClient


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
        elif c.action == "update":  # drift in place (disabled, a selector changed): put the rule back whole
            client.update_immutable_rule(c.after["project"], c.ref, payload_immutable_rule(c.after) | {"id": c.ref})
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
            "fields": {k: {"live": old, "wanted": new} for k, (old, new) in c.fields.items()},
            "loosened": c.loosened()}
