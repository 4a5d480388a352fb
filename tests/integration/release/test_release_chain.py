"""`invoke release` end to end on the real cpu-debian12 image: the real engine, trivy, a loopback
registry, signing, discs and the report, as a user runs it.

One project folder of this module (the checkout linked in, tasks.py copied, its own build/ and a
git repository of its own, committed at a fixed time so its commit, and so the image's id, is the
same on every run), one registry, one key. The runs follow each other as a release host's would:
the first release; the same again (every stage skipped); a scan made to fail by a stricter policy
(the chain stops there, naming it, the records before it stay current); the resume once the policy
is back; a delta release (--since the first disc); a disc whose ISO was removed (export runs
again). The test run's cpu_image fixture already filled the build cache, so the build here only
relabels (its own commit) and normalises.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rapidship.release.plan import STAGES
from support.commands import CPU_VARIANT, ROOT

pytestmark = pytest.mark.docker

ARCH = "amd64"
PASSWORD = "release-chain-test"
COMMIT_DATE = "2026-12-01T00:00:00+00:00"
OFFLINE = ("--skip-db-update", "--offline-scan")


def git(folder: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_DATE=COMMIT_DATE, GIT_COMMITTER_DATE=COMMIT_DATE)
    return subprocess.run(["git", "-c", "user.name=release-test", "-c", "user.email=release@test.invalid", *args],
                          cwd=folder, env=env, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def project(engine, cpu_image, registry, tmp_path_factory):
    folder = tmp_path_factory.mktemp("release")
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "build", "tasks.py") and not entry.name.startswith(".pytest"):
            (folder / entry.name).symlink_to(entry)
    shutil.copy2(ROOT / "tasks.py", folder / "tasks.py")
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "release chain test")
    suite_run = os.environ["RAPIDSHIP_RUN_ID"]
    run_id = suite_run + "rel"  # its own engine names: cpu_image keeps its tag
    bases = folder / "build" / "bases"  # the bases cpu_image was built on, as this run's records
    bases.mkdir(parents=True)
    for made in (ROOT / "build" / "bases").glob(f"*-{suite_run}.json"):
        shutil.copy2(made, bases / (made.name.removesuffix(f"-{suite_run}.json") + f"-{run_id}.json"))
    docker_config = folder / "docker-config"
    docker_config.mkdir()
    env = dict(os.environ, RAPIDSHIP_RUN_ID=run_id, RAPIDSHIP_REGISTRY=registry.host,
               RAPIDSHIP_REGISTRY_USER=registry.user, RAPIDSHIP_REGISTRY_PASSWORD=registry.password,
               RAPIDSHIP_REGISTRY_CA=str(registry.ca), DOCKER_CONFIG=str(docker_config),
               RAPIDSHIP_SIGNING_PASSWORD=PASSWORD, TMPDIR=str(folder))
    env.pop("RAPIDSHIP_SIGNING_KEY", None)
    ok(run(folder, env, "keys.generate", "--out", "keys"))
    ok(run(folder, env, "trivy-db", "--advisories", "docs/examples/quickstart-advisories.yaml", "--cache-dir", "cache"))
    yield folder, env
    refs = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                          text=True).stdout.split()
    mine = [r for r in refs if r.endswith(f"-{run_id}")]
    if mine:
        subprocess.run(["docker", "rmi", *mine], capture_output=True)


def run(folder: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["invoke", *args], cwd=folder, env=env, capture_output=True, text=True, check=False)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def release(project, *flags: str, policy: str = "policy/trivy.yaml") -> tuple[subprocess.CompletedProcess, dict, float]:
    folder, env = project
    start = time.monotonic()
    proc = run(folder, env, "release", "--variant", CPU_VARIANT, "--arch", ARCH, "--key", "keys/cosign.key",
               "--policy", policy, "--cache-dir", "cache", *OFFLINE, *flags)
    seconds = time.monotonic() - start
    return proc, json.loads((folder / "build" / CPU_VARIANT / "release.json").read_text()), seconds


def verdicts(record: dict) -> dict[str, str]:
    return {s["name"]: s["verdict"] for s in record["stages"]}


@pytest.fixture(scope="module")
def first(project):
    return release(project)


def test_the_first_release_runs_every_stage_in_order(first, project):
    proc, record, seconds = first
    ok(proc)
    assert [s["name"] for s in record["stages"]] == list(STAGES)
    assert verdicts(record) == dict.fromkeys(STAGES, "pass"), proc.stderr
    assert record["passed"] is True
    folder = project[0]
    build = json.loads((folder / "build" / CPU_VARIANT / f"build-{ARCH}.json").read_text())
    export = json.loads((folder / record["stages"][STAGES.index("export")]["record"]).read_text())
    verified = json.loads((folder / "build" / CPU_VARIANT / "export-verify.json").read_text())
    assert [i["image_id"] for i in export["images"]] == [build["image_id"]]  # the disc carries the built image
    assert verified["images"] == {build["image_id"]: build["image_id"]}  # served back as shipped
    by_name = {s["name"]: s for s in record["stages"]}
    assert by_name["gates"]["read_bytes"] == build["size_bytes"]  # the image the gates read, by its record
    assert by_name["export"]["written_bytes"] >= sum(v["iso_bytes"] for v in export["volumes"])
    # the live timeline: a line as each stage starts and as it passes, in order
    started = [proc.stderr.index(f"release {i + 1}/{len(STAGES)} {name}: runs") for i, name in enumerate(STAGES)]
    assert started == sorted(started)
    # the table at the end: one row per stage with its time, bytes and verdict
    table = proc.stderr[proc.stderr.index("# release cpu-debian12 amd64"):]
    assert [line.split("\t")[:2] for line in table.splitlines()[2:2 + len(STAGES)]] == [[s, "pass"] for s in STAGES]
    print(f"first release: {seconds:.1f} s; " + ", ".join(f"{s['name']} {s['seconds']} s" for s in record["stages"]))


def test_the_release_and_its_page_say_one_verdict_in_the_same_words(first, project):
    """The CPU image's spill smoke ran as a stage of the release, so nothing is left but Harbor's scan,
    which only a site runs: named with its command on both, never passed."""
    import re

    proc, record, _ = first
    assert record["stages"][STAGES.index("smoke")]["verdict"] == "pass"
    assert f"release {CPU_VARIANT} ({ARCH}): released\n" in proc.stderr, proc.stderr
    page = (project[0] / "build" / "report" / "index.html").read_text()
    said = re.search(r'id="verdict">\s*<b>\S+ ([^<]+)</b>', page).group(1)
    assert said == "released"
    harbor = f"invoke harbor.scan --variant {CPU_VARIANT}"
    assert harbor in proc.stderr and harbor in page


def test_a_rerun_skips_every_stage_and_says_so(first, project):
    proc, record, seconds = release(project)
    ok(proc)
    assert verdicts(record) == dict.fromkeys(STAGES, "skipped"), proc.stderr
    for i, name in enumerate(STAGES):
        assert f"release {i + 1}/{len(STAGES)} {name}: skipped, its record is current" in proc.stderr
    assert record["stages"][0]["bound"] == {ARCH: first[1]["stages"][0]["bound"][ARCH]}
    page = (project[0] / "build" / "report" / "index.html").read_text()  # the page shows this run, not the first
    assert f"started {record['started_at']}" in page and "nothing to do" in page
    assert seconds < 30, seconds  # checks only: nothing is built, scanned, pushed or written


def test_a_stage_that_says_no_stops_the_chain_and_a_rerun_resumes_there(first, project):
    folder = project[0]
    strict = folder / "strict-policy.yaml"  # the quickstart DB's LOW finding now fails
    strict.write_text(json.dumps({"defaults": {"threshold": "LOW"}}))
    proc, record, _ = release(project, policy=str(strict))
    assert proc.returncode == 1, proc.stderr
    decision = f"build/{CPU_VARIANT}/scan-{ARCH}/decision.json"
    error = proc.stderr[proc.stderr.index("error:"):]
    assert f"release {CPU_VARIANT}: stage scan: said no (its record: {decision})" in error
    assert "resumes at scan" in error and "Traceback" not in proc.stderr
    assert verdicts(record) == {"build": "skipped", "gates": "skipped", "scan": "FAIL", "push": "not run",
                                "smoke": "not run", "sign": "not run", "export": "not run", "export-verify": "not run",
                                "report": "not run"}
    assert record["stopped_at"] == "scan" and record["passed"] is False
    assert json.loads((folder / decision).read_text())["passed"] is False
    page = (folder / "build" / "report" / "index.html").read_text()  # where this run stopped, not the first's verdict
    assert f"started {record['started_at']}" in page and "not released" in page, page[:3000]

    proc, record, _ = release(project)  # the committed policy again: the chain resumes at scan
    ok(proc)
    assert verdicts(record) == {"build": "skipped", "gates": "skipped", "scan": "pass", "push": "skipped",
                                "smoke": "skipped", "sign": "skipped", "export": "skipped", "export-verify": "skipped",
                                "report": "pass"}, proc.stderr
    # push, sign and the disc are of the same image: still current; the report read a new decision


def test_a_delta_release_writes_a_delta_disc_and_verifies_it(first, project):
    folder = project[0]
    previous = folder / first[1]["stages"][STAGES.index("export")]["record"]
    proc, record, _ = release(project, "--since", str(previous))
    ok(proc)
    assert verdicts(record) == {"build": "skipped", "gates": "skipped", "scan": "skipped", "push": "skipped",
                                "smoke": "skipped", "sign": "skipped", "export": "pass", "export-verify": "pass", "report": "pass"}
    delta = json.loads((folder / record["stages"][STAGES.index("export")]["record"]).read_text())
    full = json.loads(previous.read_text())
    assert delta["extends"]["export_id"] == full["export_id"]
    assert delta["archive_bytes"] < full["archive_bytes"] / 10  # the layers stay with the host's copy
    assert record["since"] == str(previous)


def test_a_removed_disc_is_written_again(first, project):
    """The disc's ISO is the export's output: without it the export record is not current."""
    folder = project[0]
    proc, record, _ = release(project)
    disc = folder / record["stages"][STAGES.index("export")]["record"]
    iso = disc.parent / json.loads(disc.read_text())["volumes"][0]["iso"]
    iso.unlink()
    proc, record, _ = release(project)
    ok(proc)
    assert verdicts(record)["export"] == "pass" and verdicts(record)["push"] == "skipped"
    assert "missing, or not the" in record["stages"][STAGES.index("export")]["why"]
    assert iso.parent.is_dir() and any(iso.parent.glob("*.iso"))


def test_the_report_page_shows_the_release_timeline(first, project):
    """The page is fed the chain's own record: each stage's row carries its verdict from release.json."""
    import re

    folder = project[0]
    record = json.loads((folder / "build" / CPU_VARIANT / "release.json").read_text())
    page = (folder / "build" / "report" / "index.html").read_text()
    assert 'id="release"' in page
    rows = re.findall(r'<tr data-stage="([^"]+)">.*?<b>([^<]+)</b>', page)
    # the page shows the latest chain record as the chain ended, its own report stage too
    assert [name for name, _ in rows] == list(STAGES)
    assert dict(rows) == {s["name"]: s["verdict"] for s in record["stages"]}


def registry_call(registry, method: str, path: str) -> int:
    """One request to the test's registry (its CA, its user): the status code."""
    import requests

    resp = requests.request(method, f"https://{registry.host}{path}", auth=(registry.user, registry.password),
                            verify=str(registry.ca), headers={"Accept": "application/vnd.oci.image.manifest.v1+json, "
                                                                        "application/vnd.oci.image.index.v1+json"})
    return resp.status_code


