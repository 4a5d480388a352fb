"""harbor.plan / harbor.apply and the Harbor-side gate against the spec-faithful double.

The double (tests/harbor_double.py) answers only what Harbor's official swagger spec allows, and
every request rapidship sends is checked against that spec here too. What a double cannot prove
is listed in docs/harbor.md.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess

import pytest
import requests

from support.commands import ROOT  # noqa: E402

from support.harbor_contract import Contract  # noqa: E402
from support.harbor_double import REPORT_MIME, HarborDouble  # noqa: E402
from rapidship.errors import ConfigError, GateFailure  # noqa: E402
from rapidship.publish.harbor.client import HarborClient
from rapidship.publish.harbor.apply import SecretSink, apply, plan
from rapidship.publish.harbor.reconcile import desired_state, diff
from rapidship.gates.harbor import scan_gate
from rapidship.publish.harbor.config import load_harbor  # noqa: E402
from rapidship.publish.retrying import RetryPolicy  # noqa: E402

NGC_KEY = "ngc-key-that-must-not-leak"


@pytest.fixture(scope="session")
def contract() -> Contract:
    return Contract()


@pytest.fixture
def double(contract):
    d = HarborDouble(contract).start()
    yield d
    d.stop()
    assert not d.violations, "responses or requests outside the spec:\n" + "\n".join(d.violations)


@pytest.fixture
def cfg():
    return load_harbor(ROOT / "harbor")


@pytest.fixture
def client(double):
    return HarborClient(double.url, double.user, double.password, policy=RetryPolicy(attempts=2, base_delay=0.01))


def assert_all_requests_in_spec(contract: Contract, double: HarborDouble) -> None:
    assert double.requests, "no request reached the double"
    for r in double.requests:
        op, errors = contract.check_request(r["method"], r["path"], r["query"], r["headers"], r["body"])
        assert op is not None and not errors, f"{r['method']} {r['path']}: {errors}"


def test_contract_refuses_what_harbor_would(contract, double):
    """The checker is not a rubber stamp: wrong paths, methods, fields and types are caught."""
    assert contract.check_request("PATCH", "/api/v2.0/projects/x", {}, {}, None)[1]
    assert contract.check_request("GET", "/api/v2.0/projectz", {}, {}, None)[1]
    assert contract.check_request("POST", "/api/v2.0/projects", {}, {},
                                  b'{"project_name": "x", "metadata": {"prevent_vulnerable": "true"}}')[1]
    assert contract.check_request("POST", "/api/v2.0/robots", {}, {}, b'{"name": "ci", "duration": "90"}')[1]
    assert contract.check_request("GET", "/api/v2.0/robots", {"page_size": ["1000"]}, {}, None)[1]
    assert contract.check_request("GET", "/api/v2.0/robots", {"pagesize": ["10"]}, {}, None)[1]
    # and the double answers such a request with 400 and records the violation
    resp = requests.post(f"{double.url}/api/v2.0/projects", auth=(double.user, double.password),
                         json={"project_name": "x", "metadata": {"public": True}}, timeout=10)
    assert resp.status_code == 400 and double.violations
    double.violations.clear()


def test_plan_apply_plan_round_trips(contract, double, client, cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("RAPIDSHIP_NGC_API_KEY", NGC_KEY)
    changes, live = plan(client, cfg)
    kinds = {(c.action, c.kind) for c in changes}
    assert {("create", k) for k in ("registry", "project", "immutable-rule", "retention", "robot")} <= kinds
    assert len([c for c in changes if c.kind == "project"]) == len(cfg.projects) == 8  # staging, release, buildcache, buildcache-mr, mirror, three proxy caches

    secrets_file = tmp_path / "secrets" / "robots.json"
    done = apply(client, cfg, changes, live, SecretSink(secrets_file))
    assert len(done) == len(changes)

    again, _ = plan(client, cfg)
    assert again == [], [c.summary() for c in again]
    before = len(double.requests)
    assert apply(client, cfg, *plan(client, cfg), SecretSink(secrets_file)) == []
    writes = [r for r in double.requests[before:] if r["method"] != "GET"]
    assert writes == [], "a second apply must not write anything"

    # Harbor state is what the config says
    release = next(p for p in double.projects.values() if p["name"] == "release")
    assert release["metadata"]["prevent_vul"] == "true" and release["metadata"]["severity"] == "high"
    assert release["metadata"]["enable_content_trust_cosign"] == "true"
    staging = next(p for p in double.projects.values() if p["name"] == "staging")
    assert staging["metadata"]["enable_content_trust_cosign"] == "false"
    assert [i["cve_id"] for i in release["cve_allowlist"]["items"]] == ["CVE-2023-45853"]
    assert release["cve_allowlist"]["expires_at"] == cfg.projects["release"].cve_allowlist.expires_at
    nvcr = next(p for p in double.projects.values() if p["name"] == "nvcr")
    assert double.registries[nvcr["registry_id"]]["url"] == "https://nvcr.io"
    assert double.registries[nvcr["registry_id"]]["credential"]["access_secret"] == NGC_KEY
    ci = next(r for r in double.robots.values() if r["name"] == "robot$ci")
    grants = {(p["namespace"], a["resource"], a["action"]) for p in ci["permissions"] for a in p["access"]}
    assert ("staging", "repository", "push") in grants and not any(ns == "release" for ns, _, _ in grants)

    # robot secrets: once, in a 0600 file, each the one Harbor issued
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    kept = json.loads(secrets_file.read_text())
    assert set(kept) == {"robot$ci", "robot$mr", "robot$promote", "robot$runtime"}
    assert sorted(kept.values()) == sorted(double.issued_secrets)
    assert_all_requests_in_spec(contract, double)


def test_drift_is_planned_and_repaired(double, client, cfg, monkeypatch, tmp_path):
    monkeypatch.setenv("RAPIDSHIP_NGC_API_KEY", NGC_KEY)
    apply(client, cfg, *plan(client, cfg), SecretSink(tmp_path / "s.json"))
    # someone loosens things by hand in the UI
    release = next(p for p in double.projects.values() if p["name"] == "release")
    release["metadata"]["prevent_vul"] = "false"
    pid = release["project_id"]
    rule_id = next(iter(double.rules[pid]))
    double.rules[pid][rule_id]["tag_selectors"][0]["pattern"] = "**"
    runtime = next(r for r in double.robots.values() if r["name"] == "robot$runtime")
    runtime["permissions"][0]["access"].append({"resource": "repository", "action": "push"})

    changes, _ = plan(client, cfg)
    summary = [c.summary() for c in changes]
    assert [c.action for c in changes if c.kind == "immutable-rule"] == ["create", "delete"], summary  # never unprotected
    assert any(c.kind == "project" and "metadata.prevent_vul" in c.fields for c in changes), summary
    assert any(c.kind == "robot" and c.name == "robot$runtime" for c in changes), summary
    apply(client, cfg, *plan(client, cfg), SecretSink(tmp_path / "s.json"))
    assert plan(client, cfg)[0] == []
    assert release["metadata"]["prevent_vul"] == "true"


def test_proxy_cache_upstream_cannot_silently_change(cfg):
    desired = desired_state(cfg)
    live = dict(desired)
    live[("project", "nvcr")] = dict(desired[("project", "nvcr")], proxy_cache="dockerhub")
    with pytest.raises(ConfigError, match="fixes a proxy cache's upstream at creation"):
        diff(desired, live)


def test_missing_upstream_secret_stops_apply_before_the_registry(double, client, cfg, monkeypatch, tmp_path):
    monkeypatch.delenv("RAPIDSHIP_NGC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="RAPIDSHIP_NGC_API_KEY is not set"):
        apply(client, cfg, *plan(client, cfg), SecretSink(tmp_path / "s.json"))
    assert not any(r["name"] == "nvcr" for r in double.registries.values())


def test_invoke_plan_apply_plan_and_secrets_never_logged(contract, double, tmp_path):
    env = dict(os.environ, RAPIDSHIP_HARBOR_URL=double.url, RAPIDSHIP_HARBOR_USER=double.user,
               RAPIDSHIP_HARBOR_PASSWORD=double.password, RAPIDSHIP_NGC_API_KEY=NGC_KEY,
               XDG_CONFIG_HOME=str(tmp_path / "config"))

    def run(*args):
        proc = subprocess.run(["invoke", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    first = run("harbor.plan", "--json")
    assert len(json.loads(first.stdout)["changes"]) > 10
    applied = run("harbor.apply")
    assert "written to" in applied.stderr and "0600" in applied.stderr
    last = run("harbor.plan", "--json")
    assert json.loads(last.stdout)["changes"] == [] and "no changes" in last.stderr
    again = run("harbor.apply")
    assert "no changes" in again.stderr

    secrets_file = tmp_path / "config" / "rapidship" / "robot-secrets.json"
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    records = [ROOT / "build" / "harbor" / "plan.json", ROOT / "build" / "harbor" / "apply.json"]
    outputs = [p.stdout + p.stderr for p in (first, applied, last, again)] + [p.read_text() for p in records]
    assert len(double.issued_secrets) == 4  # ci, mr, promote, runtime
    for secret in [*double.issued_secrets, NGC_KEY, double.password]:
        assert all(secret not in text for text in outputs), "a secret reached a log or a record"

    printed = subprocess.run(["invoke", "harbor.apply", "--print-secrets"], cwd=ROOT, capture_output=True, text=True,
                             env=dict(env, RAPIDSHIP_HARBOR_PASSWORD="wrong"), check=False)
    assert printed.returncode == 2 and "HTTP 401" in printed.stderr and "Traceback" not in printed.stderr
    assert_all_requests_in_spec(contract, double)


def test_print_secrets_prints_once_and_writes_nothing(double, tmp_path):
    env = dict(os.environ, RAPIDSHIP_HARBOR_URL=double.url, RAPIDSHIP_HARBOR_USER=double.user,
               RAPIDSHIP_HARBOR_PASSWORD=double.password, RAPIDSHIP_NGC_API_KEY=NGC_KEY,
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    proc = subprocess.run(["invoke", "harbor.apply", "--print-secrets"], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {r["name"]: r["secret"] for r in double.robots.values()}
    assert not any(s in proc.stderr for s in double.issued_secrets)
    assert not (tmp_path / "config").exists()


# ---- the Harbor-side gate ----

REPORT = {"generated_at": "2026-11-30T05:00:00Z", "severity": "High",
          "vulnerabilities": [
              {"id": "CVE-2024-0001", "package": "libfoo", "version": "1.0", "fix_version": "1.1", "severity": "High"},
              {"id": "CVE-2023-45853", "package": "zlib1g", "version": "1.2.13", "severity": "Critical"}]}
DIGEST = "sha256:" + "ab" * 32


def no_high_unless_allowed(allowed: set[str]):
    """A small policy for the test: fail on High/Critical that is not allowlisted."""
    def decide(report: dict) -> dict:
        vulns = report[REPORT_MIME]["vulnerabilities"]
        blocking = [v["id"] for v in vulns if v["severity"] in ("High", "Critical") and v["id"] not in allowed]
        return {"passed": not blocking, "blocking": blocking}
    return decide


def test_scan_gate_fails_on_a_bad_report_and_passes_a_good_one(contract, double, client):
    double.add_artifact("staging", "rapidship/rapids", DIGEST, REPORT)
    bad = scan_gate(client, "staging", "rapidship/rapids", DIGEST, no_high_unless_allowed({"CVE-2023-45853"}),
                    poll=0.01)
    assert not bad.passed and bad.decision["blocking"] == ["CVE-2024-0001"]
    assert {f["id"] for f in bad.findings} == {"CVE-2024-0001", "CVE-2023-45853"}
    good = scan_gate(client, "staging", "rapidship/rapids", DIGEST,
                     no_high_unless_allowed({"CVE-2023-45853", "CVE-2024-0001"}), poll=0.01)
    assert good.passed
    paths = [r["path"] for r in double.requests]
    assert any(p.endswith("/repositories/rapidship%252Frapids/artifacts/" + DIGEST.replace(":", "%3A") + "/scan")
               for p in paths), paths  # repository encoded twice, as Harbor requires
    assert_all_requests_in_spec(contract, double)


def test_scan_gate_fails_closed(double, client):
    double.add_artifact("staging", "img", DIGEST, REPORT, outcome="Error")
    with pytest.raises(GateFailure, match="scan ended with Error"):
        scan_gate(client, "staging", "img", DIGEST, lambda r: {"passed": True}, poll=0.01)
    double.add_artifact("staging", "slow", DIGEST, REPORT, polls_until_done=10**6)
    with pytest.raises(GateFailure, match="no finished scan"):
        scan_gate(client, "staging", "slow", DIGEST, lambda r: {"passed": True}, timeout=0.2, poll=0.02)
    double.add_artifact("staging", "vague", DIGEST, REPORT)
    with pytest.raises(GateFailure, match="no passed=true/false verdict"):
        scan_gate(client, "staging", "vague", DIGEST, lambda r: {"ok": "yes"}, poll=0.01)


def test_invoke_list_shows_every_task():
    proc = subprocess.run(["invoke", "--list"], cwd=ROOT, capture_output=True, text=True, check=True)
    names = {line.split()[0] for line in proc.stdout.splitlines()[1:] if line.strip()}
    assert {"harbor.plan", "harbor.apply", "push", "promote", "base", "build", "lint", "lock", "matrix",
            "render"} <= names, proc.stdout


def test_scan_gate_with_the_project_policy(contract, double, client, tmp_path):
    """The Harbor-side gate runs the same policy code as `invoke scan-report` on Harbor's report."""
    from datetime import date

    from rapidship.gates.policy import load_policy, report_decider

    double.add_artifact("staging", "rapidship/dask", DIGEST, REPORT)
    policy = load_policy(ROOT / "policy" / "trivy.yaml")
    bad = scan_gate(client, "staging", "rapidship/dask", DIGEST, report_decider(policy, date(2026, 11, 30)), poll=0.01)
    assert not bad.passed
    assert any("CVE-2024-0001" in r for r in bad.decision["reasons"])
    allow = tmp_path / "policy.yaml"
    allow.write_text((ROOT / "policy" / "trivy.yaml").read_text().replace(
        "allowlist: []", "allowlist:\n    - {id: CVE-2024-0001, reason: fixed upstream next week, expires: 2026-12-31}\n"
        "    - {id: CVE-2023-45853, reason: zlib minizip not used, expires: 2026-12-31}", 1))
    good = scan_gate(client, "staging", "rapidship/dask", DIGEST,
                     report_decider(load_policy(allow), date(2026, 11, 30)), poll=0.01)
    assert good.passed, good.decision
    assert_all_requests_in_spec(contract, double)


