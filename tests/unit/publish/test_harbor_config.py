"""harbor/*.yaml: the shipped configuration is least-privilege, and every mistake is one ConfigError."""

from __future__ import annotations

import datetime as dt

import pytest

from support.commands import ROOT  # noqa: E402

from rapidship.errors import ConfigError  # noqa: E402
from rapidship.publish.harbor.config import PULL_ONLY, load_harbor, parse_harbor  # noqa: E402

TODAY = dt.date(2026, 11, 30)


def texts() -> dict[str, str]:
    return {n: (ROOT / "harbor" / n).read_text() for n in ("harbor.yaml", "projects.yaml", "robots.yaml")}


def test_shipped_config_is_least_privilege():
    cfg = load_harbor(ROOT / "harbor", today=TODAY)
    assert {"staging", "release", "nvcr", "dockerhub", "kylin"} <= set(cfg.projects)
    assert {cfg.projects[p].proxy_cache for p in ("nvcr", "dockerhub", "kylin")} == {"nvcr", "dockerhub", "kylin"}
    assert set(cfg.instance.registries) == {"nvcr", "dockerhub", "kylin"}
    ci, promote, runtime = (cfg.robots[k].permissions for k in ("ci", "promote", "runtime"))
    assert "repository:push" in ci["staging"] and "release" not in ci        # CI pushes to staging only
    assert "repository:push" in promote["release"] and set(promote["staging"]) <= PULL_ONLY
    assert set(runtime) == {"release"} and set(runtime["release"]) == {"repository:pull"}  # runtime pulls only
    release = cfg.projects["release"]
    assert release.prevent_vul.severity == "high" and release.immutable_tags and release.retention
    assert release.cve_allowlist.expires > TODAY
    # release serves only signed digests; staging must take the unsigned candidates CI pulls back
    assert release.require_cosign is True
    assert not any(p.require_cosign for name, p in cfg.projects.items() if name != "release")


@pytest.mark.parametrize("file,old,new,where,problem", [
    ("robots.yaml", "[repository:pull]\n  promote", "[repository:push]\n  promote", "permissions.kylin",
     "proxy-cache project can only be read"),
    ("robots.yaml", "release: [repository:pull]", "release: [repository:*]", "permissions.release[0]", "wildcard"),
    ("robots.yaml", "release: [repository:pull]", "release: [project:delete]", "permissions.release[0]",
     "not an allowed resource:action"),
    ("robots.yaml", "release: [repository:pull]", "relaese: [repository:pull]", "permissions.relaese",
     "no project named"),
    ("robots.yaml", "duration_days: 365", "duration_days: -1", "robots.runtime.duration_days", "greater than 0"),
    ("projects.yaml", "expires: 2027-05-31", "expires: 2026-01-01", "cve_allowlist.expires", "expired"),
    ("projects.yaml", "- CVE-2023-45853", "- CVE-23-1", "cve_allowlist.items", "not a CVE id"),
    ("projects.yaml", "{severity: high}", "{severity: severe}", "prevent_vul.severity", "is not one of"),
    ("projects.yaml", "proxy_cache: kylin", "proxy_cache: kylinos", "projects.kylin.proxy_cache",
     "no registry endpoint named"),
    ("projects.yaml", "auto_scan: true\n    prevent_vul: {severity: high}",
     "auto_scan: true\n    prevent_vulnerable: true", "projects.release.prevent_vulnerable", "unknown key"),
    ("projects.yaml", 'schedule: "0 0 3 * * 0"', 'schedule: "weekly"', "retention.schedule", "six-field cron"),
    ("projects.yaml", 'schedule: "0 0 3 * * 0"', 'schedule: "a b c d e f"', "retention.schedule",
     "second 'a': not a value"),          # six tokens are not yet a cron (they were accepted)
    ("projects.yaml", 'schedule: "0 0 3 * * 0"', 'schedule: "0 0 24 * * 0"', "retention.schedule", "hour '24'"),
    ("projects.yaml", 'schedule: "0 0 3 * * 0"', 'schedule: "0 0 3 * * 7"', "retention.schedule", "within 0-6"),
    ("projects.yaml", "require_cosign: true", 'require_cosign: "true"', "projects.release.require_cosign",
     "expected a bool"),
    ("projects.yaml", "require_cosign: true", "require_cosign: sometimes", "projects.release.require_cosign",
     "expected a bool"),
    ("projects.yaml", "require_cosign: true", "require_cosign: 1", "projects.release.require_cosign", "expected a bool"),
    ("projects.yaml", "require_cosign: true", "require_cosign:", "projects.release.require_cosign", "expected a bool"),
    ("projects.yaml", "require_cosign: true", "enable_content_trust_cosign: true",
     "projects.release.enable_content_trust_cosign", "unknown key"),
    ("projects.yaml", "    proxy_cache: nvcr\n", "    proxy_cache: nvcr\n    require_cosign: true\n",
     "projects.nvcr.require_cosign", "would refuse every pull"),
    ("harbor.yaml", "url: https://nvcr.io", "url: http://nvcr.io", "registries.nvcr.url", "should match"),
    ("harbor.yaml", "secret_env: RAPIDSHIP_NGC_API_KEY", "secret: hunter2", "credential.secret", "unknown key"),
])
def test_bad_config_is_one_clear_error(file, old, new, where, problem):
    docs = texts()
    assert old in docs[file], f"test fixture drifted: {old!r} not in {file}"
    docs[file] = docs[file].replace(old, new, 1)
    with pytest.raises(ConfigError) as err:
        parse_harbor(docs, "harbor", TODAY)
    assert file in err.value.where and where in err.value.where, err.value.message
    assert problem in err.value.problem, err.value.message
    assert err.value.fix


def test_proxy_cache_projects_refuse_push_side_rules():
    docs = texts()
    docs["projects.yaml"] = docs["projects.yaml"].replace(
        "    proxy_cache: nvcr\n", "    proxy_cache: nvcr\n    immutable_tags: [{tags: '*'}]\n")
    with pytest.raises(ConfigError, match="proxy-cache project mirrors upstream tags"):
        parse_harbor(docs, "harbor", TODAY)


def test_invalid_yaml_names_the_line():
    docs = texts()
    docs["robots.yaml"] = "robots:\n  ci: [unclosed\n"
    with pytest.raises(ConfigError) as err:
        parse_harbor(docs, "harbor", TODAY)
    assert "robots.yaml line" in err.value.where
