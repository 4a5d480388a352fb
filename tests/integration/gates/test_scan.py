"""The trivy gate on real scans: the real trivy binary, the real cpu-debian12 image, and a small
vulnerability DB written by the suite for packages that dpkg really installed in that image.

One DB (and trivy's layer cache) per session keeps repeated scans of the same image fast.
"""

from __future__ import annotations

import json
import secrets
import shutil
import string
import subprocess
import uuid
from datetime import date, timedelta
from pathlib import Path

import jsonschema
import pytest

pytestmark = pytest.mark.docker
from support.commands import ROOT  # noqa: E402

VARIANT = "cpu-debian12"
GITLAB_REQUIRED = json.loads((ROOT / "tests" / "data" / "gitlab-container-scanning-15-required.json").read_text())
OFFLINE = ("--skip-db-update", "--offline-scan")


def invoke(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a task as a user would (as conftest's helper does; the exit code is part of the contract here)."""
    proc = subprocess.run(["invoke", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"invoke {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def dpkg_sources(status: str) -> dict[str, tuple[str, str, str]]:
    """dpkg status -> {source package: (binary package, binary version, source version)}.

    trivy looks Debian advisories up by source package and compares the source version."""
    out: dict[str, tuple[str, str, str]] = {}
    for stanza in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        if "Package" not in fields or "install ok installed" not in fields.get("Status", ""):
            continue
        source, version = fields["Package"], fields["Version"]
        if "Source" in fields:
            parts = fields["Source"].split()
            source = parts[0]
            version = parts[1].strip("()") if len(parts) > 1 else version
        out.setdefault(source, (fields["Package"], fields["Version"], version))
    return out


@pytest.fixture(scope="session")
def planted(engine, cpu_image):
    """Two source packages really installed in the image: one gets a fixable MEDIUM, one an unfixed HIGH."""
    status = engine.containers.run(cpu_image.ref, entrypoint=["cat"], command=["/var/lib/dpkg/status"], remove=True,
                                   name=f"rapidship-test-{uuid.uuid4().hex[:10]}", network_disabled=True).decode()
    sources = dpkg_sources(status)
    fixable = next(s for s in ("gzip", "tar", "sed", "grep", *sorted(sources)) if s in sources)
    unfixed = next(s for s in ("zlib", "bzip2", "xz-utils", *sorted(sources)) if s in sources and s != fixable)
    return {"fixable": (fixable, *sources[fixable]), "unfixed": (unfixed, *sources[unfixed])}


@pytest.fixture(scope="session")
def trivy_cache(planted, tmp_path_factory) -> Path:
    """A trivy cache dir with the suite's DB, written through the user-facing task."""
    cache = tmp_path_factory.mktemp("trivy-cache")
    (src, _, _, version), (unfixed, *_) = planted["fixable"], planted["unfixed"]
    advisories = cache / "advisories.yaml"
    advisories.write_text(json.dumps([  # JSON is YAML
        {"source": "debian 12", "package": src, "id": "CVE-2099-1001", "severity": "MEDIUM", "fixed": f"{version}+fix1"},
        {"source": "debian 12", "package": src, "id": "CVE-2099-1003", "severity": "LOW", "fixed": f"{version}+fix1"},
        {"source": "debian 12", "package": unfixed, "id": "CVE-2099-1002", "severity": "HIGH"},
    ]))
    invoke("trivy-db", "--advisories", str(advisories), "--cache-dir", str(cache))
    return cache


def write_policy(path: Path, threshold="MEDIUM", ignore_unfixed=False, allow_until: date | None = None) -> Path:
    allow = ([{"id": "CVE-2099-1001", "reason": "planted by the test suite; accepted for this test",
               "expires": allow_until.isoformat()}] if allow_until else [])
    path.write_text(json.dumps({"defaults": {"threshold": threshold, "ignore_unfixed": ignore_unfixed, "allowlist": allow}}))
    return path


def record(out: Path) -> dict:
    return json.loads((out / "decision.json").read_text())


def outcomes(rec: dict) -> dict[str, str]:
    return {v["id"]: v["outcome"] for v in rec["verdicts"]}


@pytest.fixture(scope="session")
def default_scan(cpu_image, trivy_cache, tmp_path_factory):
    """`invoke scan --variant cpu-debian12` with the committed policy (threshold MEDIUM)."""
    out = tmp_path_factory.mktemp("scan-default")
    proc = invoke("scan", "--variant", VARIANT, "--arch", "amd64", "--cache-dir", str(trivy_cache), *OFFLINE,
                  "--out", str(out), check=False)
    return proc, out


def test_gate_fails_on_the_planted_vulnerability_at_the_threshold(default_scan, planted):
    proc, out = default_scan
    _, binary, installed, source_version = planted["fixable"]
    assert proc.returncode == 1, proc.stderr
    assert (f"CVE-2099-1001 in {binary} {installed} (fixed in {source_version}+fix1): MEDIUM is at or above the "
            "threshold MEDIUM") in " ".join(proc.stderr.split())
    rec = record(out)
    assert rec["passed"] is False and rec["trivy_version"] == "0.59.1" and rec["os"].startswith("debian 12")
    assert outcomes(rec)["CVE-2099-1001"] == "fail"
    assert outcomes(rec)["CVE-2099-1002"] == "fail"  # HIGH, no fix, ignore_unfixed off
    assert outcomes(rec)["CVE-2099-1003"] == "below-threshold"
    assert rec["counts"]["MEDIUM"] == {"fail": 1}
    assert "error: scan of " in proc.stderr and "fix: fix the image, or accept a finding" in proc.stderr
    # the summary table by severity went to stderr
    assert "severity" in proc.stderr and "allowlisted" in proc.stderr and "CRITICAL" in proc.stderr


def test_scan_writes_trivy_json_sbom_and_a_valid_gitlab_report(default_scan, planted, cpu_image):
    from rapidship.sign.provenance import sbom_subject

    _, out = default_scan
    _, binary, version, _ = planted["fixable"]
    trivy = json.loads((out / "trivy.json").read_text())
    assert trivy["SchemaVersion"] == 2 and trivy["Metadata"]["OS"]["Family"] == "debian"
    sbom = json.loads((out / "sbom.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX"
    # decision and SBOM are bound to the image trivy really read (its config digest), which push,
    # sign, verify and promote compare with the image they publish
    assert record(out)["image_id"] == trivy["Metadata"]["ImageID"] == sbom_subject(sbom) == cpu_image.image_id
    assert {"name": binary, "version": version} in [{"name": c.get("name"), "version": c.get("version")}
                                                   for c in sbom["components"]]
    gitlab = json.loads((out / "gl-container-scanning-report.json").read_text())
    jsonschema.validate(gitlab, GITLAB_REQUIRED)
    ids = {v["identifiers"][0]["value"]: v for v in gitlab["vulnerabilities"]}
    assert set(ids) == {"CVE-2099-1001", "CVE-2099-1002", "CVE-2099-1003"}
    assert ids["CVE-2099-1001"]["location"]["dependency"] == {"package": {"name": binary}, "version": version}


def test_rendered_dockerfile_gets_trivys_misconfiguration_checks(default_scan):
    _, out = default_scan
    config = json.loads((out / "trivy-config.json").read_text())
    summary = config["Results"][0]["MisconfSummary"]
    assert summary["Successes"] >= 20  # trivy's embedded Dockerfile checks ran offline
    rec = record(out)
    misconf = [v for v in rec["verdicts"] if v["kind"] == "misconfiguration"]
    assert misconf and all(v["outcome"] != "fail" for v in misconf)  # our Dockerfile passes at MEDIUM
    assert not [v for v in rec["verdicts"] if v["kind"] == "secret"]  # and the image carries no secret


def test_gate_passes_below_the_threshold(cpu_image, trivy_cache, tmp_path):
    policy = write_policy(tmp_path / "p.yaml", threshold="CRITICAL")
    proc = invoke("scan", "--variant", VARIANT, "--arch", "amd64", "--cache-dir", str(trivy_cache), *OFFLINE,
                  "--policy", str(policy), "--out", str(tmp_path / "out"), check=False)
    assert proc.returncode == 0, proc.stderr
    rec = record(tmp_path / "out")
    assert rec["passed"] and set(outcomes(rec).values()) == {"below-threshold"}


def test_gate_passes_with_a_valid_allowlist_entry(cpu_image, trivy_cache, tmp_path):
    policy = write_policy(tmp_path / "p.yaml", ignore_unfixed=True, allow_until=date.today() + timedelta(days=30))
    proc = invoke("scan", "--variant", VARIANT, "--arch", "amd64", "--cache-dir", str(trivy_cache), *OFFLINE,
                  "--policy", str(policy), "--out", str(tmp_path / "out"), check=False)
    assert proc.returncode == 0, proc.stderr
    rec = record(tmp_path / "out")
    assert outcomes(rec)["CVE-2099-1001"] == "allowlisted" and outcomes(rec)["CVE-2099-1002"] == "unfixed-ignored"
    assert any("planted by the test suite" in v["reason"] for v in rec["verdicts"])


def test_gate_fails_again_when_the_allowlist_entry_has_expired(default_scan, tmp_path):
    _, scanned = default_scan
    policy = write_policy(tmp_path / "p.yaml", ignore_unfixed=True, allow_until=date.today() - timedelta(days=1))
    proc = invoke("scan-report", "--report", str(scanned / "trivy.json"), "--policy", str(policy), "--out", str(tmp_path / "out"),
                  check=False)
    assert proc.returncode == 1
    rec = record(tmp_path / "out")
    assert [r for r in rec["reasons"] if "CVE-2099-1001" in r and "expired on" in r]
    assert outcomes(rec)["CVE-2099-1002"] == "unfixed-ignored"
    assert (tmp_path / "out" / "sbom.cdx.json").is_file() and (tmp_path / "out" / "gl-container-scanning-report.json").is_file()


def test_ignore_unfixed_decides_the_unfixed_finding(default_scan, tmp_path):
    _, scanned = default_scan
    valid = date.today() + timedelta(days=30)
    strict = invoke("scan-report", "--report", str(scanned / "trivy.json"), "--out", str(tmp_path / "strict"),
                    "--policy", str(write_policy(tmp_path / "s.yaml", allow_until=valid)), check=False)
    assert strict.returncode == 1
    reasons = record(tmp_path / "strict")["reasons"]
    assert len(reasons) == 1 and "CVE-2099-1002" in reasons[0] and "no fix published" in reasons[0]
    lenient = invoke("scan-report", "--report", str(scanned / "trivy.json"), "--out", str(tmp_path / "lenient"),
                     "--policy", str(write_policy(tmp_path / "l.yaml", ignore_unfixed=True, allow_until=valid)), check=False)
    assert lenient.returncode == 0, lenient.stderr


@pytest.mark.parametrize("case", ["no-db", "download-impossible", "corrupt-db"])
def test_scan_fails_closed_without_a_usable_db(cpu_image, trivy_cache, tmp_path, case):
    cache = tmp_path / "cache"
    flags = OFFLINE
    if case == "download-impossible":
        flags = ("--db-repository", "127.0.0.1:9/trivy-db")  # nothing listens there: trivy cannot fetch a DB
    if case == "corrupt-db":
        (cache / "db").mkdir(parents=True)
        (cache / "db" / "metadata.json").write_text((trivy_cache / "db" / "metadata.json").read_text())
        (cache / "db" / "trivy.db").write_bytes(b"\0" * 8192)
    out = tmp_path / "out"
    proc = invoke("scan", "--variant", VARIANT, "--arch", "amd64", "--cache-dir", str(cache), *flags,
                  "--out", str(out), check=False)
    assert proc.returncode == 2, proc.stderr
    message = " ".join(proc.stderr.split())
    expected = {"no-db": "no vulnerability DB in", "download-impossible": "and trivy could not download one",
                "corrupt-db": "trivy failed"}[case]
    assert expected in message and "Traceback" not in proc.stderr
    assert not (out / "decision.json").exists()


def test_a_stale_db_fails_the_gate(cpu_image, trivy_cache, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(trivy_cache, cache)  # with trivy's layer cache: no cold re-scan
    meta = json.loads((cache / "db" / "metadata.json").read_text())
    meta["UpdatedAt"] = (date.today() - timedelta(days=30)).isoformat() + "T00:00:00Z"
    (cache / "db" / "metadata.json").write_text(json.dumps(meta))
    policy = write_policy(tmp_path / "p.yaml", threshold="CRITICAL")  # nothing else fails
    proc = invoke("scan", "--variant", VARIANT, "--arch", "amd64", "--cache-dir", str(cache), *OFFLINE,
                  "--policy", str(policy), "--out", str(tmp_path / "out"), check=False)
    assert proc.returncode == 1, proc.stderr
    assert "30 days ago (max_db_age_days: 7)" in record(tmp_path / "out")["reasons"][0]


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"SchemaVersion": 2, "Results": "none"}'])
def test_gate_fails_closed_on_an_unreadable_report(tmp_path, content):
    report = tmp_path / "trivy.json"
    report.write_bytes(content)
    (tmp_path / "decision.json").write_text('{"passed": true}')  # left over from an earlier run
    proc = invoke("scan-report", "--report", str(report), check=False)
    assert proc.returncode == 2 and "not a trivy JSON report" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "decision.json").exists()
    missing = invoke("scan-report", "--report", str(tmp_path / "absent.json"), check=False)
    assert missing.returncode == 2 and "cannot be read" in missing.stderr


@pytest.fixture
def image_with_a_secret(engine, cpu_image, unique_name, tmp_path):
    """A small image FROM the local Debian base with a (fake, freshly made) AWS key in a layer."""
    base = cpu_image.extra["bases"]["RUNTIME_BASE"]["ref"]  # the base this run made (by its own name)
    key = "AKIA" + "".join(secrets.choice(string.ascii_uppercase + "234567") for _ in range(16))
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "credentials").write_text(f"[default]\naws_access_key_id = {key}\n")
    (ctx / "Dockerfile").write_text(f"FROM {base}\nCOPY credentials /etc/app/credentials\n")
    engine.images.build(path=str(ctx), tag=f"{unique_name}:1", rm=True, forcerm=True)
    yield f"{unique_name}:1", key, ctx / "Dockerfile"
    engine.images.remove(f"{unique_name}:1", force=True)


def test_a_planted_secret_is_found_fails_the_gate_and_is_never_written_out(engine, image_with_a_secret, trivy_cache,
                                                                          tmp_path):
    ref, key, dockerfile = image_with_a_secret
    tar = tmp_path / "image.tar"  # scanned as a saved tar, the way an export or another job hands it over
    with open(tar, "wb") as f:
        for chunk in engine.images.get(ref).save(named=True):
            f.write(chunk)
    out = tmp_path / "out"
    proc = invoke("scan", "--tar", str(tar), "--dockerfile", str(dockerfile), "--cache-dir", str(trivy_cache), *OFFLINE,
                  "--out", str(out), check=False)
    assert proc.returncode == 1, proc.stderr
    rec = record(out)
    assert "secret aws-access-key-id in /etc/app/credentials: a secret (CRITICAL) is in the image" in rec["reasons"]
    # the test image's own Dockerfile has no USER: trivy's misconfiguration check fails it too
    assert [r for r in rec["reasons"] if r.startswith("misconfiguration DS002")]
    for path in out.iterdir():
        assert key not in path.read_text(errors="replace"), f"the secret leaked into {path.name}"
    assert key not in proc.stdout + proc.stderr
