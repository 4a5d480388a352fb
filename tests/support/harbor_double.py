"""A Harbor stand-in on 127.0.0.1 that answers only what Harbor's official spec allows.

Harbor cannot run on these machines. This double keeps in-memory state for the resources
rapidship manages (registries, projects, immutable-tag rules, retention, robots, artifact scans)
and behaves as Harbor documents: names are unique (409), a system robot's name gets the robot
prefix, the robot secret is returned once, a retention policy binds itself to its project's
`retention_id` metadata, registry secrets are never returned. Every request is checked against
the spec (path, method, parameters, body schema) before it is served; one that fails is answered
400 and recorded in `violations`, so a test can never pass on a request Harbor would refuse.
Every response is checked against the spec's response schema too.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler

from support.loopback import LoopbackServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from support.harbor_contract import Contract

NOW = "2026-11-30T05:00:00.000Z"
REPORT_MIME = "application/vnd.security.vulnerability.report; version=1.1"


class Reply(Exception):
    def __init__(self, status: int, body: Any = None, headers: dict | None = None) -> None:
        self.status, self.body, self.headers = status, body, headers or {}


def _errors(code: str, message: str) -> dict:
    return {"errors": [{"code": code, "message": message}]}


class HarborDouble:
    def __init__(self, contract: Contract, user: str = "admin", password: str = "Harbor12345",
                 robot_prefix: str = "robot$") -> None:
        self.contract, self.user, self.password, self.prefix = contract, user, password, robot_prefix
        self.requests: list[dict] = []
        self.violations: list[str] = []
        self.registries: dict[int, dict] = {}
        self.projects: dict[int, dict] = {}
        self.rules: dict[int, dict[int, dict]] = {}
        self.retentions: dict[int, dict] = {}
        self.robots: dict[int, dict] = {}
        self.artifacts: dict[tuple[str, str, str], dict] = {}
        self.issued_secrets: list[str] = []
        self._next = 0
        self._lock = threading.Lock()
        self.server: LoopbackServer | None = None

    # ---- lifecycle ----
    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.port}"

    def start(self) -> "HarborDouble":
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _serve(self):
                double._handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

        self.server = LoopbackServer(Handler)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    # ---- test helpers ----
    def add_artifact(self, project: str, repository: str, digest: str, report: dict, outcome: str = "Success",
                     polls_until_done: int = 2) -> None:
        self.artifacts[(project, repository, digest)] = {"report": report, "outcome": outcome,
                                                         "polls": polls_until_done, "status": None}

    def _id(self) -> int:
        self._next += 1
        return self._next

    # ---- the HTTP edge ----
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        url = urlsplit(h.path)
        query = parse_qs(url.query)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else None
        headers = dict(h.headers.items())
        self.requests.append({"method": h.command, "path": url.path, "query": query, "headers": headers, "body": raw})
        op, problems = self.contract.check_request(h.command, url.path, query, headers, raw)
        try:
            if op is None:
                raise Reply(404 if "no path" in problems[0] or "outside" in problems[0] else 405,
                            _errors("NOT_FOUND", problems[0]))
            if problems:
                self.violations += problems
                raise Reply(400, _errors("BAD_REQUEST", "; ".join(problems)))
            if not self._authorized(headers):
                raise Reply(401, _errors("UNAUTHORIZED", "unauthorized"))
            body = json.loads(raw) if raw else None
            _, params, _ = self.contract.match(h.command, url.path)
            params = {k: unquote(v) for k, v in params.items()}
            with self._lock:
                handler = getattr(self, "op_" + op.op["operationId"], None)
                if handler is None:
                    raise Reply(500, _errors("NOT_IMPLEMENTED", f"the double does not serve {op.op['operationId']}"))
                result = handler(params=params, query=query, headers={k.lower(): v for k, v in headers.items()},
                                 body=body)
            reply = result if isinstance(result, Reply) else Reply(200, result)
        except Reply as r:
            reply = r
        if op is not None:
            self.violations += self.contract.check_response(op, reply.status, reply.body)
        payload = b"" if reply.body is None else json.dumps(reply.body).encode()
        h.send_response(reply.status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        for k, v in reply.headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(payload)

    def _authorized(self, headers: dict) -> bool:
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        if not auth.startswith("Basic "):
            return False
        return base64.b64decode(auth[6:]).decode() == f"{self.user}:{self.password}"

    @staticmethod
    def _page(items: list, query: dict) -> list:
        page = int((query.get("page") or ["1"])[0])
        size = int((query.get("page_size") or ["10"])[0])
        return items[(page - 1) * size: page * size]

    # ---- registries ----
    def op_listRegistries(self, query, **_):
        out = []
        for reg in self.registries.values():
            view = dict(reg)
            if "credential" in view:
                view["credential"] = dict(view["credential"], access_secret="*****")
            out.append(view)
        return self._page(out, query)

    def op_createRegistry(self, body, **_):
        if any(r["name"] == body["name"] for r in self.registries.values()):
            raise Reply(409, _errors("CONFLICT", f"registry {body['name']} exists"))
        rid = self._id()
        self.registries[rid] = dict(body, id=rid, status="healthy", creation_time=NOW, update_time=NOW)
        return Reply(201, None, {"Location": f"/api/v2.0/registries/{rid}"})

    def op_updateRegistry(self, params, body, **_):
        reg = self.registries.get(int(params["id"]))
        if reg is None:
            raise Reply(404, _errors("NOT_FOUND", "registry not found"))
        for key in ("name", "description", "url", "insecure"):
            if body.get(key) is not None:
                reg[key] = body[key]
        if body.get("access_key") is not None:
            reg["credential"] = {"type": body.get("credential_type") or "basic", "access_key": body["access_key"],
                                 "access_secret": body.get("access_secret") or reg.get("credential", {}).get("access_secret", "")}
        return None

    # ---- projects ----
    def _project(self, name_or_id: str, headers: dict) -> dict:
        by_name = headers.get("x-is-resource-name") == "true" or not name_or_id.isdigit()
        for p in self.projects.values():
            if (p["name"] == name_or_id) if by_name else (p["project_id"] == int(name_or_id)):
                return p
        raise Reply(404, _errors("NOT_FOUND", f"project {name_or_id} not found"))

    def op_getProject(self, params, headers, **_):
        return self._project(params["project_name_or_id"], headers)

    def op_createProject(self, body, **_):
        name = body["project_name"]
        if any(p["name"] == name for p in self.projects.values()):
            raise Reply(409, _errors("CONFLICT", f"project {name} exists"))
        reg_id = body.get("registry_id")
        if reg_id and reg_id not in self.registries:
            raise Reply(400, _errors("BAD_REQUEST", f"registry {reg_id} not found"))
        pid = self._id()
        meta = {"public": "false"} | (body.get("metadata") or {})
        project = {"project_id": pid, "name": name, "owner_id": 1, "owner_name": "admin", "repo_count": 0,
                   "creation_time": NOW, "update_time": NOW, "metadata": meta,
                   "cve_allowlist": self._allowlist(pid, body.get("cve_allowlist"))}
        if reg_id:
            project["registry_id"] = reg_id
        self.projects[pid] = project
        self.rules[pid] = {}
        return Reply(201, None, {"Location": f"/api/v2.0/projects/{pid}"})

    @staticmethod
    def _allowlist(pid: int, allow: dict | None) -> dict:
        allow = allow or {}
        out = {"id": pid, "project_id": pid, "items": [{"cve_id": i["cve_id"]} for i in allow.get("items") or []],
               "creation_time": NOW, "update_time": NOW}
        if allow.get("expires_at") is not None:
            out["expires_at"] = allow["expires_at"]
        return out

    def op_updateProject(self, params, headers, body, **_):
        project = self._project(params["project_name_or_id"], headers)
        if body.get("metadata"):
            project["metadata"] = project["metadata"] | body["metadata"]
        if body.get("cve_allowlist") is not None:
            project["cve_allowlist"] = self._allowlist(project["project_id"], body["cve_allowlist"])
        return None

    # ---- immutable tag rules ----
    def op_ListImmuRules(self, params, headers, query, **_):
        project = self._project(params["project_name_or_id"], headers)
        return self._page(list(self.rules[project["project_id"]].values()), query)

    def op_CreateImmuRule(self, params, headers, body, **_):
        project = self._project(params["project_name_or_id"], headers)
        rid = self._id()
        self.rules[project["project_id"]][rid] = dict(body, id=rid, priority=0)
        return Reply(201, None, {"Location": f"/api/v2.0/projects/{project['project_id']}/immutabletagrules/{rid}"})

    def op_UpdateImmuRule(self, params, headers, body, **_):
        project = self._project(params["project_name_or_id"], headers)
        rid = int(params["immutable_rule_id"])
        if rid not in self.rules[project["project_id"]]:
            raise Reply(404, _errors("NOT_FOUND", "rule not found"))
        self.rules[project["project_id"]][rid] = dict(body, id=rid, priority=0)
        return None

    def op_DeleteImmuRule(self, params, headers, **_):
        project = self._project(params["project_name_or_id"], headers)
        if self.rules[project["project_id"]].pop(int(params["immutable_rule_id"]), None) is None:
            raise Reply(404, _errors("NOT_FOUND", "rule not found"))
        return None

    # ---- retention ----
    def op_createRetention(self, body, **_):
        pid = (body.get("scope") or {}).get("ref")
        if pid not in self.projects:
            raise Reply(400, _errors("BAD_REQUEST", "scope.ref is not a project"))
        if self.projects[pid]["metadata"].get("retention_id"):
            raise Reply(400, _errors("BAD_REQUEST", "project already has a retention policy"))
        rid = self._id()
        self.retentions[rid] = dict(body, id=rid)
        self.projects[pid]["metadata"]["retention_id"] = str(rid)
        return Reply(201, None, {"Location": f"/api/v2.0/retentions/{rid}"})

    def op_getRetention(self, params, **_):
        if int(params["id"]) not in self.retentions:
            raise Reply(500, _errors("INTERNAL", "no such policy"))  # what Harbor answers; 404 is not in the spec
        return self.retentions[int(params["id"])]

    def op_updateRetention(self, params, body, **_):
        rid = int(params["id"])
        if rid not in self.retentions:
            raise Reply(500, _errors("INTERNAL", "no such policy"))
        self.retentions[rid] = dict(body, id=rid)
        return None

    # ---- robots ----
    def op_ListRobot(self, query, **_):
        q = (query.get("q") or [""])[0]
        items = [r for r in self.robots.values() if q != "Level=system" or r["level"] == "system"]
        return self._page([{k: v for k, v in r.items() if k != "secret"} for r in items], query)

    def op_CreateRobot(self, body, **_):
        if body.get("level") != "system":
            raise Reply(400, _errors("BAD_REQUEST", "the double serves system robots only"))
        name = self.prefix + body["name"]
        if any(r["name"] == name for r in self.robots.values()):
            raise Reply(400, _errors("CONFLICT", f"robot {name} exists"))  # the spec lists no 409 here
        rid, secret = self._id(), secrets.token_urlsafe(24)
        self.issued_secrets.append(secret)
        self.robots[rid] = {"id": rid, "name": name, "description": body.get("description", ""), "secret": secret,
                            "level": "system", "duration": body["duration"], "editable": True,
                            "disable": bool(body.get("disable", False)), "expires_at": 1800000000,
                            "permissions": body.get("permissions") or [], "creator_type": "local", "creator_ref": 1,
                            "creation_time": NOW, "update_time": NOW}
        return Reply(201, {"id": rid, "name": name, "secret": secret, "creation_time": NOW, "expires_at": 1800000000},
                     {"Location": f"/api/v2.0/robots/{rid}"})

    def op_UpdateRobot(self, params, body, **_):
        robot = self.robots.get(int(params["robot_id"]))
        if robot is None:
            raise Reply(404, _errors("NOT_FOUND", "robot not found"))
        if body.get("name") != robot["name"] or body.get("level") != robot["level"]:
            raise Reply(400, _errors("BAD_REQUEST", "name and level of a robot cannot change"))
        for key in ("description", "duration", "disable", "permissions"):
            if key in body:
                robot[key] = body[key]
        return None

    # ---- artifacts and scans ----
    def _artifact(self, params) -> tuple[tuple, dict]:
        key = (params["project_name"], unquote(params["repository_name"]), params["reference"])
        if key not in self.artifacts:
            raise Reply(404, _errors("NOT_FOUND", f"artifact {key} not found"))
        return key, self.artifacts[key]

    def op_scanArtifact(self, params, **_):
        _, art = self._artifact(params)
        art["status"] = "Running"
        return Reply(202, None)

    def op_getArtifact(self, params, query, **_):
        (project, repo, digest), art = self._artifact(params)
        out = {"id": 1, "type": "IMAGE", "digest": digest, "repository_name": f"{project}/{repo}",
               "media_type": "application/vnd.oci.image.index.v1+json", "push_time": NOW}
        if art["status"] == "Running":
            art["polls"] -= 1
            if art["polls"] <= 0:
                art["status"] = art["outcome"]
        if (query.get("with_scan_overview") or ["false"])[0] == "true" and art["status"]:
            out["scan_overview"] = {REPORT_MIME: {"report_id": "r1", "scan_status": art["status"], "severity": "High",
                                                  "complete_percent": 100 if art["status"] != "Running" else 50}}
        return out

    def op_getVulnerabilitiesAddition(self, params, **_):
        _, art = self._artifact(params)
        if art["status"] != "Success":
            raise Reply(404, _errors("NOT_FOUND", "no report"))
        # The spec types this body as a string: serve the report JSON-encoded as one.
        return json.dumps({REPORT_MIME: art["report"]})