def verify(project) -> subprocess.CompletedProcess:
    folder, env = project
    return run(folder, env, "verify", "--variant", CPU_VARIANT, "--key", "keys/cosign.pub")


def test_a_release_into_a_fresh_repository_pushes_and_signs_there(first, project, registry):
    """A push that runs again lands the same index digest (pushes are reproducible): sign is current
    only where that registry serves the signatures, so it signs there too, and verify passes."""
    proc, record, _ = release(project, "--registry", f"{registry.host}/fresh")
    ok(proc)
    assert verdicts(record)["push"] == "pass" and verdicts(record)["sign"] == "pass", proc.stderr
    assert "signed in" in record["stages"][STAGES.index("sign")]["why"], record["stages"][STAGES.index("sign")]
    ok(verify(project))


def test_a_signature_the_registry_lost_is_signed_again(first, project, registry):
    folder = project[0]
    ok(release(project, "--registry", f"{registry.host}/fresh")[0])
    signed = json.loads((folder / "build" / CPU_VARIANT / "sign.json").read_text())
    repo = signed["repository"]
    assert registry_call(registry, "DELETE", f"/v2/{repo}/manifests/{signed['arches'][ARCH]['signature']}") == 202
    assert registry_call(registry, "DELETE", f"/v2/{repo}/manifests/{signed['arches'][ARCH]['attestations']}") == 202
    assert verify(project).returncode != 0  # the registry lost them: verify fails closed
    proc, record, _ = release(project, "--registry", f"{registry.host}/fresh")
    ok(proc)
    assert verdicts(record)["push"] == "skipped" and verdicts(record)["sign"] == "pass", proc.stderr
    assert " serves no sig of " + ARCH in record["stages"][STAGES.index("sign")]["why"]
    ok(verify(project))


