"""Reports of the wrong shape, in the wrong encoding or of hostile size, and allowlist dates that
are no dates: each ends in ONE RapidshipError naming the file, the place and the fix."""

from __future__ import annotations

import copy
import json
from datetime import date

import pytest

from rapidship.errors import ConfigError, RapidshipError
from rapidship.gates.policy import decide, findings, load_policy, parse_policy, read_report, resolve, scan_facts
from support.commands import invoke

TODAY = date(2026, 6, 1)
GOOD = {
    "SchemaVersion": 2, "ArtifactName": "img:1", "ArtifactType": "container_image", "Trivy": {"Version": "0.59.1"},
    "Metadata": {"OS": {"Family": "debian", "Name": "12.15"}},
    "Results": [
        {"Target": "img:1 (debian 12.15)", "Class": "os-pkgs", "Packages": [{"Name": "gzip"}],
         "Vulnerabilities": [{"VulnerabilityID": "CVE-2099-1", "PkgName": "gzip", "InstalledVersion": "1.12-1",
                              "FixedVersion": "1.12-2", "Severity": "MEDIUM", "Title": "gzip: bad",
                              "Layer": {"DiffID": "sha256:" + "b" * 64}}]},
        {"Target": "/etc/creds", "Class": "secret",
         "Secrets": [{"RuleID": "aws-access-key-id", "Severity": "CRITICAL", "Title": "AWS Access Key ID"}]},
        {"Target": "Dockerfile", "Class": "config",
         "Misconfigurations": [{"ID": "DS002", "Severity": "HIGH", "Title": "root user", "Status": "FAIL"}]},
    ]}
HARBOR_MIME = "application/vnd.security.vulnerability.report; version=1.1"
HARBOR = {HARBOR_MIME: {"artifact": {"repository": "rapids/dask", "digest": "sha256:" + "a" * 64},
                        "scanner": {"name": "Trivy", "version": "v0.59.1"},
                        "vulnerabilities": [{"id": "CVE-2099-2", "package": "zlib1g", "version": "1.0",
                                             "fix_version": "", "severity": "High", "description": "zlib: bad"}]}}


def changed(doc: dict, path: tuple, value=None, drop: bool = False) -> dict:
    out = copy.deepcopy(doc)
    *parents, last = path
    node = out
    for p in parents:
        node = node[p]
    if drop:
        del node[last]
    else:
        node[last] = value
    return out


def vuln(path_value: tuple) -> tuple:
    return ("Results", 0, "Vulnerabilities", 0, *path_value)


def test_the_good_report_is_read_and_judged():
    data = read_report(json.dumps(GOOD), "r.json")
    assert [f.id for f in findings(data)] == ["CVE-2099-1", "aws-access-key-id", "DS002"]
    assert not decide(findings(data), scan_facts(data), resolve(parse_policy("", "p"), "p", None), TODAY).passed


