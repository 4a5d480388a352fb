"""Harbor's official swagger 2.0 spec as an executable contract for requests and responses.

Why our own small validator over jsonschema instead of openapi-core: openapi-core validates
OpenAPI 3.x only, and Harbor publishes swagger 2.0; converting 10,000 lines of spec with a
second tool would put an unverified translation between us and the contract. Swagger 2.0 body
schemas are JSON Schema draft 4 plus a few `x-` extensions, so jsonschema's Draft4Validator
checks bodies directly once two extensions are read the way Harbor's server (go-swagger) reads
them:
  - `x-nullable: true` allows null;
  - a bare `type: object` (no properties) is go-swagger's `interface{}`: any JSON value
    (Harbor sends retention params like {"latestPushedK": 10} through such a field).
Stricter than the spec on purpose: a body property that the schema does not define is an error
(the spec leaves additionalProperties open, so a typo like `prevent_vulnerable` would pass it
silently and Harbor would ignore the setting). Paths, methods, path/query/header parameter
types, required parameters, `maximum` and enums are checked; unknown query parameters fail.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SPEC = Path(__file__).resolve().parents[1] / "contracts" / "harbor-swagger.yaml"


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    regex: re.Pattern
    op: dict
    params: tuple[dict, ...]


def _convert(schema: Any, strict: bool) -> Any:
    if isinstance(schema, list):
        return [_convert(s, strict) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return {"$ref": schema["$ref"]}
    out = {k: _convert(v, strict) for k, v in schema.items()
           if not k.startswith("x-") and k not in ("example", "description", "format", "title", "properties")}
    if "properties" in schema:  # property names are data, not keywords: convert each value only
        out["properties"] = {name: _convert(sub, strict) for name, sub in schema["properties"].items()}
    if schema.get("type") == "object" and not schema.get("properties") and "additionalProperties" not in schema:
        return {}
    if strict and schema.get("type") == "object" and schema.get("properties") and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    if schema.get("x-nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


class Contract:
    def __init__(self, path: Path = SPEC) -> None:
        self.spec = yaml.safe_load(path.read_text())
        self.base = self.spec["basePath"]
        self.defs_strict = {k: _convert(v, True) for k, v in self.spec["definitions"].items()}
        self.defs_loose = {k: _convert(v, False) for k, v in self.spec["definitions"].items()}
        self.ops: list[Operation] = []
        for template, item in self.spec["paths"].items():
            shared = item.get("parameters", [])
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "([^/]+)", re.escape(template)) + "$"
            names = re.findall(r"\{([^}]+)\}", template)
            for method, op in item.items():
                if method == "parameters":
                    continue
                params = tuple(self._param(p) for p in shared + op.get("parameters", []))
                self.ops.append(Operation(method.upper(), template, re.compile(pattern), op, params))
                assert all(any(p["name"] == n and p["in"] == "path" for p in params) for n in names), template

    def _param(self, p: dict) -> dict:
        return self.spec["parameters"][p["$ref"].split("/")[-1]] if "$ref" in p else p

    def _validator(self, schema: dict, strict: bool) -> jsonschema.Draft4Validator:
        root = _convert(copy.deepcopy(schema), strict)
        root["definitions"] = self.defs_strict if strict else self.defs_loose
        return jsonschema.Draft4Validator(root)

    def match(self, method: str, path: str) -> tuple[Operation | None, dict[str, str], str]:
        if not path.startswith(self.base + "/"):
            return None, {}, f"path {path} is outside {self.base}"
        rel = path[len(self.base):]
        # Literal segments beat parameters (/projects/x/_deletable before /projects/{id}/...).
        candidates = sorted((o for o in self.ops if o.regex.match(rel)), key=lambda o: o.template.count("{"))
        if not candidates:
            return None, {}, f"no path in the spec matches {rel}"
        for op in candidates:
            if op.method == method:
                names = re.findall(r"\{([^}]+)\}", op.template)
                return op, dict(zip(names, op.regex.match(rel).groups())), ""
        return None, {}, f"{method} is not allowed on {candidates[0].template}"

    def check_request(self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str],
                      body: bytes | None) -> tuple[Operation | None, list[str]]:
        op, path_params, problem = self.match(method, path)
        if op is None:
            return None, [problem]
        errors: list[str] = []
        lower = {k.lower(): v for k, v in headers.items()}
        known_query = {p["name"] for p in op.params if p["in"] == "query"}
        for name in query:
            if name not in known_query:
                errors.append(f"{op.method} {op.template}: query parameter {name!r} is not in the spec")
        body_param = None
        for p in op.params:
            where = p["in"]
            if where == "body":
                body_param = p
                continue
            if where == "path":
                value = path_params.get(p["name"])
            elif where == "query":
                value = (query.get(p["name"]) or [None])[0]
            elif where == "header":
                value = lower.get(p["name"].lower())
            else:
                continue
            if value is None:
                if p.get("required"):
                    errors.append(f"{op.method} {op.template}: required {where} parameter {p['name']!r} missing")
                continue
            errors += [f"{op.method} {op.template}: {where} parameter {p['name']!r}: {e}" for e in _scalar(p, value)]
        if body_param is None:
            if body:
                errors.append(f"{op.method} {op.template}: the spec takes no body")
        elif body:
            try:
                doc = json.loads(body)
            except ValueError:
                errors.append(f"{op.method} {op.template}: body is not JSON")
            else:
                for e in self._validator(body_param["schema"], strict=True).iter_errors(doc):
                    at = "/".join(str(x) for x in e.absolute_path) or "(body)"
                    errors.append(f"{op.method} {op.template}: body {at}: {e.message}")
        elif body_param.get("required"):
            errors.append(f"{op.method} {op.template}: required body missing")
        return op, errors

    def check_response(self, op: Operation, status: int, body: Any) -> list[str]:
        responses = op.op["responses"]
        resp = responses.get(str(status))
        if resp is None:
            return [f"{op.method} {op.template}: status {status} is not a documented response"]
        if "$ref" in resp:
            resp = self.spec["responses"][resp["$ref"].split("/")[-1]]
        schema = resp.get("schema")
        if schema is None:
            return [] if body is None else [f"{op.method} {op.template}: {status} has no body in the spec"]
        return [f"{op.method} {op.template} -> {status}: {e.message}"
                for e in self._validator(schema, strict=False).iter_errors(body)]


def _scalar(p: dict, value: str) -> list[str]:
    kind = p.get("type")
    if kind == "integer":
        if not re.fullmatch(r"-?\d+", value):
            return [f"{value!r} is not an integer"]
        if "maximum" in p and int(value) > p["maximum"]:
            return [f"{value} is above the maximum {p['maximum']}"]
    if kind == "boolean" and value not in ("true", "false"):
        return [f"{value!r} is not true/false"]
    if "enum" in p and value not in p["enum"]:
        return [f"{value!r} is not one of {p['enum']}"]
    if p.get("minLength") and len(value) < p["minLength"]:
        return ["too short"]
    return []
