"""harbor/*.yaml -> HarborConfig: the Harbor instance we want, as typed, validated records.

Three files: harbor.yaml (instance URL, upstream registry endpoints), projects.yaml (projects,
proxy caches, vulnerability policy, cosign enforcement, CVE allowlist, immutable tags, retention)
and robots.yaml (robot accounts and their permissions). Every mistake is ONE ConfigError naming the
file and the yaml path. Least privilege is checked here, not left to review: no wildcard access,
no robot without an expiry, nothing but pulls on proxy-cache projects.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rapidship.errors import ConfigError
from rapidship.config.yamlconf import StrictConfig, parse_model

DEFAULT_DIR = Path("harbor")
SEVERITIES = ("none", "low", "medium", "high", "critical")
# Harbor's RBAC (src/common/rbac/const.go): the resource:action pairs a robot may be given here.
# Deliberately short: what image CI, promotion and runtime pulls need, nothing administrative.
ROBOT_ACCESS = frozenset({
    "repository:pull", "repository:push", "repository:list",
    "artifact:read", "artifact:list", "artifact:create",
    "tag:create", "tag:list",
    "scan:create", "scan:read", "scan:stop",
    "artifact-addition:read",
})
PULL_ONLY = frozenset({"repository:pull", "repository:list", "artifact:read", "artifact:list", "tag:list",
                       "artifact-addition:read", "scan:read"})
RETENTION_TEMPLATES = {"latestPushedK": "count", "latestPulledN": "count",
                       "nDaysSinceLastPush": "days", "nDaysSinceLastPull": "days"}
_CVE_RE = re.compile(r"^(CVE-\d{4}-\d{4,}|GHSA(-[23456789cfghjmpqrvwx]{4}){3})$")
_NAME_RE = r"^[a-z0-9][a-z0-9._-]{0,254}$"
# Harbor's five-field-plus-seconds cron: "sec min hour day month weekday".
# Harbor's schedules are six-field crons (robfig/cron with seconds): each field a value, `*`, a
# range a-b, a step */n or a-b/n, or a list of those; names for months and weekdays; `?` for either day
_CRON_FIELDS = (("second", 0, 59, ()), ("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()),
                ("month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")),
                ("day of week", 0, 6, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")))


def cron_problem(value: str) -> str | None:
    """None for a six-field cron Harbor accepts, else what is wrong with it."""
    fields = value.split()
    if len(fields) != 6:
        return f"has {len(fields)} fields, not six (sec min hour day month weekday)"
    for text, (what, low, high, names) in zip(fields, _CRON_FIELDS):
        def number(token: str) -> int | None:
            if token.upper() in names:
                return names.index(token.upper()) + low
            return int(token) if token.isdigit() else None

        for part in text.split(","):
            base, _, step = part.partition("/")
            if step and (not step.isdigit() or int(step) == 0):
                return f"{what} {text!r}: the step after / must be a whole number above 0"
            if base in ("*", "?") and (base == "*" or what.startswith("day")):
                continue
            first, _, last = base.partition("-")
            bounds = [number(first), number(last) if last else number(first)]
            if None in bounds or not all(low <= b <= high for b in bounds) or bounds[0] > bounds[1]:
                return f"{what} {text!r}: not a value, range or list within {low}-{high}"
    return None




class Credential(StrictConfig):
    access_key: str = Field(min_length=1)
    # The secret lives in the environment, never in the repository.
    secret_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]*$")


class RegistryEndpoint(StrictConfig):
    type: Literal["docker-hub", "docker-registry", "harbor", "quay", "github-ghcr", "gitlab", "jfrog-artifactory"]
    url: str = Field(pattern=r"^https://[^\s/]+(/\S*)?$")
    description: str = ""
    insecure: bool = False
    credential: Credential | None = None


class Instance(StrictConfig):
    url: str = Field(pattern=r"^https?://[^\s/]+$")
    robot_prefix: str = "robot$"
    registries: dict[str, RegistryEndpoint] = {}

    @property
    def host(self) -> str:
        return self.url.split("://", 1)[1]


class CveAllowlist(StrictConfig):
    expires: dt.date
    items: tuple[str, ...] = Field(min_length=1)

    @field_validator("expires", mode="before")
    @classmethod
    def _date(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value)
            except ValueError:
                raise ValueError(f"{value!r} is not a date like 2027-05-31") from None
        return value

    @field_validator("items", mode="before")
    @classmethod
    def _items(cls, value: Any) -> Any:
        if isinstance(value, list):
            for item in value:
                if not isinstance(item, str) or not _CVE_RE.match(item):
                    raise ValueError(f"{item!r} is not a CVE id like CVE-2024-12345")
            if len(set(value)) != len(value):
                raise ValueError("an id is listed twice")
            return tuple(value)
        return value

    @property
    def expires_at(self) -> int:
        """Seconds since the epoch at 00:00 UTC of the expiry date, as Harbor stores it."""
        return int(dt.datetime.combine(self.expires, dt.time(), dt.timezone.utc).timestamp())


class VulnerabilityPolicy(StrictConfig):
    severity: Literal["none", "low", "medium", "high", "critical"]


class ImmutableTagRule(StrictConfig):
    repositories: str = "**"
    tags: str = Field(min_length=1)


class RetentionRule(StrictConfig):
    template: Literal["latestPushedK", "latestPulledN", "nDaysSinceLastPush", "nDaysSinceLastPull"]
    value: int = Field(gt=0, le=10000)
    repositories: str = "**"
    tags: str = "**"
    untagged: bool = True


class Retention(StrictConfig):
    schedule: str
    rules: tuple[RetentionRule, ...] = Field(min_length=1, max_length=15)

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        problem = cron_problem(value)
        if problem:
            raise ValueError(f"{value!r} is not a six-field cron: {problem}; e.g. '0 0 3 * * 0' (Sundays 03:00)")
        return value

    @field_validator("rules", mode="before")
    @classmethod
    def _tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value


class Project(StrictConfig):
    public: bool = False
    auto_scan: bool = True
    proxy_cache: str | None = None  # name of a registry endpoint in harbor.yaml
    prevent_vul: VulnerabilityPolicy | None = None
    # Harbor's cosign content trust (metadata enable_content_trust_cosign): pulls of an artifact
    # without a cosign signature are refused. Harbor checks that a signature is attached, not whose
    # key made it: `invoke verify` / promote check the key.
    require_cosign: bool = False
    cve_allowlist: CveAllowlist | None = None
    immutable_tags: tuple[ImmutableTagRule, ...] = ()
    retention: Retention | None = None

    @field_validator("immutable_tags", mode="before")
    @classmethod
    def _tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value


class ProjectsFile(StrictConfig):
    projects: dict[str, Project] = Field(min_length=1)


class Robot(StrictConfig):
    description: str = Field(min_length=1)
    duration_days: int = Field(gt=0, le=3650)  # -1 ("never expires") is refused: robots must rotate
    # project name -> ["resource:action", ...]
    permissions: dict[str, tuple[str, ...]] = Field(min_length=1)

    @field_validator("permissions", mode="before")
    @classmethod
    def _tuples(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
        return value


class RobotsFile(StrictConfig):
    robots: dict[str, Robot] = {}


class HarborConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    source: str
    instance: Instance
    projects: dict[str, Project]
    robots: dict[str, Robot]

    def robot_name(self, key: str) -> str:
        """The name Harbor shows for a system-level robot: prefix + key."""
        return f"{self.instance.robot_prefix}{key}"


def load_harbor(directory: Path | str = DEFAULT_DIR, today: dt.date | None = None) -> HarborConfig:
    directory = Path(directory)
    docs = {}
    for name in ("harbor.yaml", "projects.yaml", "robots.yaml"):
        path = directory / name
        try:
            docs[name] = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(str(path), "file not found", "run from the project root or pass --config DIR") from None
    return parse_harbor(docs, str(directory), today)


def parse_harbor(texts: dict[str, str], directory: str = "harbor", today: dt.date | None = None) -> HarborConfig:
    """Pure core: the three yaml texts -> HarborConfig, or one ConfigError."""
    instance = _model(Instance, texts["harbor.yaml"], f"{directory}/harbor.yaml")
    projects = _model(ProjectsFile, texts["projects.yaml"], f"{directory}/projects.yaml").projects
    robots = _model(RobotsFile, texts["robots.yaml"], f"{directory}/robots.yaml").robots
    _check(instance, projects, robots, directory, today or dt.date.today())
    return HarborConfig(source=directory, instance=instance, projects=projects, robots=robots)


def _check(instance: Instance, projects: dict[str, Project], robots: dict[str, Robot], directory: str,
           today: dt.date) -> None:
    pfile, rfile = f"{directory}/projects.yaml", f"{directory}/robots.yaml"
    for name, project in projects.items():
        where = f"{pfile}: projects.{name}"
        if not re.match(_NAME_RE, name):
            raise ConfigError(where, f"{name!r} is not a Harbor project name", "use lower case letters, digits, . _ -")
        if project.proxy_cache is not None:
            if project.proxy_cache not in instance.registries:
                raise ConfigError(f"{where}.proxy_cache", f"no registry endpoint named {project.proxy_cache!r}",
                                  f"add it under registries: in {directory}/harbor.yaml "
                                  f"(known: {', '.join(instance.registries) or 'none'})")
            if project.immutable_tags or project.retention is not None:
                raise ConfigError(where, "a proxy-cache project mirrors upstream tags; immutable tags and "
                                  "retention rules belong to projects we push to", "remove them here")
            if project.require_cosign:
                raise ConfigError(f"{where}.require_cosign", "a proxy-cache project serves upstream images as "
                                  "they are, with no signature of ours: Harbor would refuse every pull",
                                  "require cosign signatures on the projects we push signed images to (release)")
        if project.cve_allowlist and project.cve_allowlist.expires <= today:
            raise ConfigError(f"{where}.cve_allowlist.expires", f"the allowlist expired on {project.cve_allowlist.expires}",
                              "review each CVE: fix the image or renew the exception with a new date")
    for key, robot in robots.items():
        where = f"{rfile}: robots.{key}"
        if not re.match(r"^[a-z0-9][a-z0-9_-]{0,63}$", key):
            raise ConfigError(where, f"{key!r} is not a robot name", "use lower case letters, digits, _ -")
        for namespace, grants in robot.permissions.items():
            if namespace not in projects:
                raise ConfigError(f"{where}.permissions.{namespace}", f"no project named {namespace!r}",
                                  f"use one of: {', '.join(projects)}")
            for i, grant in enumerate(grants):
                at = f"{where}.permissions.{namespace}[{i}]"
                if "*" in grant:
                    raise ConfigError(at, f"wildcard access {grant!r} is not least privilege",
                                      "name each resource:action the robot needs")
                if grant not in ROBOT_ACCESS:
                    raise ConfigError(at, f"{grant!r} is not an allowed resource:action",
                                      f"use one of: {', '.join(sorted(ROBOT_ACCESS))}")
            if len(set(grants)) != len(grants):
                raise ConfigError(f"{where}.permissions.{namespace}", "a grant is listed twice", "list each once")
            if projects[namespace].proxy_cache and not set(grants) <= PULL_ONLY:
                raise ConfigError(f"{where}.permissions.{namespace}", "a proxy-cache project can only be read",
                                  "grant repository:pull there, nothing that writes")


def _model(model: type[BaseModel], text: str, source: str) -> Any:
    return parse_model(model, text, source, "docs/harbor.md")
