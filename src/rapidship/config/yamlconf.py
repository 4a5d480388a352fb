"""YAML configuration files -> pydantic records, or ONE ConfigError naming file, yaml path and fix.

Shared by variants.yaml (matrix), policy/trivy.yaml (gates.policy) and harbor/ (harbor_config).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from rapidship.errors import ConfigError


class StrictConfig(BaseModel):
    """A config document's model: unknown keys are errors, values keep the type YAML gave them
    (YAML's `python: 3.10` is the float 3.1, so versions must be quoted strings), frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class LaxConfig(BaseModel):
    """Like StrictConfig, but values convert where YAML's types and ours differ (a date, a
    severity name): for files whose values are not versions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

M = TypeVar("M", bound=BaseModel)


MAX_CONFIG_BYTES = 1 << 20  # a configuration file; anything bigger is not one
MAX_ALIASES = 64            # YAML aliases multiply what they point at: bound them (alias bombs)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys silently; a repeated id is a bug to report. Aliases
    are counted: a handful is a convenience, thousands are an alias bomb."""

    aliases = 0

    def compose_node(self, parent, index):  # noqa: D401 - PyYAML hook
        if self.check_event(yaml.events.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _TooManyAliases(self.peek_event().start_mark.line + 1)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):  # noqa: D401 - PyYAML hook
        # Merge keys (`<<: *base`, `<<: [*a, *b]`) are ordinary YAML, read as the merge spec says: a
        # key written in this mapping overrides a merged one, an earlier merged mapping a later one
        # (PyYAML's flattening puts them in that order, last wins). Only a key written twice in the
        # mapping itself is refused.
        if isinstance(node, yaml.MappingNode):
            direct = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
            self.flatten_mapping(node)
            merged = len(node.value) - direct
        else:
            merged = 0
        seen: dict = {}
        for i, (key_node, _) in enumerate(node.value):
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
                seen.setdefault(key, (key_node.start_mark.line + 1, i < merged))
            except TypeError:
                raise yaml.constructor.ConstructorError(None, None, "a mapping key must be a plain value",
                                                        key_node.start_mark) from None
            if first is not None and not first[1] and i >= merged:
                raise _DuplicateKey(key, key_node.start_mark.line + 1, first[0])
            if first is not None:   # merged, then merged again or written here: the later one wins
                seen[key] = (key_node.start_mark.line + 1, i < merged)
        return super().construct_mapping(node, deep)


class _TooManyAliases(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int, first_line: int = 0) -> None:
        self.key, self.line, self.first_line = key, line, first_line


def read_config(path: Path, missing_fix: str) -> str:
    """The text of a configuration file, or one ConfigError saying what to do."""
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(str(path), f"is {path.stat().st_size:,} bytes, more than a configuration file "
                              f"may be ({MAX_CONFIG_BYTES:,})", "check that this is the right file")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "file not found", missing_fix) from None
    except UnicodeDecodeError as err:
        raise ConfigError(str(path), f"is not UTF-8 text ({err.reason} at byte {err.start}): a binary file, or "
                          "another encoding", "pass the YAML file itself, saved as UTF-8") from None
    except OSError as err:
        raise ConfigError(str(path), f"cannot be read ({err.strerror or err.__class__.__name__})",
                          "check the file and its permissions") from None


def load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except _TooManyAliases as many:
        raise ConfigError(f"{source} line {many.line}", f"more than {MAX_ALIASES} YAML aliases (*name)",
                          "write the values out; so many aliases multiply the document (an alias bomb?)") from None
    except _DuplicateKey as dup:
        raise ConfigError(f"{source} line {dup.line}", f"duplicate key {dup.key!r} (first at line {dup.first_line})",
                          "each key may appear once: merge the two entries") from None
    except ValueError:  # PyYAML builds dates itself: 2027-13-45 raises from datetime
        raise unbuildable_value(text, source) from None
    except RecursionError:
        raise ConfigError(source, "nested too deeply to be a configuration file", "flatten the document") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{source} line {mark.line + 1}" if mark else source
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(where, f"not valid YAML: {problem}", "fix the syntax at that line") from None


