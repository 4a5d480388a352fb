"""Gates, round 2, the pure parts: each gate judges the build that was recorded, with what it needs."""

from __future__ import annotations

import subprocess

import pytest

from support.commands import ROOT

from rapidship.imagebuild.buildkit import BuildSecrets
from rapidship.config.matrix import load_matrix
from rapidship.gates.labels import check_labels, expected_labels
from rapidship.gates.run import unsearched_secrets
from rapidship.needles import ca_needles, found_in_stream, value_needles
from rapidship.gates.suid import writable_path_dirs
from rapidship.image import FileEntry
from rapidship.records import BuiltImage

VARIANT = load_matrix(ROOT / "variants.yaml").variants["cpu-debian12"]
LOCK = "ab" * 32


def built(secret_ids: list[str]) -> BuiltImage:
    return BuiltImage(variant=VARIANT.id, arch="amd64", ref="r", image_id="sha256:" + "1" * 64, size_bytes=1,
                      zstd_bytes=1, layers=1, seconds=1.0, lock_sha256=LOCK, base="b", log="l",
                      extra={"secret_ids": secret_ids})


def test_a_secret_the_build_used_but_the_gates_were_not_given_fails():
    """Without --pip-index on the gates run the gate used to say "the build used no secrets"."""
    missing = unsearched_secrets(built(["pip-index", "cacert"]), BuildSecrets())
    assert len(missing) == 2 and "'pip-index'" in missing[0] and "--pip-index" in missing[0]
    assert unsearched_secrets(built(["pip-index"]), BuildSecrets(pip_index="https://t:x@h/simple")) == []
    assert unsearched_secrets(built([]), BuildSecrets()) == []


def test_the_lock_label_must_be_the_rendered_lock_not_any_hash():
    labels = expected_labels(VARIANT) | {k: "x" for k in ("org.opencontainers.image.title",
                                                         "org.opencontainers.image.created",
                                                         "org.opencontainers.image.description",
                                                         "org.opencontainers.image.vendor",
                                                         "org.opencontainers.image.licenses",
                                                         "org.opencontainers.image.base.name")}
    labels["io.rapidship.lock.sha256"] = "cd" * 32  # well formed, but another lock's
    assert check_labels(labels, VARIANT).passed  # as before: only the form was checked
    report = check_labels(labels, VARIANT, rendered_lock=LOCK)
    assert not report.passed and "the image was built from another lock" in report.reasons[0]
    assert check_labels(labels | {"io.rapidship.lock.sha256": LOCK}, VARIANT, rendered_lock=LOCK).passed


def test_world_writable_dirs_on_path_are_named():
    entries = [FileEntry("final", "/opt/rapids/bin/", 0o40777, 0, False, is_dir=True),
               FileEntry("final", "/usr/bin/", 0o40755, 0, False, is_dir=True),
               FileEntry("final", "/tmp/", 0o41777, 0, False, is_dir=True)]
    assert writable_path_dirs(entries, ["PATH=/opt/rapids/bin:/usr/bin"]) == ["/opt/rapids/bin"]
    assert writable_path_dirs(entries, ["PATH=/usr/bin"]) == []


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    d = tmp_path_factory.mktemp("ca")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=corp",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "ca.pem")], check=True, capture_output=True)
    pem = (d / "ca.pem").read_bytes()
    der = subprocess.run(["openssl", "x509", "-outform", "DER"], input=pem, capture_output=True, check=True).stdout
    return pem, der, (d / "key.pem").read_bytes()


def _found(data: bytes, needles) -> set[str]:
    import io

    return found_in_stream(io.BytesIO(data), needles)


@pytest.mark.parametrize("width", [64, 76, 40, 1000])
def test_a_private_cert_is_found_at_any_pem_width_and_as_der(ca, width):
    import base64
    import re

    pem, der, _ = ca
    needles = ca_needles(pem, b"")
    body = re.sub(rb"\s+", b"", pem.split(b"-----")[2])
    rewrapped = b"\r\n".join(body[i:i + width] for i in range(0, len(body), width))
    assert _found(b"junk " * 1000 + rewrapped + b" junk", needles)
    assert _found(b"\x00" * 5000 + der + b"\x00", needles)
    assert not _found(base64.b64encode(b"something else entirely" * 40), needles)


