"""The pure policy: file validation, variant overrides, and every branch of the decision."""

from __future__ import annotations

import json
from datetime import date, datetime

import jsonschema
import pytest

from rapidship.errors import ConfigError, RapidshipError
from rapidship.gates.gitlab_report import gitlab_report
from rapidship.gates.policy import (Finding, ScanFacts, decide, findings, load_policy, parse_policy, read_report,
                                    resolve, scan_facts)
from support.commands import ROOT

TODAY = date(2026, 6, 1)
FACTS = ScanFacts(artifact="img:1", artifact_type="container_image", os="debian 12.15", packages=100)


def policy(text: str, variant: str | None = None):
    return resolve(parse_policy(text, "p.yaml", ["cpu-debian12", "cuda12-kylin10"]), "p.yaml", variant)


def vuln(cve: str, severity: str, fixed: str = "2.0", package: str = "zlib1g") -> Finding:
    return Finding(kind="vulnerability", id=cve, severity=severity, target="img (debian 12)", package=package,
                   installed="1.0", fixed=fixed)


def test_committed_policy_is_valid_and_defaults_to_medium():
    p = load_policy("policy/trivy.yaml", "cpu-debian12")
    assert p.rules.threshold == "MEDIUM" and p.rules.allowlist == () and p.rules.fail_on_secrets


@pytest.mark.parametrize("text, where, words", [
    ("defaults: {allowlist: [{id: CVE-1, expires: 2027-01-01}]}", "defaults.allowlist[0]", "needs a `reason`"),
    ("defaults: {allowlist: [{id: CVE-1, reason: accepted because unreachable}]}", "defaults.allowlist[0]",
     "needs an `expires` date"),
    ("defaults: {allowlist: [{id: CVE-1, reason: short, expires: 2027-01-01}]}", "defaults.allowlist[0]",
     "at least 10 characters"),
    ("defaults: {allowlist: [{id: CVE-1, reason: accepted because unreachable, expires: soon}]}",
     "defaults.allowlist[0].expires", "not a date"),
    ("defaults: {threshold: SEVERE}", "defaults.threshold", "is not one of"),
    ("defaults: {treshold: HIGH}", "defaults.treshold", "unknown key"),
    ("variants: {cpu-debain12: {threshold: HIGH}}", "variants.cpu-debain12", "no such variant"),
    ("defaults: [1, 2]", "defaults", "expected a mapping"),
    ("defaults: {threshold: HIGH\n", "p.yaml line", "not valid YAML"),
])
def test_bad_policy_files_name_the_yaml_path(text, where, words):
    with pytest.raises(ConfigError) as err:
        parse_policy(text, "p.yaml", ["cpu-debian12"])
    assert where in err.value.where and words in err.value.problem


def test_variant_override_replaces_scalars_and_adds_allowlist_entries():
    text = """
defaults:
  threshold: MEDIUM
  allowlist: [{id: CVE-1, reason: accepted for every variant, expires: 2027-01-01}]
variants:
  cuda12-kylin10:
    threshold: HIGH
    require_os: false
    allowlist: [{id: CVE-2, reason: only on kylin for now, expires: 2027-01-01}]
"""
    kylin, cpu = policy(text, "cuda12-kylin10").rules, policy(text, "cpu-debian12").rules
    assert (kylin.threshold, kylin.require_os, [e.id for e in kylin.allowlist]) == ("HIGH", False, ["CVE-1", "CVE-2"])
    assert (cpu.threshold, cpu.require_os, [e.id for e in cpu.allowlist]) == ("MEDIUM", True, ["CVE-1"])


def test_threshold_is_a_threshold_not_a_set():
    found = [vuln("CVE-L", "LOW"), vuln("CVE-M", "MEDIUM"), vuln("CVE-H", "HIGH"), vuln("CVE-C", "CRITICAL")]
    d = decide(found, FACTS, policy("defaults: {threshold: HIGH}"), TODAY)
    assert not d.passed
    assert {v.finding.id: v.outcome for v in d.verdicts} == {
        "CVE-L": "below-threshold", "CVE-M": "below-threshold", "CVE-H": "fail", "CVE-C": "fail"}
    assert decide(found[:2], FACTS, policy("defaults: {threshold: HIGH}"), TODAY).passed


def test_allowlist_passes_until_it_expires_then_fails_with_the_expiry_in_the_reason():
    text = "defaults: {allowlist: [{id: CVE-M, reason: not reachable from the API, expires: 2026-06-01}]}"
    found = [vuln("CVE-M", "MEDIUM")]
    valid = decide(found, FACTS, policy(text), date(2026, 6, 1))  # the expiry day itself still counts
    assert valid.passed and valid.verdicts[0].outcome == "allowlisted"
    assert "not reachable from the API" in valid.verdicts[0].reason
    expired = decide(found, FACTS, policy(text), date(2026, 6, 2))
    assert not expired.passed
    assert "expired on 2026-06-01" in expired.reasons[0]
    assert "allowlist entry CVE-M expired on 2026-06-01" in expired.notes