WRONG_SHAPES = [  # (the change, where the error points, what it says)
    (dict(path=vuln(("VulnerabilityID",)), drop=True), "Results[0].Vulnerabilities[0]",
     "a vulnerability without its `VulnerabilityID`"),
    (dict(path=vuln(("VulnerabilityID",)), value=""), "Results[0].Vulnerabilities[0]", "without its `VulnerabilityID`"),
    (dict(path=vuln(("VulnerabilityID",)), value=1234), "Results[0].Vulnerabilities[0].VulnerabilityID",
     "expected a string, got a number (1234)"),
    (dict(path=("Results", 0, "Vulnerabilities"), value={"CVE-1": {}}), "Results[0].Vulnerabilities",
     "expected a list, got a mapping"),
    (dict(path=("Results", 0, "Vulnerabilities"), value="CVE-1"), "Results[0].Vulnerabilities",
     "expected a list, got a string"),
    (dict(path=("Results", 0, "Vulnerabilities"), value=7), "Results[0].Vulnerabilities", "expected a list, got a number"),
    (dict(path=("Results", 0, "Vulnerabilities"), value=["CVE-1"]), "Results[0].Vulnerabilities[0]",
     "expected a mapping, got a string"),
    (dict(path=("Results", 1, "Secrets"), value="aws"), "Results[1].Secrets", "expected a list, got a string"),
    (dict(path=("Results", 1, "Secrets"), value=[None]), "Results[1].Secrets[0]", "expected a mapping, got null"),
    (dict(path=("Results", 2, "Misconfigurations"), value={"DS002": "FAIL"}), "Results[2].Misconfigurations",
     "expected a list, got a mapping"),
    (dict(path=("Results", 0, "Packages"), value="gzip"), "Results[0].Packages", "expected a list, got a string"),
    (dict(path=("Results", 0, "Packages"), value=3), "Results[0].Packages", "expected a list, got a number"),
    (dict(path=("Results", 0), value="img:1"), "Results[0]", "expected a mapping, got a string"),
    (dict(path=("Results", 0), value=42), "Results[0]", "expected a mapping, got a number"),
    (dict(path=("Results",), value="none"), "Results", "expected a list, got a string"),
    (dict(path=("Results",), value=None), "Results", "expected a list, got null"),
    (dict(path=("Metadata",), value="debian"), "Metadata", "expected a mapping, got a string"),
    (dict(path=("Metadata", "OS"), value="debian 12"), "Metadata.OS", "expected a mapping, got a string"),
    (dict(path=("Metadata", "OS", "Family"), value=["debian"]), "Metadata.OS.Family", "expected a string, got a list"),
    (dict(path=("ArtifactName",), value=12), "ArtifactName", "expected a string, got a number"),
    (dict(path=("ArtifactType",), value=True), "ArtifactType", "expected a string, got true/false"),
    (dict(path=("Trivy",), value="0.59.1"), "Trivy", "expected a mapping, got a string"),
    (dict(path=("Trivy", "Version"), value=59), "Trivy.Version", "expected a string, got a number"),
    (dict(path=vuln(("Severity",)), value=3), "Results[0].Vulnerabilities[0].Severity", "expected a string, got a number"),
    (dict(path=vuln(("Severity",)), value=["HIGH"]), "Results[0].Vulnerabilities[0].Severity",
     "expected a string, got a list"),
    (dict(path=vuln(("Title",)), value={"en": "bad"}), "Results[0].Vulnerabilities[0].Title",
     "expected a string, got a mapping"),
    (dict(path=vuln(("PkgName",)), value=0), "Results[0].Vulnerabilities[0].PkgName", "expected a string"),
    (dict(path=vuln(("FixedVersion",)), value=1.2), "Results[0].Vulnerabilities[0].FixedVersion", "expected a string"),
    (dict(path=vuln(("Layer",)), value="sha256:b"), "Results[0].Vulnerabilities[0].Layer", "expected a mapping"),
    (dict(path=vuln(("Layer", "DiffID")), value=5), "Results[0].Vulnerabilities[0].Layer.DiffID", "expected a string"),
    (dict(path=("Results", 1, "Secrets", 0, "Layer"), value=[]), "Results[1].Secrets[0].Layer", "expected a mapping"),
    (dict(path=("Results", 1, "Secrets", 0, "RuleID"), value=5), "Results[1].Secrets[0].RuleID", "expected a string"),
    (dict(path=("Results", 2, "Target"), value=["Dockerfile"]), "Results[2].Target", "expected a string, got a list"),
    (dict(path=("Results", 2, "Misconfigurations", 0, "Status"), drop=True), "Results[2].Misconfigurations[0]",
     "a check result without its `Status`"),
    (dict(path=("Results", 2, "Misconfigurations", 0, "ID"), drop=True), "Results[2].Misconfigurations[0]",
     "a failed check without its `ID` or `AVDID`"),
    (dict(path=("Results", 2, "Misconfigurations", 0, "Severity"), value=None), None, None),  # null: UNKNOWN, fails
    (dict(path=vuln(("Title",)), value="x\ud800y"), "Results[0].Vulnerabilities[0].Title", "unpaired surrogate"),
    (dict(path=("ArtifactName",), value="img\udfff"), "ArtifactName", "unpaired surrogate"),
]


@pytest.mark.parametrize("change, where, words", WRONG_SHAPES, ids=[
    f"{'.'.join(map(str, c['path']))}={'drop' if c.get('drop') else type(c.get('value')).__name__}"
    for c, _, _ in WRONG_SHAPES])
def test_a_report_of_the_wrong_shape_is_one_error_naming_the_place(change, where, words):
    text = json.dumps(changed(GOOD, **change))
    if where is None:  # a shape that is allowed: judged, not refused
        data = read_report(text, "r.json")
        assert not decide(findings(data), scan_facts(data), resolve(parse_policy("", "p"), "p", None), TODAY).passed
        return
    with pytest.raises(RapidshipError) as err:
        read_report(text, "/in/trivy.json")
    assert err.value.where == f"/in/trivy.json: {where}"
    assert words in err.value.problem and "not a trivy JSON report" in err.value.problem
    assert "trivy image --format json" in err.value.fix


