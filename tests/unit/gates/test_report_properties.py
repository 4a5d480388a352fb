"""Property: whatever `invoke scan-report --report` is handed (any JSON, any bytes, a valid report with one
part dropped or changed), reading it ends in a RapidshipError or in a report the whole gate
judges without an exception: findings, facts, decision, GitLab report, record and the printout."""

from __future__ import annotations

import copy
import json
import tempfile
from datetime import date
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rapidship import console
from rapidship.stages.scan import _verdict
from rapidship.errors import GateFailure, RapidshipError
from rapidship.gates.policy import SEVERITIES, decide, findings, parse_policy, read_report, resolve, scan_facts
from rapidship.gates.scan import gate

TODAY = date(2026, 6, 1)
POLICY = resolve(parse_policy("defaults: {allowlist: [{id: CVE-2099-1, reason: not reachable from the API, "
                              "expires: 2027-01-01}]}", "p.yaml"), "p.yaml", None)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# strings as hostile as a report can make them: rich markup, escape sequences, unpaired surrogates
nasty = st.sampled_from(["[/]", "[bold]x", "\x1b]0;title\x07", "\x1b[31m", "\ud800", "a\udfffb", "\n", ":warning:",
                         "", " ", "CRITICAL", "high", "FAIL", "\u202e"])
text = st.one_of(st.text(max_size=12), nasty)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), text)
json_values = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                           st.dictionaries(text, kids, max_size=4)), max_leaves=25)


def report_strategies(junk: bool):
    """Trivy and Harbor reports. With `junk`, any part may be any JSON value instead of its type."""

    def either(valid):
        return st.one_of(valid, valid, valid, json_values) if junk else valid

    maybe_text = st.one_of(st.none(), text)
    severity = st.one_of(st.sampled_from([*SEVERITIES, "High", "low", "BOGUS"]), maybe_text)
    layer = st.fixed_dictionaries({}, optional={"DiffID": either(maybe_text)})
    vulnerability = st.fixed_dictionaries({"VulnerabilityID": either(text if junk else name)}, optional={
        "PkgName": either(maybe_text), "InstalledVersion": either(maybe_text), "FixedVersion": either(maybe_text),
        "Status": either(maybe_text), "Severity": either(severity), "Title": either(maybe_text),
        "Layer": either(layer), "CVSS": json_values})
    secret = st.fixed_dictionaries({}, optional={"RuleID": either(maybe_text), "Severity": either(severity),
                                                 "Title": either(maybe_text), "Layer": either(layer)})
    misconfiguration = st.fixed_dictionaries(
        {"Status": either(st.sampled_from(["FAIL", "PASS", "EXCEPTION"])), "ID": either(text if junk else name)},
        optional={"AVDID": either(text), "Severity": either(severity), "Title": either(maybe_text)})

    def entries(item):
        return either(st.one_of(st.none(), st.lists(either(item), max_size=3)))

    result = st.fixed_dictionaries({}, optional={
        "Target": either(maybe_text), "Class": json_values, "Packages": entries(st.fixed_dictionaries({"Name": text})),
        "Vulnerabilities": entries(vulnerability), "Secrets": entries(secret),
        "Misconfigurations": entries(misconfiguration)})
    trivy = st.fixed_dictionaries({"SchemaVersion": either(st.just(2))}, optional={
        "ArtifactName": either(maybe_text), "ArtifactType": either(st.sampled_from(["container_image", "filesystem"])),
        "Metadata": either(st.fixed_dictionaries({}, optional={"OS": either(st.fixed_dictionaries({}, optional={
            "Family": either(maybe_text), "Name": either(maybe_text)}))})),
        "Trivy": either(st.fixed_dictionaries({}, optional={"Version": either(maybe_text)})),
        "Results": either(st.lists(either(result), max_size=4))})
    harbor_vulnerability = st.fixed_dictionaries({"id": either(text if junk else name)}, optional={
        k: either(maybe_text) for k in ("package", "version", "fix_version", "severity", "description")})
    harbor = st.fixed_dictionaries({"application/vnd.security.vulnerability.report; version=1.1": either(
        st.fixed_dictionaries({"vulnerabilities": either(st.lists(either(harbor_vulnerability), max_size=4))}, optional={
            "artifact": either(st.fixed_dictionaries({}, optional={"repository": either(maybe_text),
                                                                  "digest": either(maybe_text)})),
            "scanner": either(st.fixed_dictionaries({}, optional={"version": either(maybe_text)}))}))})
    return st.one_of(trivy, harbor)