# ---- cosign enforcement on the release project ----

def _without_cosign(tmp_path):
    """harbor/ as it was before release required cosign signatures."""
    from shutil import copytree

    old = copytree(ROOT / "harbor", tmp_path / "harbor-before")
    text = (old / "projects.yaml").read_text()
    assert "    require_cosign: true" in text
    (old / "projects.yaml").write_text(text.replace("    require_cosign: true", "    require_cosign: false", 1))
    return old


def test_cosign_enforcement_is_planned_applied_once_and_kept(contract, double, client, cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("RAPIDSHIP_NGC_API_KEY", NGC_KEY)
    old = load_harbor(_without_cosign(tmp_path))
    apply(client, old, *plan(client, old), SecretSink(tmp_path / "s.json"))
    release = next(p for p in double.projects.values() if p["name"] == "release")
    assert release["metadata"]["enable_content_trust_cosign"] == "false"
    del release["metadata"]["enable_content_trust_cosign"]  # Harbor omits an unset flag: it reads as "false"

    changes, live = plan(client, cfg)
    assert [c.summary() for c in changes] == [
        "update project release: metadata.enable_content_trust_cosign 'false' -> 'true'  [LOOSER IN HARBOR THAN "
        "CONFIGURED: metadata.enable_content_trust_cosign is 'false' in Harbor, 'true' in the config]"]
    from rapidship.publish.harbor.apply import change_record

    assert change_record(changes[0]) == {"action": "update", "kind": "project", "name": "release", "fields": {
        "metadata.enable_content_trust_cosign": {"live": "false", "wanted": "true"}}, "loosened": ["metadata.enable_content_trust_cosign is 'false' in Harbor, 'true' in the config"]}

    before = len(double.requests)
    apply(client, cfg, changes, live, SecretSink(tmp_path / "s.json"))
    writes = [r for r in double.requests[before:] if r["method"] != "GET"]
    assert [(r["method"], r["path"]) for r in writes] == [("PUT", "/api/v2.0/projects/release")]
    sent = json.loads(writes[0]["body"])
    assert sent["metadata"]["enable_content_trust_cosign"] == "true"  # a string: ProjectMetadata types it so
    assert contract.check_request("PUT", writes[0]["path"], writes[0]["query"], writes[0]["headers"],
                                  writes[0]["body"])[1] == []
    assert release["metadata"]["enable_content_trust_cosign"] == "true"

    assert plan(client, cfg)[0] == []
    before = len(double.requests)
    assert apply(client, cfg, *plan(client, cfg), SecretSink(tmp_path / "s.json")) == []
    assert [r for r in double.requests[before:] if r["method"] != "GET"] == [], "a second apply must not write"
    # the spec takes the flag as a string only: a JSON boolean is refused, as Harbor would
    assert contract.check_request("PUT", "/api/v2.0/projects/release", {}, {},
                                  b'{"metadata": {"enable_content_trust_cosign": true}}')[1]
    assert_all_requests_in_spec(contract, double)


def test_invoke_plan_shows_cosign_enforcement(double, tmp_path):
    env = dict(os.environ, RAPIDSHIP_HARBOR_URL=double.url, RAPIDSHIP_HARBOR_USER=double.user,
               RAPIDSHIP_HARBOR_PASSWORD=double.password, RAPIDSHIP_NGC_API_KEY=NGC_KEY,
               XDG_CONFIG_HOME=str(tmp_path / "config"))

    def run(*args):
        proc = subprocess.run(["invoke", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    run("harbor.apply", "--config", str(_without_cosign(tmp_path)))
    shown = run("harbor.plan", "--config", str(ROOT / "harbor"), "--json")
    assert json.loads(shown.stdout)["changes"] == [{"action": "update", "kind": "project", "name": "release", "fields": {
        "metadata.enable_content_trust_cosign": {"live": "false", "wanted": "true"}}, "loosened": ["metadata.enable_content_trust_cosign is 'false' in Harbor, 'true' in the config"]}]
    assert "update project release: metadata.enable_content_trust_cosign 'false' -> 'true'" in shown.stderr
    assert json.loads((ROOT / "build" / "harbor" / "plan.json").read_text())["changes"] == json.loads(
        shown.stdout)["changes"]


@pytest.mark.parametrize("drift", ["rule disabled", "selector inverted", "system allowlist reused",
                                   "cosign enforcement off", "severity raised"])
def test_drift_that_loosens_is_planned_loudly_and_repaired(contract, double, client, cfg, monkeypatch, tmp_path, drift):
    """After apply, each of these used to plan as "no changes"."""
    monkeypatch.setenv("RAPIDSHIP_NGC_API_KEY", NGC_KEY)
    apply(client, cfg, *plan(client, cfg), SecretSink(tmp_path / "s.json"))
    release = next(p for p in double.projects.values() if p["name"] == "release")
    rule = next(iter(double.rules[release["project_id"]].values()))
    if drift == "rule disabled":
        rule["disabled"] = True
    elif drift == "selector inverted":
        rule["tag_selectors"][0]["decoration"] = "excludes"
    elif drift == "system allowlist reused":
        release["metadata"]["reuse_sys_cve_allowlist"] = "true"
    elif drift == "cosign enforcement off":
        release["metadata"]["enable_content_trust_cosign"] = "false"
    else:
        release["metadata"]["severity"] = "critical"
    changes, _ = plan(client, cfg)
    assert len(changes) == 1 and changes[0].action == "update", [c.summary() for c in changes]
    assert changes[0].loosened() and "LOOSER IN HARBOR THAN CONFIGURED" in changes[0].summary()
    apply(client, cfg, *plan(client, cfg), SecretSink(tmp_path / "s.json"))
    assert plan(client, cfg)[0] == []  # tightened back, in place
    assert_all_requests_in_spec(contract, double)