HARBOR_SHAPES = [
    ((HARBOR_MIME, "vulnerabilities", 0, "id"), None, True, "vulnerabilities[0]", "a vulnerability without its `id`"),
    ((HARBOR_MIME, "vulnerabilities", 0, "id"), 7, False, "vulnerabilities[0].id", "expected a string, got a number"),
    ((HARBOR_MIME, "vulnerabilities", 0), "CVE-1", False, "vulnerabilities[0]", "expected a mapping, got a string"),
    ((HARBOR_MIME, "vulnerabilities", 0, "description"), 5, False, "vulnerabilities[0].description", "expected a string"),
    ((HARBOR_MIME, "vulnerabilities", 0, "severity"), {"v": 3}, False, "vulnerabilities[0].severity", "expected a string"),
    ((HARBOR_MIME, "artifact"), "rapids/dask", False, "artifact", "expected a mapping, got a string"),
    ((HARBOR_MIME, "artifact", "digest"), 1, False, "artifact.digest", "expected a string"),
    ((HARBOR_MIME, "scanner"), "trivy", False, "scanner", "expected a mapping, got a string"),
    ((HARBOR_MIME, "scanner", "version"), 0.59, False, "scanner.version", "expected a string, got a number"),
]


@pytest.mark.parametrize("path, value, drop, where, words", HARBOR_SHAPES)
def test_a_harbor_report_of_the_wrong_shape_is_one_error_naming_the_place(path, value, drop, where, words):
    with pytest.raises(RapidshipError) as err:
        read_report(json.dumps(changed(HARBOR, path, value, drop)), "h.json")
    assert err.value.where == f"h.json: {where}" and words in err.value.problem
    assert "additions/vulnerabilities" in err.value.fix


def test_harbor_nulls_read_as_empty():
    data = read_report(json.dumps(changed(HARBOR, (HARBOR_MIME, "vulnerabilities", 0, "fix_version"), None)), "h.json")
    assert [(f.id, f.fixed, f.severity) for f in findings(data)] == [("CVE-2099-2", "", "HIGH")]
    bare = read_report(json.dumps(changed(HARBOR[HARBOR_MIME], ("artifact",), None)), "h.json")
    assert scan_facts(bare).artifact == "h.json"


