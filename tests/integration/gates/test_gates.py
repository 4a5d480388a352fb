"""Each image gate FAILS on a bad image and PASSES on the good cpu-debian12 image (real engine)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rapidship.gates.labels import check_labels
from rapidship.gates.secrets import check_secrets
from rapidship.gates.size import check_size
from rapidship.gates.suid import check_suid
from rapidship.gates.user import check_user
from rapidship.image import image_config, snapshot
from rapidship.config.matrix import load_matrix

pytestmark = pytest.mark.docker
from support.commands import ROOT  # noqa: E402
VARIANT = load_matrix(ROOT / "variants.yaml").variants["cpu-debian12"]


@pytest.fixture
def derive(engine, cpu_image, unique_name, tmp_path):
    """Build a bad image FROM the good one; removed after the test."""
    made = []

    def _derive(lines: str, files: dict[str, bytes] | None = None) -> str:
        ctx = tmp_path / f"ctx{len(made)}"
        ctx.mkdir()
        for name, data in (files or {}).items():
            (ctx / name).write_bytes(data)
        (ctx / "Dockerfile").write_text(f"FROM {cpu_image.ref}\n{lines}\n")
        tag = f"{unique_name}:{len(made)}"
        engine.images.build(path=str(ctx), tag=tag, rm=True)
        made.append(tag)
        return tag

    yield _derive
    for tag in made:
        engine.images.remove(tag, force=True)


def test_size_gate(cpu_image):
    assert check_size(cpu_image.size_bytes, cpu_image.zstd_bytes, VARIANT.budget_bytes).passed
    over = check_size(cpu_image.size_bytes, cpu_image.zstd_bytes, cpu_image.size_bytes - 1)
    assert not over.passed and "1 over the budget" in over.reasons[0]
    both = check_size(cpu_image.size_bytes, cpu_image.zstd_bytes, cpu_image.zstd_bytes - 1)
    assert len(both.reasons) == 2


def test_labels_gate(cpu_image, derive):
    assert check_labels(image_config(cpu_image.ref)["Config"]["Labels"], VARIANT).passed
    bad = derive('LABEL io.rapidship.lock.sha256="unlocked" io.rapidship.python.version="3.9"')
    report = check_labels(image_config(bad)["Config"]["Labels"], VARIANT)
    assert not report.passed
    assert any("built without a lock" in r for r in report.reasons)
    assert any("python.version" in r for r in report.reasons)
    relabelled = derive('LABEL io.rapidship.gpu.archs="80"')   # a cpu image claims device code
    assert check_labels(image_config(relabelled)["Config"]["Labels"], VARIANT).reasons == [
        "label io.rapidship.gpu.archs is '80', expected 'none'"]


def test_user_gate(cpu_image, derive):
    assert check_user(cpu_image.ref, image_config(cpu_image.ref)["Config"]["User"]).passed
    root = derive("USER 0")
    assert "is root" in check_user(root, image_config(root)["Config"]["User"]).reasons[0]
    named = derive("USER rapids")
    assert "not a numeric uid" in check_user(named, image_config(named)["Config"]["User"]).reasons[0]
    # Spill dir only writable by 1001: an arbitrary uid (OpenShift) cannot spill.
    locked = derive("USER 0\nRUN chmod 0700 /spill\nUSER 1001:0")
    report = check_user(locked, "1001:0", uid=123457)
    assert not report.passed and "random uid 123457" in report.reasons[0]


def test_suid_gate(cpu_image, derive):
    assert check_suid(snapshot(cpu_image.ref)).passed
    bad = derive("USER 0\nRUN chmod u+s /usr/bin/env && chmod g+s /usr/bin/id\nUSER 1001:0")
    report = check_suid(snapshot(bad))
    assert not report.passed
    assert report.reasons == ["/usr/bin/env has setuid/setgid", "/usr/bin/id has setuid/setgid"]


@pytest.fixture(scope="module")
def corporate_bundle(tmp_path_factory) -> Path:
    """The system bundle plus a private root CA made here, like a TLS-intercepting proxy's."""
    d = tmp_path_factory.mktemp("ca")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=rapidship test corporate root", "-keyout", str(d / "key.pem"), "-out", str(d / "ca.pem")],
                   check=True, capture_output=True)
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    bundle = d / "bundle.pem"
    bundle.write_bytes((system.read_bytes() if system.is_file() else b"") + (d / "ca.pem").read_bytes())
    return bundle