# a finding's name: text with something visible in it, and no unpaired surrogate
name = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(str.strip) | st.sampled_from(
    ["CVE-2099-1", "[/]", "x\x1b[31m", ":warning:"])
any_report = report_strategies(junk=True)
well_typed_report = report_strategies(junk=False)

VALID = {
    "SchemaVersion": 2, "ArtifactName": "img:1", "ArtifactType": "container_image", "Trivy": {"Version": "0.59.1"},
    "Metadata": {"OS": {"Family": "debian", "Name": "12.15"}},
    "Results": [
        {"Target": "img:1 (debian 12.15)", "Class": "os-pkgs", "Packages": [{"Name": "gzip"}],
         "Vulnerabilities": [{"VulnerabilityID": "CVE-2099-1", "PkgName": "gzip", "InstalledVersion": "1.12-1",
                              "FixedVersion": "1.12-2", "Severity": "MEDIUM", "Title": "gzip: bad",
                              "Layer": {"DiffID": "sha256:b"}},
                             {"VulnerabilityID": "CVE-2099-2", "PkgName": "zlib1g", "Severity": "HIGH"}]},
        {"Target": "/etc/creds", "Class": "secret", "Secrets": [{"RuleID": "aws-access-key-id", "Severity": "LOW"}]},
        {"Target": "Dockerfile", "Class": "config",
         "Misconfigurations": [{"ID": "DS002", "Severity": "HIGH", "Title": "root", "Status": "FAIL"},
                               {"ID": "DS001", "Severity": "LOW", "Status": "PASS"}]}]}


def paths(node, prefix=()):
    """Every place in a document: the keys and indexes leading to it."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield (*prefix, key)
        yield from paths(child, (*prefix, key))


VALID_PATHS = list(paths(VALID))


@st.composite
def mutated(draw):
    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        live = list(paths(doc))
        if not live:
            break
        *parents, last = draw(st.sampled_from(live))
        node = doc
        for p in parents:
            node = node[p]
        if draw(st.booleans()):
            del node[last]
        else:
            node[last] = draw(json_values)
    return doc


def judged(raw: bytes | str) -> None:
    """read_report refuses it, or everything after it works."""
    try:
        data = read_report(raw, "r.json")
    except RapidshipError as err:
        assert err.where.startswith("r.json") and err.problem and err.fix
        return
    assert isinstance(data, dict)
    found, facts = findings(data), scan_facts(data)
    d = decide(found, facts, POLICY, TODAY)
    assert d.passed == (not d.problems and all(v.outcome != "fail" for v in d.verdicts))
    assert all(f.severity in SEVERITIES and isinstance(f.id, str) for f in found)
    json.dumps(d.counts()), json.dumps(d.reasons).encode()


def gated(doc) -> None:
    """The whole task's path on a report file: gate() and the printout."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "trivy.json"
        report.write_text(json.dumps(doc))
        try:
            record = gate(report, None, POLICY, Path(tmp) / "out", None, today=TODAY)
        except GateFailure:
            raise
        except RapidshipError:
            assert not (Path(tmp) / "out" / "decision.json").exists()
            return
        json.loads((Path(tmp) / "out" / "decision.json").read_text())
        with console.err.capture():
            try:
                _verdict(record)
            except GateFailure:
                assert not record.passed
            else:
                assert record.passed


@SETTINGS
@given(json_values)
def test_any_json_document_is_refused_or_judged(doc):
    judged(json.dumps(doc))


@SETTINGS
@given(any_report)
def test_any_report_shaped_document_is_refused_or_judged(doc):
    judged(json.dumps(doc))


@SETTINGS
@given(well_typed_report)
def test_a_report_of_the_right_types_is_judged_whatever_its_strings_say(doc):
    try:
        read_report(json.dumps(doc), "r.json")
    except RapidshipError as err:  # the only refusals left: unpaired surrogates, no SchemaVersion, a Harbor body
        assert "surrogate" in err.problem or "schema version 2" in err.problem, err.message
    gated(doc)


@SETTINGS
@given(st.one_of(st.binary(max_size=200), st.builds(lambda b, enc: json.dumps(VALID).encode(enc)[:b],
                                                    st.integers(0, 2000), st.sampled_from(
                                                        ["utf-8", "utf-16", "utf-16-le", "utf-32", "utf-8-sig"]))))
def test_any_bytes_are_refused_or_judged(raw):
    judged(raw)


@SETTINGS
@given(mutated())
def test_a_valid_report_with_parts_dropped_or_changed_is_refused_or_judged(doc):
    judged(json.dumps(doc))
    gated(doc)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_report)
def test_the_whole_gate_and_its_printout_never_raise_anything_else(doc):
    gated(doc)