def unbuildable_value(text: str, source: str) -> ConfigError:
    """The scalar PyYAML recognised by its form but could not build (a date like 2027-13-45, an
    `!!int` that is no number), as a ConfigError naming its yaml path and line."""
    def walk(node: Any, path: tuple, seen: set[int]):
        if id(node) in seen:  # anchors and aliases may share nodes
            return None
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            try:
                yaml.SafeLoader("").construct_object(node)
            except ValueError as err:
                return node, path, str(err)
            return None
        if isinstance(node, yaml.SequenceNode):
            children = ((i, child) for i, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            children = ((key.value if isinstance(key, yaml.ScalarNode) else "?", child)
                        for key, value in node.value for child in (key, value))
        else:
            return None
        for part, child in children:
            if found := walk(child, (*path, part), seen):
                return found
        return None

    found = walk(yaml.compose(text, Loader=yaml.SafeLoader), (), set())
    if found is None:
        return ConfigError(source, "a value cannot be read", "check the file's dates (YYYY-MM-DD) and numbers")
    node, path, why = found
    where = f"{source}: {yaml_path(path)} (line {node.start_mark.line + 1})"
    if node.tag.endswith(":timestamp"):
        return ConfigError(where, f"{node.value!r} is not a date ({why})",
                           "write dates as YYYY-MM-DD, a real calendar day (e.g. expires: 2027-03-31)")
    return ConfigError(where, f"{node.value!r} cannot be read as {node.tag.rsplit(':', 1)[-1]} ({why})",
                       "correct the value")


def yaml_path(loc: tuple | list) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validation_error(source: str, err: ValidationError, docs: str, enums: tuple[type[Enum], ...] = ()) -> ConfigError:
    """The first problem pydantic found, as a sentence. `docs` names where the layout is described."""
    errors = err.errors()
    # A misspelt key also makes the right one "missing": name the misspelling.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [p for p in first["loc"] if not (isinstance(p, str) and ("function-" in p or p.startswith("literal[")))]
    where = f"{source}: {yaml_path(loc)}"
    kind, value = first["type"], first.get("input")
    if kind == "extra_forbidden":
        return ConfigError(where, f"unknown key {loc[-1]!r}", f"remove it or correct its spelling (see {docs})")
    if kind == "missing":
        return ConfigError(where, "required key is missing", f"add `{loc[-1]}:` there")
    if kind in ("string_type", "int_type", "dict_type", "list_type", "tuple_type", "model_type", "bool_type"):
        hint = " (quote versions: YAML reads 3.10 as the number 3.1)" if kind == "string_type" else ""
        want = kind.split("_")[0].replace("model", "mapping").replace("dict", "mapping")
        return ConfigError(where, f"expected a {want}, got {_short(value)}{hint}", f"write a {want} there")
    if kind == "is_instance_of":  # strict enums: a string that is not a member
        enum = next((e for e in enums if e.__name__ == first.get("ctx", {}).get("class")), None)
        allowed = ", ".join(m.value for m in enum) if enum else first["msg"]
        return ConfigError(where, f"{_short(value)} is not one of {allowed}", "use one of the allowed values")
    if kind in ("enum", "literal_error"):
        return ConfigError(where, f"{_short(value)} is not one of {first.get('ctx', {}).get('expected', '')}",
                           "use one of the allowed values")
    return ConfigError(where, first["msg"].removeprefix("Value error, "), "correct the value")


def _short(value: Any, limit: int = 80) -> str:
    """A value as an error message may quote it: one line, bounded."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text):,} characters)"


def parse_model(model: type[M], text: str, source: str, docs: str, enums: tuple[type[Enum], ...] = ()) -> M:
    """YAML text -> a validated record; an empty file is an empty mapping."""
    doc = load_yaml(text, source)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(source, "top level must be a mapping", f"see {docs} for the layout")
    try:
        return model.model_validate(doc)
    except ValidationError as err:
        raise validation_error(source, err, docs, enums) from None