def test_allowlist_package_pattern_limits_the_entry():
    text = "defaults: {allowlist: [{id: CVE-M, package: 'libssl*', reason: not reachable from the API, expires: 2027-01-01}]}"
    d = decide([vuln("CVE-M", "MEDIUM", package="libssl3"), vuln("CVE-M", "MEDIUM", package="openssl")],
               FACTS, policy(text), TODAY)
    assert [v.outcome for v in d.verdicts] == ["allowlisted", "fail"]


def test_unused_allowlist_entries_are_noted():
    text = "defaults: {allowlist: [{id: CVE-GONE, reason: was in an old base image, expires: 2026-10-01}]}"
    d = decide([], FACTS, policy(text), TODAY)
    assert d.passed and any("CVE-GONE matched nothing" in n for n in d.notes)


def test_ignore_unfixed_skips_only_findings_without_a_fix():
    found = [vuln("CVE-U", "HIGH", fixed=""), vuln("CVE-F", "HIGH")]
    strict = decide(found, FACTS, policy("defaults: {ignore_unfixed: false}"), TODAY)
    assert [v.outcome for v in strict.verdicts] == ["fail", "fail"]
    lenient = decide(found, FACTS, policy("defaults: {ignore_unfixed: true}"), TODAY)
    assert [v.outcome for v in lenient.verdicts] == ["unfixed-ignored", "fail"]
    assert decide(found[:1], FACTS, policy("defaults: {ignore_unfixed: true}"), TODAY).passed


def test_unknown_severity_fails_unless_the_policy_says_otherwise():
    found = [vuln("CVE-X", "UNKNOWN")]
    assert not decide(found, FACTS, policy(""), TODAY).passed
    assert decide(found, FACTS, policy("defaults: {fail_on_unknown: false}"), TODAY).passed


def test_a_secret_fails_at_any_severity():
    secret = Finding(kind="secret", id="aws-access-key-id", severity="LOW", target="/etc/app/credentials")
    d = decide([secret], FACTS, policy("defaults: {threshold: CRITICAL}"), TODAY)
    assert not d.passed and "secret aws-access-key-id in /etc/app/credentials" in d.reasons[0]
    assert decide([secret], FACTS, policy("defaults: {fail_on_secrets: false}"), TODAY).passed


def test_an_image_without_a_detected_os_fails_closed():
    bare = ScanFacts(artifact="img:1", artifact_type="container_image", os="", packages=0)
    d = decide([], bare, policy(""), TODAY)
    assert not d.passed and "detected no operating system" in d.reasons[0]
    assert decide([], bare, policy("defaults: {require_os: false}"), TODAY).passed


@pytest.mark.parametrize("raw", [b"", b"not json", b"[]", b'{"SchemaVersion": 1, "Results": []}',
                                 b'{"SchemaVersion": 2, "Results": {}}', b"\xff\xfe"])
def test_unreadable_reports_fail_closed(raw):
    with pytest.raises(RapidshipError, match="not a trivy JSON report"):
        read_report(raw, "r.json")


REPORT = {
    "SchemaVersion": 2, "ArtifactName": "img:1", "ArtifactType": "container_image",
    "Metadata": {"OS": {"Family": "debian", "Name": "12.15"}},
    "Results": [
        {"Target": "img:1 (debian 12.15)", "Class": "os-pkgs", "Packages": [{"Name": "gzip"}],
         "Vulnerabilities": [{"VulnerabilityID": "CVE-2099-1", "PkgName": "gzip", "InstalledVersion": "1.12-1",
                              "FixedVersion": "1.12-2", "Severity": "MEDIUM", "Title": "gzip: bad"}]},
        {"Target": "/etc/creds", "Class": "secret",
         "Secrets": [{"RuleID": "aws-access-key-id", "Severity": "CRITICAL", "Title": "AWS Access Key ID",
                      "Match": "aws_access_key_id = ****"}]},
        {"Target": "Dockerfile", "Class": "config",
         "Misconfigurations": [{"ID": "DS002", "Severity": "HIGH", "Title": "root user", "Status": "FAIL"},
                               {"ID": "DS001", "Severity": "MEDIUM", "Title": "latest tag", "Status": "PASS"}]},
    ]}