def test_an_index_the_registry_lost_is_pushed_again(first, project, registry):
    folder = project[0]
    ok(release(project, "--registry", f"{registry.host}/fresh")[0])
    pushed = json.loads((folder / "build" / CPU_VARIANT / "push.json").read_text())
    assert registry_call(registry, "DELETE",
                         f"/v2/{pushed['repository']}/manifests/{pushed['index_digest']}") == 202
    proc, record, _ = release(project, "--registry", f"{registry.host}/fresh")
    ok(proc)
    assert verdicts(record)["push"] == "pass", proc.stderr
    assert "the registry serves nothing under" in record["stages"][STAGES.index("push")]["why"]
    ok(verify(project))


def test_a_flipped_byte_in_the_disc_is_exported_again(first, project):
    """A disc whose ISO no longer hashes to export.json is not current, though its size is."""
    folder = project[0]
    proc, record, _ = release(project)
    ok(proc)
    disc = folder / record["stages"][STAGES.index("export")]["record"]
    volume = json.loads(disc.read_text())["volumes"][0]
    iso = disc.parent / volume["iso"]
    with open(iso, "r+b") as fh:
        fh.seek(volume["iso_bytes"] // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))
    proc, record, _ = release(project)
    ok(proc)
    assert verdicts(record)["export"] == "pass", proc.stderr
    assert "damaged or changed" in record["stages"][STAGES.index("export")]["why"]
    assert verdicts(record)["export-verify"] == "pass"  # bound to the hashes of the disc written now
    written = json.loads(disc.read_text())["volumes"][0]
    verified = json.loads((folder / "build" / CPU_VARIANT / "export-verify.json").read_text())
    assert verified["iso_sha256"] == {written["iso"]: written["iso_sha256"]}
    assert hashlib.sha256((disc.parent / written["iso"]).read_bytes()).hexdigest() == written["iso_sha256"]
