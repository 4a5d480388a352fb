"""invoke push / promote against a real OCI registry (docker-registry with TLS + htpasswd) on
loopback, directly and through a fault-injecting proxy. Test images are made here for amd64 and
arm64 from a Dockerfile without RUN (FROM scratch + COPY), so no emulation is needed.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import stat
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from support.gated_records import engine_id
from support.tiny_matrix import VARIANTS_YAML, build_tiny, remove, tiny_ref

from support.commands import ROOT  # noqa: E402

from support.registry_fixtures import Fault, FaultProxy, RegistryServer  # noqa: E402
from rapidship.publish.oci import DOCKER_LIST, Credentials, Registry  # noqa: E402
from rapidship.publish.retrying import RetryPolicy  # noqa: E402

pytestmark = pytest.mark.docker
VARIANT = "cpu-debian12"
TINY: dict[str, str] = {}  # the tiny images' name, once the module fixture made them




@pytest.fixture(scope="module")
def proxy(registry):
    p = FaultProxy(registry.port, registry.ca, registry.directory / "server.crt", registry.directory / "server.key")
    p.start()
    yield p
    p.stop()


@pytest.fixture
def faults(proxy):
    proxy.faults.clear()
    proxy.seen.clear()
    yield proxy.faults
    proxy.faults.clear()


@pytest.fixture(scope="module")
def tiny(engine, tmp_path_factory):
    """A two-arch variant whose images are built here: (variants file, image name)."""
    variants, name, refs = build_tiny(tmp_path_factory.mktemp("tiny"), "tiny",
                                      "FROM scratch\nARG TARGETARCH\nCOPY ${TARGETARCH}.txt /arch.txt\n")
    TINY["name"] = name
    yield variants, name
    remove(refs)


@pytest.fixture
def env(registry, tmp_path):
    docker_config = tmp_path / "docker-config"
    docker_config.mkdir()
    return dict(os.environ, RAPIDSHIP_REGISTRY_USER=registry.user, RAPIDSHIP_REGISTRY_PASSWORD=registry.password,
                RAPIDSHIP_REGISTRY_CA=str(registry.ca), RAPIDSHIP_RETRY_ATTEMPTS="4",
                RAPIDSHIP_RETRY_BASE_DELAY="0.05", DOCKER_CONFIG=str(docker_config))


def gates(build_dir: Path, **passed: bool):
    """Whole records for VARIANT's tiny images (build, gates, scan, content), naming their engine ids,
    as the stages write them; `passed` per arch."""
    from support.gated_records import write_gated

    ws = None
    for arch, ok in passed.items():
        ref = tiny_ref(TINY["name"], arch)
        ws = write_gated(build_dir, VARIANT, {arch: (ref, engine_id(ref))}, lock="5e" * 32, passed=ok)
    return ws


def run(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["invoke", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def push_args(variants: Path, target: str, build_dir: Path, *extra: str) -> list[str]:
    return ["push", "--variant", VARIANT, "--registry", target, "--build-dir", str(build_dir),
            "--variants-file", str(variants), *extra]


def direct(registry) -> Registry:
    return Registry(registry.host, Credentials(registry.user, registry.password, "test"), str(registry.ca),
                    RetryPolicy(attempts=1))


def project() -> str:
    return f"staging-{uuid.uuid4().hex[:8]}"


def test_push_makes_a_manifest_list_that_pulls_per_arch(registry, tiny, env, tmp_path):
    variants, name = tiny
    build = tmp_path / "build"
    gates(build, amd64=True, arm64=True)
    target = f"{registry.host}/{project()}"
    proc = run(env, *push_args(variants, target, build))
    assert proc.returncode == 0, proc.stderr
    record = json.loads((build / VARIANT / "push.json").read_text())
    assert record["tag"] == "26.10-cpu-debian12-py3.11" and not record["gates_skipped"]
    assert set(record["arches"]) == {"amd64", "arm64"}

    reg, repo = direct(registry), f"{target.split('/', 1)[1]}/{name}"
    head = reg.head_manifest(repo, record["tag"])
    assert head.digest == record["index_digest"] and head.media_type == DOCKER_LIST
    index = json.loads(reg.get_manifest(repo, record["tag"])[0])
    assert [(m["platform"]["os"], m["platform"]["architecture"]) for m in index["manifests"]] == \
        [("linux", "amd64"), ("linux", "arm64")]
    for arch in ("amd64", "arm64"):  # the per-arch tags exist and are the list's children
        assert reg.head_manifest(repo, f"{record['tag']}-{arch}").digest == record["arches"][arch]["digest"]

    # pull the arm64 image through the list with skopeo, trusting the CA only through its option
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"auths": {registry.host: {"auth": base64.b64encode(
        f"{registry.user}:{registry.password}".encode()).decode()}}}))
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "ca.crt").write_bytes(registry.ca.read_bytes())
    pulled = tmp_path / "pulled"
    subprocess.run(["skopeo", "copy", "--quiet", "--override-arch", "arm64", "--src-authfile", str(auth),
                    "--src-cert-dir", str(certs), f"docker://{registry.host}/{repo}:{record['tag']}", f"dir:{pulled}"],
                   check=True, capture_output=True)
    manifest = json.loads((pulled / "manifest.json").read_text())
    layer = (pulled / manifest["layers"][0]["digest"].split(":")[1]).read_bytes()
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as tar:
        assert tar.extractfile("arch.txt").read() == b"built for arm64\n"


def test_push_reads_the_engine_docker_host_names(registry, tiny, env, tmp_path):
    """skopeo's docker-daemon transport read /var/run/docker.sock whatever DOCKER_HOST said: with
    the engine elsewhere, build and gates worked and push failed after its retries, blaming the
    registry. Here, in a mount namespace of its own, the default socket is masked and the engine is
    reachable only where DOCKER_HOST points."""
    variants, _ = tiny
    build = tmp_path / "build"
    gates(build, amd64=True, arm64=True)
    sock = tmp_path / "engine.sock"
    sock.touch()
    masked = (f"mount --bind /var/run/docker.sock {sock} && mount --bind /dev/null /var/run/docker.sock "
              '&& exec "$@"')

    def push_with(docker_host: str) -> subprocess.CompletedProcess:
        return subprocess.run(["unshare", "-m", "sh", "-c", masked, "sh", "invoke",
                               *push_args(variants, f"{registry.host}/{project()}", build)],
                              cwd=ROOT, env={**env, "DOCKER_HOST": docker_host}, capture_output=True, text=True,
                              timeout=300)

    ok = push_with(f"unix://{sock}")
    assert ok.returncode == 0, ok.stderr
    gone = push_with(f"unix://{tmp_path / 'no-engine.sock'}")
    assert gone.returncode != 0 and "Traceback" not in gone.stderr and "retry" not in gone.stderr, gone.stderr
    assert "no-engine.sock" in gone.stderr, gone.stderr   # the engine it could not reach, named


def test_a_refused_connection_on_this_machine_fails_at_once(tiny, env, tmp_path):
    """Nothing listens on the port: six retries (68 s with the default backoff) cannot start it."""
    import time

    from support.registry_fixtures import free_port

    variants, _ = tiny
    build = tmp_path / "build"
    gates(build, amd64=True, arm64=True)
    start = time.monotonic()
    proc = run({**env, "RAPIDSHIP_RETRY_BASE_DELAY": "2"},
               *push_args(variants, f"127.0.0.1:{free_port()}/{project()}", build))
    took = time.monotonic() - start
    assert proc.returncode != 0 and "nothing listens on 127.0.0.1:" in proc.stderr, proc.stderr
    assert "retry" not in proc.stderr and took < 15, (took, proc.stderr)


def test_gates_fail_closed_and_skip_is_loud(registry, tiny, env, tmp_path):
    variants, name = tiny
    build = tmp_path / "build"
    target = f"{registry.host}/{project()}"
    reg, repo = direct(registry), f"{target.split('/', 1)[1]}/{name}"

    gates(build, amd64=True)  # arm64 has no gate record (nor a build record: named, it is pushed on purpose)
    proc = run(env, *push_args(variants, target, build, "--arch", "amd64", "--arch", "arm64"))
    assert proc.returncode == 1 and "gates-arm64.json: no gate record" in proc.stderr and "Traceback" not in proc.stderr
    assert "invoke gates --variant cpu-debian12" in proc.stderr   # the task that exists (was `invoke scan-report`)
    gates(build, amd64=True, arm64=False)
    proc = run(env, *push_args(variants, target, build))
    assert proc.returncode == 1 and "gates-arm64.json: passed is false" in proc.stderr
    assert reg.head_manifest(repo, "26.10-cpu-debian12-py3.11-amd64") is None  # nothing was pushed

    proc = run(env, *push_args(variants, target, build, "--skip-gates"))
    assert proc.returncode == 0, proc.stderr
    assert "WARNING: --skip-gates" in proc.stderr
    assert json.loads((build / VARIANT / "push.json").read_text())["gates_skipped"] is True
    proc = run(env, "promote", "--variant", VARIANT, "--to", f"{registry.host}/release-x", "--build-dir", str(build),
               "--no-verify")
    assert proc.returncode == 1 and "skipped its gates" in proc.stderr


def test_every_arch_named_must_exist_and_the_built_ones_are_proposed(registry, tiny, env, tmp_path):
    variants, name = tiny
    only_amd = f"rapidship-test-{uuid.uuid4().hex[:10]}/half"
    subprocess.run(["docker", "tag", tiny_ref(name, "amd64"), tiny_ref(only_amd, "amd64")], check=True)
    try:
        half = tmp_path / "variants.yaml"
        half.write_text(VARIANTS_YAML.format(image=only_amd))
        build = tmp_path / "build"
        from support.gated_records import write_gated

        amd = tiny_ref(only_amd, "amd64")  # built and gated; the arm64 half never was
        write_gated(build, VARIANT, {"amd64": (amd, engine_id(amd))}, lock="5e" * 32)
        # without --arch push takes what was built (amd64); an arm64 named on purpose must exist
        proc = run(env, *push_args(half, f"{registry.host}/{project()}", build), "--arch", "amd64", "--arch", "arm64")
        message = " ".join(proc.stderr.split())
        assert proc.returncode == 2 and "no arm64 image in the engine" in message
        assert "a manifest list needs every arch it names" in message
        assert f"push only what is built: invoke push --variant {VARIANT} --arch amd64" in message
    finally:
        subprocess.run(["docker", "rmi", tiny_ref(only_amd, "amd64")], capture_output=True)


def test_transient_faults_are_retried(registry, proxy, faults, tiny, env, tmp_path):
    variants, name = tiny
    build = tmp_path / "build"
    gates(build, amd64=True, arm64=True)
    faults += [
        Fault("POST", r"/blobs/uploads/$", "drop"),                             # connection dropped
        Fault("PUT", r"/manifests/26\.10-cpu-debian12-py3\.11-amd64$", "status", status=503),
        Fault("GET", r"/blobs/sha256:", "status", status=502),                # reading a config back
        Fault("PUT", r"/manifests/26\.10-cpu-debian12-py3\.11$", "status", status=429, retry_after="1"),
        Fault("HEAD", r"/manifests/26\.10-cpu-debian12-py3\.11$", "slow", delay=1.5),
    ]
    target = f"{proxy.host}/{project()}"
    proc = run(env, *push_args(variants, target, build))
    assert proc.returncode == 0, proc.stderr
    assert all(f.fired for f in faults), [(f.method, f.path, f.fired) for f in faults]
    record = json.loads((build / VARIANT / "push.json").read_text())
    assert record["retries"] >= 3 and "retry" in proc.stderr  # the client-side ones; skopeo retries its own too
    stored = direct(registry).head_manifest(f"{target.split('/', 1)[1]}/{name}", record["tag"])
    assert stored.digest == record["index_digest"]


def test_persistent_fault_fails_clearly_with_no_index(registry, proxy, faults, tiny, env, tmp_path):
    variants, name = tiny
    build = tmp_path / "build"
    gates(build, amd64=True, arm64=True)
    reg = direct(registry)

    target = f"{proxy.host}/{project()}"
    faults.append(Fault("PUT", r"/manifests/26\.10-cpu-debian12-py3\.11$", "status", status=503, times=None))
    proc = run(env, *push_args(variants, target, build))
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "gave up after 4 attempts" in errors[0] and "HTTP 503" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    repo = f"{target.split('/', 1)[1]}/{name}"
    assert reg.head_manifest(repo, "26.10-cpu-debian12-py3.11-arm64") is not None  # arches went up
    assert reg.head_manifest(repo, "26.10-cpu-debian12-py3.11") is None            # no index, not half of one
    assert not (build / VARIANT / "push.json").exists()

    faults.clear()
    target = f"{proxy.host}/{project()}"
    faults.append(Fault("PATCH|PUT|POST", r"/blobs/uploads/", "drop", times=None))
    proc = run(env, *push_args(variants, target, build))
    assert proc.returncode == 2 and "skopeo copy failed after 4 attempt(s)" in proc.stderr, proc.stderr
    assert reg.head_manifest(f"{target.split('/', 1)[1]}/{name}", "26.10-cpu-debian12-py3.11") is None


def test_promote_copies_the_staged_digest(registry, proxy, faults, tiny, env, tmp_path):
    variants, name = tiny
    build = tmp_path / "build"
    gates(build, amd64=True, arm64=True)
    staging = project()
    assert run(env, *push_args(variants, f"{proxy.host}/{staging}", build)).returncode == 0
    pushed = json.loads((build / VARIANT / "push.json").read_text())

    release = f"release-{uuid.uuid4().hex[:8]}"
    # one hiccup on the first mount (retried), then a release registry that keeps refusing the
    # list: one message, and no release tag at all
    faults.append(Fault("POST", r"/blobs/uploads/$", "status", status=503))
    faults.append(Fault("PUT", rf"/{release}/.*/manifests/26\.10-cpu-debian12-py3\.11$", "status", times=None))
    proc = run(env, "promote", "--variant", VARIANT, "--to", f"{proxy.host}/{release}", "--build-dir", str(build),
               "--no-verify")
    assert proc.returncode == 2 and "gave up after 4 attempts" in proc.stderr, proc.stderr
    assert faults[0].fired and "retry 1" in proc.stderr
    assert direct(registry).head_manifest(f"{release}/{name}", pushed["tag"]) is None
    assert not (build / VARIANT / "promote.json").exists()

    faults.clear()  # the fault is gone: promote again, it resumes (blobs are already there)
    proc = run(env, "promote", "--variant", VARIANT, "--to", f"{proxy.host}/{release}", "--build-dir", str(build),
               "--no-verify")
    assert proc.returncode == 0, proc.stderr
    promoted = json.loads((build / VARIANT / "promote.json").read_text())
    assert promoted["digest"] == pushed["index_digest"] and promoted["blobs_mounted"] == 0
    stored = direct(registry).head_manifest(f"{release}/{name}", pushed["tag"])
    assert stored.digest == pushed["index_digest"]  # same bytes: nothing rebuilt or re-encoded


def test_credentials_stay_off_command_lines(registry, tiny, tmp_path, monkeypatch):
    """In-process push: skopeo gets a 0600 auth file, never the password in argv; a wrong
    password ends at once with one message."""
    from rapidship.publish import push as stage
    from rapidship.errors import RapidshipError
    from rapidship.config.matrix import load_matrix

    variants, _ = tiny
    v = load_matrix(variants).get(VARIANT)
    build = tmp_path / "build"
    out = gates(build, amd64=True, arm64=True)
    calls = []
    real_run = subprocess.run

    def spy(cmd, *a, **kw):
        if cmd and cmd[0] == "skopeo":
            auth = Path(cmd[cmd.index("--dest-authfile") + 1])
            calls.append((list(cmd), stat.S_IMODE(auth.stat().st_mode), auth))
        return real_run(cmd, *a, **kw)

    monkeypatch.setattr(stage.subprocess, "run", spy)
    creds = Credentials(registry.user, registry.password, "test")
    record = stage.push(v, f"{registry.host}/{project()}", out, creds, str(registry.ca),
                        policy=RetryPolicy(attempts=2, base_delay=0.01))
    assert len(calls) == 2 and record.index_digest.startswith("sha256:")
    for argv, mode, auth in calls:
        assert not any(registry.password in part for part in argv)
        assert mode == 0o600 and not auth.exists()  # removed after the copy
    assert registry.password not in repr(creds)

    calls.clear()
    with pytest.raises(RapidshipError) as err:
        stage.push(v, f"{registry.host}/{project()}", out, Credentials(registry.user, "wrong", "test"),
                   str(registry.ca), policy=RetryPolicy(attempts=3, base_delay=0.01))
    assert "after 1 attempt(s)" in err.value.problem and len(calls) == 1  # auth errors are not retried


def test_bearer_token_auth_as_harbor_uses(tiny, env, tmp_path_factory, tmp_path):
    """Harbor answers 401 with a Bearer challenge and a token service: push and promote through it."""
    from support.registry_fixtures import TokenServer, make_tls

    variants, name = tiny
    directory = tmp_path_factory.mktemp("token-registry")
    tls = make_tls(directory)
    tokens = TokenServer(directory, tls[1], tls[2]).start()
    reg = RegistryServer(directory, token_auth=(
        f"token: {{realm: '{tokens.realm}', service: {tokens.service}, issuer: {tokens.issuer}, "
        f"rootcertbundle: {tokens.signer_cert}}}"))
    try:
        reg.start(tls)
        env = dict(env, RAPIDSHIP_REGISTRY_USER=tokens.user, RAPIDSHIP_REGISTRY_PASSWORD=tokens.password,
                   RAPIDSHIP_REGISTRY_CA=str(tls[0]))
        build = tmp_path / "build"
        gates(build, amd64=True, arm64=True)
        proc = run(env, *push_args(variants, f"{reg.host}/staging", build))
        assert proc.returncode == 0, proc.stderr
        proc = run(env, "promote", "--variant", VARIANT, "--to", f"{reg.host}/release", "--build-dir", str(build),
                   "--no-verify")
        assert proc.returncode == 0, proc.stderr
        assert json.loads((build / VARIANT / "promote.json").read_text())["blobs_mounted"] >= 3
        scopes = {s for r in tokens.requests if r["ok"] for s in r["scopes"]}
        assert f"repository:release/{name}:pull,push" in scopes and f"repository:staging/{name}:pull" in scopes

        bad = dict(env, RAPIDSHIP_REGISTRY_PASSWORD="wrong-pass-7f3a")
        proc = run(bad, "promote", "--variant", VARIANT, "--to", f"{reg.host}/release2", "--build-dir", str(build),
                   "--no-verify")
        assert proc.returncode == 2 and "token service refused the credentials" in proc.stderr
        assert "wrong-pass-7f3a" not in proc.stderr  # the secret itself never shows
    finally:
        reg.stop()
        tokens.stop()


def test_a_stale_gate_record_pushes_nothing_and_promote_refuses_records_of_another_image(registry, engine, env,
                                                                                         tmp_path):
    """The records gated one build; a rebuild gave the tag a new image. push must not publish the
    new image on the old image's verdicts; promote must not release a push whose records moved on."""
    from support.gated_records import write_gated

    variants, name, refs = build_tiny(tmp_path, "stale",
                                      "FROM scratch\nARG TARGETARCH\nCOPY ${TARGETARCH}.txt /arch.txt\n")
    gated = {arch: (ref, engine_id(ref)) for arch, ref in refs.items()}
    try:
        build = tmp_path / "build"
        write_gated(build, VARIANT, gated, lock="5e" * 32)
        ctx = tmp_path / "ctx"
        (ctx / "amd64.txt").write_text("rebuilt: another image under the same tag\n")
        from rapidship.engine import ENGINE
        subprocess.run([ENGINE.buildkit_cli(), "build", "-q", "--platform", "linux/amd64", "-t", refs["amd64"], str(ctx)],
                       check=True, capture_output=True, env=dict(os.environ, DOCKER_BUILDKIT="1"))
        new_id = engine_id(refs["amd64"])
        assert new_id != gated["amd64"][1]
        target = f"{registry.host}/{project()}"
        reg, repo = direct(registry), f"{target.split('/', 1)[1]}/{name}"
        proc = run(env, *push_args(variants, target, build))
        assert proc.returncode == 1 and proc.stderr.count("STALE") == 4, proc.stderr  # build, gates, scan, content
        assert f"gates-amd64.json: STALE gate record: it names image {gated['amd64'][1][:19]}, the image to publish " \
               f"is {new_id[:19]}" in proc.stderr
        assert reg.head_manifest(repo, "26.10-cpu-debian12-py3.11-arm64") is None  # nothing was pushed

        write_gated(build, VARIANT, {"amd64": (refs["amd64"], new_id)}, lock="5e" * 32)  # gated again: pushes
        assert run(env, *push_args(variants, target, build)).returncode == 0
        write_gated(build, VARIANT, {"amd64": (refs["amd64"], gated["amd64"][1])}, lock="5e" * 32)  # records moved on
        proc = run(env, "promote", "--variant", VARIANT, "--to", f"{registry.host}/release-{uuid.uuid4().hex[:6]}",
                   "--build-dir", str(build), "--no-verify")
        assert proc.returncode == 1 and "not of the images the records gated" in proc.stderr
        assert "STALE gate record" in proc.stderr and "nothing was copied" in proc.stderr
    finally:
        remove(refs)
        subprocess.run(["docker", "rmi", gated["amd64"][1]], capture_output=True)