def test_findings_read_every_kind_and_only_failed_checks():
    found = findings(read_report(json.dumps(REPORT), "r.json"))
    assert [(f.kind, f.id) for f in found] == [("vulnerability", "CVE-2099-1"), ("secret", "aws-access-key-id"),
                                               ("misconfiguration", "DS002")]
    assert scan_facts(REPORT) == ScanFacts("img:1", "container_image", "debian 12.15", 1, results=3)


@pytest.mark.parametrize("report,problem", [
    ({"SchemaVersion": 2, "ArtifactName": "img:1", "ArtifactType": "container_image",
      "Metadata": {"OS": {"Family": "debian", "Name": "12"}}}, "has no Results: the scan checked nothing"),
    ({"SchemaVersion": 2, "ArtifactName": "img:1", "ArtifactType": "container_image",
      "Metadata": {"OS": {"Family": "debian", "Name": "12"}}, "Results": []}, "has no Results"),
    ({"SchemaVersion": 2, "Results": []}, "of artifact type '(none)', not an image scan"),
    ({"SchemaVersion": 2, "ArtifactName": "/src", "ArtifactType": "filesystem", "Results": [{"Target": "x"}]},
     "of artifact type 'filesystem', not an image scan"),
])
def test_a_report_that_looked_at_nothing_never_passes(report, problem):
    # fail closed: no findings in an empty report is not the same as no findings in the image
    data = read_report(json.dumps(report), "r.json")
    d = decide(findings(data), scan_facts(data), policy("defaults: {require_os: false}"), TODAY)
    assert not d.passed and problem in d.reasons[0]
    whole = read_report(json.dumps(REPORT | {"Results": REPORT["Results"][:1]}), "r.json")
    whole_facts = scan_facts(whole)
    assert decide([], whole_facts, policy(""), TODAY).passed  # the same image with its Results: judged on them


# The required parts of GitLab's container-scanning report schema 15.x: GitLab rejects a report without them.
GITLAB_REQUIRED = json.loads((ROOT / "tests" / "data" / "gitlab-container-scanning-15-required.json").read_text())


def test_gitlab_report_has_every_required_field_and_stable_ids():
    found = findings(REPORT)
    when = datetime(2026, 6, 1, 12, 0, 0)
    report = gitlab_report(found, "img:1", "debian 12.15", "0.59.1", when, when)
    jsonschema.validate(report, GITLAB_REQUIRED)
    assert [v["identifiers"][0]["value"] for v in report["vulnerabilities"]] == ["CVE-2099-1"]  # package vulns only
    assert report["vulnerabilities"][0]["severity"] == "Medium"
    again = gitlab_report(found, "img:1", "debian 12.15", "0.59.1", when, when)
    assert again["vulnerabilities"][0]["id"] == report["vulnerabilities"][0]["id"]
    broken = json.loads(json.dumps(report))
    del broken["vulnerabilities"][0]["location"]["image"]
    with pytest.raises(jsonschema.ValidationError):  # the check can fail
        jsonschema.validate(broken, GITLAB_REQUIRED)


HARBOR = {"application/vnd.security.vulnerability.report; version=1.1": {
    "generated_at": "2026-11-30T05:00:00Z",
    "artifact": {"repository": "rapids/dask", "digest": "sha256:" + "a" * 64},
    "scanner": {"name": "Trivy", "vendor": "Aqua Security", "version": "v0.59.1"},
    "severity": "High",
    "vulnerabilities": [
        {"id": "CVE-2099-2", "package": "zlib1g", "version": "1:1.2.13.dfsg-1", "fix_version": "", "severity": "High",
         "description": "zlib: bad"},
        {"id": "CVE-2099-3", "package": "gzip", "version": "1.12-1", "fix_version": "1.12-2", "severity": "Low"}]}}


def test_harbor_reports_get_the_same_policy():
    data = read_report(json.dumps(HARBOR), "harbor.json")
    found = findings(data)
    assert [(f.id, f.severity, f.package, f.fixed) for f in found] == [
        ("CVE-2099-2", "HIGH", "zlib1g", ""), ("CVE-2099-3", "LOW", "gzip", "1.12-2")]
    facts = scan_facts(data)
    assert facts.artifact == "rapids/dask@sha256:" + "a" * 64 and facts.artifact_type == "harbor_report"
    assert not decide(found, facts, policy(""), TODAY).passed  # HIGH, unfixed
    assert decide(found, facts, policy("defaults: {ignore_unfixed: true}"), TODAY).passed  # OS check n/a
    with pytest.raises(RapidshipError, match="without a readable `vulnerabilities`"):
        read_report(json.dumps({"application/vnd.security.vulnerability.report; version=1.1": {"vulnerabilities": "x"}}),
                    "h.json")