def test_a_private_key_in_the_bundle_is_a_needle(ca):
    pem, _, key = ca
    names = {n.name for n in ca_needles(pem + key, b"")}
    assert any("private key inside the build's CA bundle" in n for n in names)


def test_credential_encodings_are_needles():
    import base64

    url = "https://bot:p%40ss-w0rd@mirror.example/simple?private_token=glpat-abcdefgh"
    values = {n.value for n in value_needles({"pip index URL": url})}
    assert b"p@ss-w0rd" in values and b"p%40ss-w0rd" in values and b"glpat-abcdefgh" in values
    assert base64.b64encode(b"bot:p@ss-w0rd") in values  # a docker config's auth
    token_only = {n.value for n in value_needles({"u": "https://glpat-onlytoken1@mirror.example/simple"})}
    assert b"glpat-onlytoken1" in token_only  # what a .netrc `login` would hold


@pytest.mark.parametrize("user", ["a", "ci", "robot$rapids+ci", "x" * 40])
def test_a_password_given_alone_is_found_in_a_docker_config_auth_of_any_user(user):
    """Only RAPIDSHIP_REGISTRY_PASSWORD given: a docker config written with the user's name holds
    base64("<user>:<password>"), which neither the password nor any fixed encoding of it matched."""
    import base64
    import io
    import json

    password = "Harb0r-r0bot-s3cret"
    config = json.dumps({"auths": {"harbor.example": {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}}})
    needles = value_needles({"RAPIDSHIP_REGISTRY_PASSWORD": password})
    assert found_in_stream(io.BytesIO(config.encode()), needles)
    other = json.dumps({"auths": {"h": {"auth": base64.b64encode(f"{user}:Another-passw0rd-here".encode()).decode()}}})
    assert not found_in_stream(io.BytesIO(other.encode()), needles)   # another password is not it


def test_a_decision_goes_only_into_its_own_variants_folder(tmp_path):
    """`invoke scan-report --variant X --out build/Y/scan-amd64` wrote X's decision where Y's is read."""
    import json

    from support.commands import invoke

    report = tmp_path / "trivy.json"
    report.write_text(json.dumps({"SchemaVersion": 2, "ArtifactName": "img", "ArtifactType": "container_image",
                                  "Metadata": {"OS": {"Family": "debian", "Name": "12"}}, "Results": []}))
    other = tmp_path / "build" / "cuda12-debian12" / "scan-amd64"
    proc = invoke("scan-report", "--report", str(report), "--variant", "cpu-debian12", "--out", str(other), check=False)
    assert proc.returncode == 2 and "is cuda12-debian12's scan folder" in proc.stderr, proc.stderr
    assert not (other / "decision.json").exists()
    mine = tmp_path / "build" / "cpu-debian12" / "scan-amd64"
    assert invoke("scan-report", "--report", str(report), "--variant", "cpu-debian12", "--out", str(mine),
                  check=False).returncode in (0, 1)
    assert (mine / "decision.json").is_file()


def test_a_decision_of_another_variant_is_refused_where_it_is_read(tmp_path):
    """Copied into another variant's folder by hand, it is still named, not taken as that one's."""
    import json

    from support.gated_records import write_gated
    from rapidship.records import gated_problems

    image = "sha256:" + "2" * 64
    ws = write_gated(tmp_path, "cpu-debian12", {"amd64": ("r", image)}, lock=LOCK)
    path = ws.decision("cpu-debian12", "amd64")
    path.write_text(json.dumps(json.loads(path.read_text()) | {"variant": "cuda12-debian12"}))
    assert gated_problems(ws, "cpu-debian12", "amd64", image) == [
        f"{path}: the scan decision is of cuda12-debian12 amd64, not of cpu-debian12 amd64: run invoke scan "
        "--variant cpu-debian12 --arch amd64 again"]