@pytest.mark.parametrize("raw, words, fix", [
    (json.dumps(GOOD).encode("utf-16"), "UTF-16 text, not UTF-8", "iconv -f UTF-16 -t UTF-8"),
    (json.dumps(GOOD).encode("utf-16-le"), "UTF-16 text, not UTF-8", "iconv -f UTF-16-LE -t UTF-8"),
    (json.dumps(GOOD).encode("utf-32"), "UTF-32 text, not UTF-8", "iconv -f UTF-32"),
    (b"\xef\xbb\xbf" + json.dumps(GOOD).encode(), "byte order mark", "tail -c +4"),
    (bytes(range(256)) * 4, "not UTF-8 text: byte 0x80 at offset 128", "not a binary"),
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\xff\xff", "gzip-compressed", "decompress"),
    (b"\x28\xb5\x2f\xfd\x00\x58\x91", "zstd-compressed", "decompress"),
    (b"", "the file is empty", "scan again"),
    (b"  \n", "the file is empty", "scan again"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply", "trivy image"),
    (b'{"SchemaVersion": 2, "Results": [' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_000 + b"]}", "nested too deeply",
     "trivy image"),
    (b'{"SchemaVersion": 2, "ArtifactName": ' + b"9" * 5000 + b"}", "a number too long", "trivy ... --format json"),
    (b'{"SchemaVersion": 2, "ArtifactName": NaN, "Results": []}', "NaN is not a JSON number", "--format json"),
    (b'{"SchemaVersion": 2, "Results": [], "X": -Infinity}', "-Infinity is not a JSON number", "--format json"),
], ids=["utf-16", "utf-16-le", "utf-32", "utf-8-bom", "binary", "gzip", "zstd", "empty", "blank", "deep-lists",
        "deep-maps", "5000-digits", "nan", "infinity"])
def test_encodings_and_hostile_sizes_are_named(raw, words, fix):
    with pytest.raises(RapidshipError) as err:
        read_report(raw, "/in/trivy.json")
    assert err.value.where == "/in/trivy.json" and words in err.value.problem and fix in err.value.fix
    assert "not a trivy JSON report" in err.value.problem


def test_huge_numbers_and_deep_junk_where_the_gate_does_not_look_are_left_alone():
    doc = changed(GOOD, ("Results", 0, "Vulnerabilities", 0, "CVSS"), {"nvd": {"V3Score": 1e308, "x": 10 ** 300}})
    doc = changed(doc, ("Results", 0, "Junk"), json.loads("[" * 500 + "]" * 500))
    data = read_report(json.dumps(doc), "r.json")
    assert [f.id for f in findings(data)] == ["CVE-2099-1", "aws-access-key-id", "DS002"]
    big = changed(GOOD, vuln(("Title",)), 1e999)  # json.dumps writes Infinity: not JSON
    with pytest.raises(RapidshipError, match="Infinity is not a JSON number"):
        read_report(json.dumps(big), "r.json")
    huge_title = changed(GOOD, vuln(("Title",)), [[[[[[[["deep"]]]]]]]] * 1000)
    with pytest.raises(RapidshipError) as err:
        read_report(json.dumps(huge_title), "r.json")
    assert len(err.value.message) < 600  # the bad value is shown cut short, not in full


# ---- allowlist dates ----

BAD_DATES = ["2027-13-45", "2027-02-30", "2027-00-10", "2027-3-31", "soon", "86400", "20270331", "2027-03-31T10:00:00",
             "'2027-13-45'", "'31.03.2027'", "[2027, 3, 31]", "null", "true"]


@pytest.mark.parametrize("expires", BAD_DATES)
def test_an_allowlist_expiry_that_is_no_date_names_file_path_and_fix(tmp_path, expires):
    policy = tmp_path / "trivy.yaml"
    policy.write_text("defaults:\n  allowlist:\n    - id: CVE-2099-1\n      reason: not reachable from the API\n"
                      f"      expires: {expires}\n")
    with pytest.raises(ConfigError) as err:
        load_policy(policy)
    assert err.value.where.startswith(f"{policy}: defaults.allowlist[0].expires")
    assert "is not a date" in err.value.problem and "YYYY-MM-DD" in err.value.fix


@pytest.mark.parametrize("expires", ["2027-13-45", "soon"])
def test_an_expiry_in_a_variant_override_is_named_too(expires):
    text = ("variants:\n  cpu-debian12:\n    allowlist:\n      - id: CVE-1\n        reason: only this variant for now\n"
            f"        expires: {expires}\n")
    with pytest.raises(ConfigError) as err:
        parse_policy(text, "p.yaml", ["cpu-debian12"])
    assert err.value.where.startswith("p.yaml: variants.cpu-debian12.allowlist[0].expires")


def test_a_real_expiry_is_read_whether_yaml_made_it_a_date_or_a_string():
    for expires in ("2027-03-31", "'2027-03-31'", "' 2027-03-31 '"):
        spec = parse_policy(f"defaults: {{allowlist: [{{id: CVE-1, reason: not reachable from the API, "
                            f"expires: {expires}}}]}}", "p.yaml")
        assert spec.defaults.allowlist[0].expires == date(2027, 3, 31)


def test_any_value_yaml_cannot_build_is_named_with_its_line():
    with pytest.raises(ConfigError) as err:
        parse_policy("defaults:\n  max_db_age_days: !!int seven\n", "p.yaml")
    assert err.value.where == "p.yaml: defaults.max_db_age_days (line 2)" and "cannot be read as int" in err.value.problem


# ---- through the task, as a user runs it ----

@pytest.mark.parametrize("content, words", [
    (json.dumps(changed(GOOD, vuln(("VulnerabilityID",)), drop=True)).encode(), "without its `VulnerabilityID`"),
    (json.dumps(changed(GOOD, ("Metadata", "OS"), "debian")).encode(), "Metadata.OS"),
    (json.dumps(GOOD).encode("utf-16"), "UTF-16 text"),
], ids=["no-vulnerability-id", "os-a-string", "utf-16"])
def test_invoke_gate_prints_one_error_and_exits_2(tmp_path, content, words):
    report = tmp_path / "trivy.json"
    report.write_bytes(content)
    (tmp_path / "decision.json").write_text('{"passed": true}')  # left over from an earlier run
    proc = invoke("scan-report", "--report", str(report), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("error:") == 1 and str(report) in proc.stderr and words in proc.stderr
    assert "fix:" in proc.stderr and not (tmp_path / "decision.json").exists()


def test_invoke_gate_names_a_bad_expiry(tmp_path):
    report, policy = tmp_path / "trivy.json", tmp_path / "trivy.yaml"
    report.write_text(json.dumps(GOOD))
    policy.write_text("defaults:\n  allowlist:\n    - id: CVE-2099-1\n      reason: not reachable from the API\n"
                      "      expires: 2027-13-45\n")
    proc = invoke("scan-report", "--report", str(report), "--policy", str(policy), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{policy}: defaults.allowlist[0].expires" in proc.stderr and "YYYY-MM-DD" in proc.stderr


@pytest.mark.parametrize("source", ["/dev/zero", "/dev/null"])
def test_a_report_that_is_not_a_regular_file_is_refused_not_read_forever(tmp_path, source):
    from pathlib import Path

    from rapidship.gates.scan import _read_bytes

    with pytest.raises(RapidshipError, match="is not a regular file"):
        _read_bytes(Path(source), "--report")