def test_secrets_gate(cpu_image, derive, corporate_bundle):
    token_url = "https://ci-bot:s3cr3t-t0ken-abc@pypi.mirror.example/simple"
    good = check_secrets(snapshot(cpu_image.ref), corporate_bundle, {"pip index URL": token_url})
    assert good.passed, good.reasons
    assert good.details["needles"] >= 3

    private_ca = corporate_bundle.read_bytes().split(b"-----BEGIN CERTIFICATE-----")[-1]
    copied = derive("COPY ca.pem /usr/local/share/ca-certificates/corp.crt",
                    {"ca.pem": b"-----BEGIN CERTIFICATE-----" + private_ca})
    report = check_secrets(snapshot(copied), corporate_bundle, {})
    assert not report.passed and "corp.crt" in report.reasons[0]

    # Deleted in a later layer still ships in the earlier one.
    deleted = derive("USER 0\nCOPY ca.pem /tmp/ca.pem\nRUN rm /tmp/ca.pem\nUSER 1001:0",
                     {"ca.pem": b"-----BEGIN CERTIFICATE-----" + private_ca})
    report = check_secrets(snapshot(deleted), corporate_bundle, {})
    assert not report.passed and "/tmp/ca.pem" in report.reasons[0]

    # A token passed as a build arg lands in the history; as ENV in the config.
    arg = derive("ARG INDEX\nRUN echo using \"$INDEX\" > /dev/null", None)
    engine_arg = subprocess.run(["docker", "build", "-q", "--build-arg", f"INDEX={token_url}", "-t", f"{arg}-arg",
                                 "-"], input=f"FROM {arg}\nARG INDEX\nRUN test -n \"$INDEX\"\n", text=True,
                                capture_output=True, check=True)
    try:
        report = check_secrets(snapshot(f"{arg}-arg"), None, {"pip index URL": token_url})
        assert not report.passed and "history/config" in report.reasons[0]
    finally:
        subprocess.run(["docker", "rmi", "-f", f"{arg}-arg"], capture_output=True, check=False)
    assert engine_arg.returncode == 0
    env = derive("ENV PIP_INDEX_URL=" + token_url)
    report = check_secrets(snapshot(env), None, {"pip index URL": token_url})
    assert not report.passed
    assert "s3cr3t" not in " ".join(report.reasons)  # the report names the secret, never shows it


def test_gates_task_writes_a_passing_record(cpu_image):
    import json

    from support.commands import invoke

    invoke("gates", "--variant", "cpu-debian12", "--arch", "amd64")
    record = json.loads((ROOT / "build" / "cpu-debian12" / "gates-amd64.json").read_text())
    assert record["passed"] is True and record["image_id"] == cpu_image.image_id
    assert [g["gate"] for g in record["gates"]] == ["size", "labels", "user", "suid", "secrets"]


# ---- round 2: the paths around the gates ---------------------------------------------------------

def load_capability_image(tag: str) -> str:
    """A real image whose /bin/escalate carries `cap_setuid+ep` (vfs_cap_data v2 in the layer's
    pax header, as `setcap` leaves it and docker applies it on load). Returns the tag."""
    import hashlib
    import io
    import json
    import struct
    import tarfile

    cap = struct.pack("<IIIII", 0x02000001, 1 << 7, 0, 0, 0).decode("utf-8", "surrogateescape")  # CAP_SETUID, +ep

    def tar(files):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
            for name, data, pax in files:
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o755
                info.pax_headers = pax or {}
                t.addfile(info, io.BytesIO(data))
        return out.getvalue()

    layer = tar([("bin/escalate", b"#!/bin/sh\n", {"SCHILY.xattr.security.capability": cap})])
    diff = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/bin/escalate"], "Env": ["PATH=/bin"]},
                         "rootfs": {"type": "layers", "diff_ids": [diff]}}).encode()
    hex_id = hashlib.sha256(config).hexdigest()
    archive = tar([(f"{hex_id}.json", config, None), (f"{diff[7:]}/layer.tar", layer, None),
                   ("manifest.json", json.dumps([{"Config": f"{hex_id}.json", "RepoTags": [tag],
                                                  "Layers": [f"{diff[7:]}/layer.tar"]}]).encode(), None)])
    subprocess.run(["docker", "load"], input=archive, capture_output=True, check=True)
    return tag


def test_file_capabilities_and_a_writable_dir_on_path_fail_the_privilege_gate(cpu_image, derive, unique_name):
    tag = load_capability_image(f"{unique_name}:caps")
    try:
        report = check_suid(snapshot(tag))
        assert not report.passed and report.reasons == ["/bin/escalate carries file capabilities (security.capability)"]
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    writable = derive("USER 0\nRUN chmod 0777 /usr/local/bin\nUSER 1001:0")
    reasons = check_suid(snapshot(writable)).reasons
    assert reasons[0] == "/usr/local/bin is on PATH and world-writable" and "writable by the runtime user" in reasons[1]
    assert check_suid(snapshot(cpu_image.ref)).passed  # the real image has neither


@pytest.fixture(scope="module")
def private_ca(corporate_bundle) -> tuple[bytes, bytes]:
    """(PEM, DER) of the bundle's private root."""
    pem = b"-----BEGIN CERTIFICATE-----" + corporate_bundle.read_bytes().split(b"-----BEGIN CERTIFICATE-----")[-1]
    der = subprocess.run(["openssl", "x509", "-outform", "DER"], input=pem, capture_output=True, check=True).stdout
    return pem, der


