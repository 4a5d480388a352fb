"""The edge of deploy: write the files of a plan, checked by the rules before they are kept, and read
a site's files back for `invoke deploy-check`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import yaml

from rapidship.deploy import checks, compose, k8s
from rapidship.deploy.plan import DeployPlan
from rapidship.errors import ConfigError, GateFailure

MONITORING = Path(__file__).resolve().parents[3] / "monitoring"   # the shipped rules (docs/monitoring.md)


class _NoAliases(yaml.SafeDumper):
    """Every object written out in full: a reader (or a site's edit) sees each field where it applies."""

    def ignore_aliases(self, data) -> bool:
        return True


def _dump(docs: list[dict]) -> str:
    return yaml.dump_all(docs, Dumper=_NoAliases, sort_keys=False, default_flow_style=False)


def render(plan: DeployPlan, target: str, pull_secret: str | None = None) -> dict[str, str]:
    """Pure: file name -> text."""
    if target == "compose":
        files = {"compose.yaml": _dump([compose.stack(plan)])}
        if plan.prometheus_image:
            files["prometheus.yml"] = _dump([compose.prometheus_config(plan)])
            files["alerts.yml"] = (MONITORING / "alerts.yml").read_text()
        return files
    files = {"daskcluster.yaml": _dump(k8s.dask_cluster(plan, pull_secret)),
             "plain.yaml": _dump(k8s.plain(plan, pull_secret))}
    if plan.scheduler == "volcano":
        files["volcano-job.yaml"] = _dump(k8s.volcano_job(plan, pull_secret))
    return files


def problems_of(name: str, text: str) -> list[str]:
    if not name.endswith(".yaml"):   # prometheus.yml, alerts.yml: not deployments
        return []
    docs = [d for d in yaml.safe_load_all(text) if d]
    if name.startswith("compose") or any("services" in d for d in docs):
        return [p for d in docs for p in checks.compose_problems(d)]
    return checks.manifest_problems(docs)


def write(plan: DeployPlan, target: str, out: Path, pull_secret: str | None = None) -> list[Path]:
    files = render(plan, target, pull_secret)
    bad = [p for name, text in files.items() for p in problems_of(name, text)]
    if bad:   # our own output breaking a rule is a bug; never write it
        raise GateFailure(f"deploy {plan.variant}", "the generated files break a deploy rule:\n  " + "\n  ".join(bad))
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        (out / name).write_text(text)
        paths.append(out / name)
    (out / "deploy.json").write_text(json.dumps({"plan": dataclasses.asdict(plan), "target": target,
                                                 "files": sorted(files)}, indent=2) + "\n")
    return [*paths, out / "deploy.json"]


def check_file(path: Path) -> list[str]:
    try:
        text = path.read_text()
        docs_ok = [d for d in yaml.safe_load_all(text) if d is not None]
    except OSError as err:
        raise ConfigError(f"--file {path}", f"cannot be read: {err.strerror}", "name a Compose or Kubernetes YAML file") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"--file {path}", f"is not valid YAML: {str(err).splitlines()[0]}", "fix the YAML") from None
    if not all(isinstance(d, dict) for d in docs_ok):
        raise ConfigError(f"--file {path}", "holds a document that is not a mapping", "name a Compose or Kubernetes YAML file")
    return [f"{path}: {p}" for p in problems_of(path.name, text)]