def test_a_stale_db_fails_closed_and_the_limit_is_configurable():
    old = ScanFacts(artifact="img:1", artifact_type="container_image", os="debian 12.15", packages=1,
                    db_updated=date(2026, 5, 1))
    d = decide([], old, policy(""), TODAY)
    assert not d.passed and "31 days ago (max_db_age_days: 7)" in d.reasons[0]
    assert decide([], old, policy("defaults: {max_db_age_days: 60}"), TODAY).passed
    assert decide([], FACTS, policy(""), TODAY).passed  # DB age unknown (a report made elsewhere): not judged
    with pytest.raises(ConfigError, match="max_db_age_days"):
        parse_policy("defaults: {max_db_age_days: 0}", "p.yaml")


def test_harbor_negligible_and_none_are_graded_low_not_unknown():
    """Harbor ranks None and Negligible below Low; as UNKNOWN they failed every default gate."""
    doc = json.loads(json.dumps(HARBOR))
    report = next(iter(doc.values()))
    report["vulnerabilities"] = [dict(report["vulnerabilities"][1], id="CVE-2099-4", severity="Negligible"),
                                 dict(report["vulnerabilities"][1], id="CVE-2099-5", severity="None")]
    found = findings(read_report(json.dumps(doc), "harbor.json"))
    assert [(f.id, f.severity) for f in found] == [("CVE-2099-4", "LOW"), ("CVE-2099-5", "LOW")]
    facts = scan_facts(read_report(json.dumps(doc), "harbor.json"))
    assert decide(found, facts, policy(""), TODAY).passed  # below the committed MEDIUM threshold
    assert not decide(found, facts, policy("defaults: {threshold: LOW}"), TODAY).passed


@pytest.mark.parametrize("text", [
    '{"SchemaVersion": 2, "Results": [], "Results": [{"Target": "x"}]}',
    '{"SchemaVersion": 2, "ArtifactName": "a", "artifactName": "b", "Results": []}',
])
def test_a_report_with_a_key_given_twice_is_refused_as_ambiguous(text):
    with pytest.raises(RapidshipError, match="an ambiguous report"):
        read_report(text, "trivy.json")


def test_a_harbor_answer_with_a_key_given_twice_is_refused():
    from rapidship.publish.harbor.client import parse_report

    body = json.dumps(HARBOR)
    twice = body.replace('"severity": "High",', '"severity": "High", "severity": "Low",', 1)
    assert twice != body
    with pytest.raises(RapidshipError, match="ambiguous: key 'severity' given twice"):
        parse_report(twice)


def test_a_secret_is_allowlisted_only_for_the_files_an_entry_names():
    """A rule id alone would accept that kind of secret in every file of every image until expiry."""
    secret = Finding(kind="secret", id="aws-access-key-id", severity="LOW", target="/etc/app/credentials")
    by_id = "defaults: {allowlist: [{id: aws-access-key-id, reason: a documented test fixture key, expires: 2026-07-01}]}"
    d = decide([secret], FACTS, policy(by_id), TODAY)
    assert not d.passed and d.verdicts[0].outcome == "fail"
    scoped = by_id.replace("expires:", "path: '/etc/app/*', expires:")
    assert decide([secret], FACTS, policy(scoped), TODAY).verdicts[0].outcome == "allowlisted"
    elsewhere = Finding(kind="secret", id="aws-access-key-id", severity="LOW", target="/home/rapids/.aws/credentials")
    assert decide([elsewhere], FACTS, policy(scoped), TODAY).verdicts[0].outcome == "fail"


def test_an_allowlist_entry_may_not_expire_too_far_ahead():
    entry = "defaults: {{allowlist: [{{id: CVE-M, reason: not reachable from the API, expires: {day}}}]{extra}}}"
    found = [vuln("CVE-M", "MEDIUM")]
    far = decide(found, FACTS, policy(entry.format(day="2099-01-01", extra="")), TODAY)
    assert not far.passed and "more than max_allowlist_days (180)" in far.reasons[0]
    assert decide(found, FACTS, policy(entry.format(day="2026-11-27", extra="")), TODAY).passed  # 179 days
    longer = entry.format(day="2027-05-01", extra=", max_allowlist_days: 365")
    assert decide(found, FACTS, policy(longer), TODAY).passed


def test_a_db_of_unknown_age_fails_closed_when_the_scan_ran_here():
    unknown = ScanFacts(artifact="img:1", artifact_type="container_image", os="debian 12.15", packages=1,
                        db_age_unknown=True)
    d = decide([], unknown, policy(""), TODAY)
    assert not d.passed and "names no UpdatedAt: its age is unknown" in d.reasons[0]