def _rewrapped(pem: bytes, width: int) -> bytes:
    import re

    body = re.sub(rb"\s+", b"", pem.split(b"-----")[2])
    lines = [body[i:i + width] for i in range(0, len(body), width)]
    return b"-----BEGIN CERTIFICATE-----\n" + b"\n".join(lines) + b"\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("how", ["trust store (update-ca-certificates)", "certifi", "DER", "PEM at 76 columns",
                                 "PEM at 40 columns"])
def test_the_private_ca_is_found_wherever_and_however_it_is_copied(cpu_image, derive, corporate_bundle, private_ca,
                                                                   how):
    """What is public comes from Debian's list, never from the judged image's own trust store."""
    pem, der = private_ca
    system = Path("/usr/share/ca-certificates/mozilla")
    public = b"".join(p.read_bytes() for p in sorted(system.glob("*.crt")))
    files, line = {
        "trust store (update-ca-certificates)": ({"bundle.crt": public + pem},
                                                 "COPY bundle.crt /etc/ssl/certs/ca-certificates.crt"),
        "certifi": ({"cacert.pem": public + pem}, "COPY cacert.pem /opt/tool/lib/certifi/cacert.pem"),
        "DER": ({"corp.der": der}, "COPY corp.der /usr/local/share/corp.der"),
        "PEM at 76 columns": ({"corp.pem": _rewrapped(pem, 76)}, "COPY corp.pem /etc/corp.pem"),
        "PEM at 40 columns": ({"corp.pem": _rewrapped(pem, 40)}, "COPY corp.pem /etc/corp.pem"),
    }[how]
    report = check_secrets(snapshot(derive(line, files)), corporate_bundle, {})
    assert not report.passed and report.reasons[0].startswith("CA certificate "), report.reasons


@pytest.mark.parametrize("how", ["docker config auth", ".netrc token", "url-decoded password", "query token"])
def test_a_credential_in_another_encoding_is_found(cpu_image, derive, how):
    import base64

    url = "https://ci-bot:p%40ss-w0rd-42@pypi.mirror.example/simple?private_token=glpat-Zq9TOKEN77"
    token_only = "https://glpat-Zq9ONLYTOKEN55@pypi.mirror.example/simple"
    auth = base64.b64encode(b"ci-bot:p@ss-w0rd-42").decode()
    files, line, values = {
        "docker config auth": ({"config.json": f'{{"auths": {{"pypi.mirror.example": {{"auth": "{auth}"}}}}}}'.encode()},
                               "COPY config.json /home/rapids/.docker/config.json", {"pip index URL": url}),
        ".netrc token": ({"netrc": b"machine pypi.mirror.example login glpat-Zq9ONLYTOKEN55\n"},
                         "COPY netrc /home/rapids/.netrc", {"pip index URL": token_only}),
        "url-decoded password": ({"pip.conf": b"[global]\npassword = p@ss-w0rd-42\n"},
                                 "COPY pip.conf /etc/pip.conf", {"pip index URL": url}),
        "query token": ({"gl": b"token=glpat-Zq9TOKEN77\n"}, "COPY gl /etc/gl", {"pip index URL": url}),
    }[how]
    report = check_secrets(snapshot(derive(line, files)), None, values)
    assert not report.passed, how
    assert "p@ss" not in " ".join(report.reasons) and "glpat" not in " ".join(report.reasons)


def test_a_private_key_in_the_ca_bundle_is_a_needle_too(cpu_image, derive, corporate_bundle, tmp_path):
    key = (corporate_bundle.parent / "key.pem").read_bytes()
    bundle = tmp_path / "with-key.pem"
    bundle.write_bytes(corporate_bundle.read_bytes() + key)
    report = check_secrets(snapshot(derive("COPY k.pem /etc/k.pem", {"k.pem": key})), bundle, {})
    assert not report.passed and any("private key inside the build's CA bundle" in r for r in report.reasons)


def test_the_env_is_read_only_to_the_runtime_user_and_the_gate_says_when_it_is_not(cpu_image, derive):
    """uid 1001 owned /opt/rapids (its bin first on PATH): the workload could replace python for
    every later process. The env is root's now; the privilege gate fails an image where it is not."""
    tried = subprocess.run(["docker", "run", "--rm", "--entrypoint", "sh", cpu_image.ref, "-c",
                            "touch /opt/rapids/bin/python 2>&1; touch /opt/rapids/x 2>&1; touch \"$HOME/ok\" /spill/ok && echo wrote"],
                           capture_output=True, text=True)
    assert tried.stdout.count("Permission denied") == 2 and "wrote" in tried.stdout, tried.stdout + tried.stderr
    owned = derive("USER 0\nRUN chown -R 1001:0 /opt/rapids/bin\nUSER 1001:0")
    report = check_suid(snapshot(owned))
    assert not report.passed and "writable by the runtime user 1001:0" in report.reasons[-1]
    assert "/opt/rapids/bin" in report.reasons[-1]
