"""invoke keys.generate / push (signs) / sign / verify / promote against a real OCI registry
(docker-registry 2.8, TLS + htpasswd, loopback). Images are built here (FROM scratch, labelled like
real ones, files under /opt/rapids) and their records written as the stages write them.

The registry's objects are also checked without our verify code: the .sig signature with
`cryptography` directly, the DSSE envelopes with securesystemslib.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from support.tiny_matrix import build_tiny, remove

from rapidship.publish.oci import Credentials, Registry
from rapidship.publish.retrying import RetryPolicy
from rapidship.sign import formats as f
from support.commands import ROOT

pytestmark = pytest.mark.docker
VARIANT = "cpu-debian12"
LOCK = hashlib.sha256(b"the lock").hexdigest()
PASSWORD = "release-key-password-7f3a"


@pytest.fixture(scope="module")
def images(engine, tmp_path_factory):
    """(variants file, image name, {arch: ref}) of two labelled images built here."""
    built = build_tiny(tmp_path_factory.mktemp("signed"), "signed",
                       "FROM scratch\nARG TARGETARCH\nCOPY ${TARGETARCH}.txt /opt/rapids/arch.txt\n"
                       f'LABEL io.rapidship.lock.sha256="{LOCK}" io.rapidship.variant="{VARIANT}"\n')
    yield built
    remove(built[2])


@pytest.fixture(scope="module")
def keypairs(tmp_path_factory):
    """Two key pairs made by `invoke keys.generate`: the release key and someone else's."""
    out = {}
    for who in ("release", "other"):
        d = tmp_path_factory.mktemp(f"keys-{who}")
        proc = subprocess.run(["invoke", "keys.generate", "--out", str(d / "k")], cwd=ROOT, capture_output=True,
                              text=True, env=dict(os.environ, RAPIDSHIP_SIGNING_PASSWORD=PASSWORD))
        assert proc.returncode == 0, proc.stderr
        assert PASSWORD not in proc.stdout + proc.stderr
        out[who] = d / "k"
    return out


def write_records(build: Path, refs: dict[str, str], passed: bool = True) -> None:
    """The records sign reads, as render / build / gates / scan write them, for the real images."""
    from rapidship.gates.policy import load_policy
    from rapidship.image import snapshot
    from rapidship import content
    from support.gated_records import write_gated

    policy = load_policy(ROOT / "policy" / "trivy.yaml", VARIANT)
    described = {"source": policy.source, "variant": VARIANT} | policy.rules.model_dump(mode="json")
    snapshots = {arch: snapshot(ref, hash_under=content.ROOTS) for arch, ref in refs.items()}
    write_gated(build, VARIANT, {arch: (ref, snapshots[arch].config["Id"]) for arch, ref in refs.items()}, lock=LOCK,
                passed=passed, policy=described,
                extra={"bases": {"RUNTIME_BASE": {"ref": "scratch", "id": "", "repo_digests": []}},
                       "build_args": {"BUILDER_BASE": "local/builder"}, "secret_ids": ["pip-index"]},
                content=lambda arch, _ref, image_id: content.manifest(snapshots[arch], VARIANT, arch, image_id))


def env_for(registry, **extra) -> dict:
    return dict(os.environ, RAPIDSHIP_REGISTRY_USER=registry.user, RAPIDSHIP_REGISTRY_PASSWORD=registry.password,
                RAPIDSHIP_REGISTRY_CA=str(registry.ca), RAPIDSHIP_RETRY_ATTEMPTS="2", RAPIDSHIP_RETRY_BASE_DELAY="0.05",
                **extra)


def invoke(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["invoke", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def direct(registry) -> Registry:
    return Registry(registry.host, Credentials(registry.user, registry.password, "test"), str(registry.ca),
                    RetryPolicy(attempts=1))


@pytest.fixture(scope="module")
def signed(registry, images, keypairs, tmp_path_factory):
    """A push that signed by default (key configured): (build dir, push record, outputs)."""
    variants, name, refs = images
    build = tmp_path_factory.mktemp("ws") / "build"
    write_records(build, refs)
    target = f"{registry.host}/staging-{uuid.uuid4().hex[:8]}"
    env = env_for(registry, RAPIDSHIP_SIGNING_KEY=str(keypairs["release"] / "cosign.key"),
                  RAPIDSHIP_SIGNING_PASSWORD=PASSWORD)
    proc = invoke(env, "push", "--variant", VARIANT, "--registry", target, "--build-dir", str(build),
                  "--variants-file", str(variants))
    assert proc.returncode == 0, proc.stderr
    record = json.loads((build / VARIANT / "push.json").read_text())
    return build, record, proc.stdout + proc.stderr


def ref_of(record, tag=None) -> str:
    return f"{record['registry']}/{record['repository']}:{tag or record['tag']}"


def test_push_signs_by_default_and_the_objects_verify_without_our_code(registry, signed, keypairs):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    build, record, output = signed
    assert "signed " in output and "NOT SIGNED" not in output
    sign = json.loads((build / VARIANT / "sign.json").read_text())
    assert set(sign["arches"]) == {"amd64", "arm64"} and sign["index"]["digest"] == record["index_digest"]
    pub_pem = (keypairs["release"] / "cosign.pub").read_bytes()
    public = serialization.load_pem_public_key(pub_pem)
    reg, repo = direct(registry), record["repository"]
    ssl_key = SSlibKey("", "ecdsa", "ecdsa-sha2-nistp256", {"public": pub_pem.decode()})
    for digest in [record["index_digest"], *(a["digest"] for a in record["arches"].values())]:
        sig = json.loads(reg.get_manifest(repo, f.tag_for(digest, "sig"))[0])
        layer = sig["layers"][0]
        payload = reg.get_blob(repo, layer["digest"])
        public.verify(base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"]), payload,
                      ec.ECDSA(hashes.SHA256()))
        assert json.loads(payload)["critical"]["image"]["docker-manifest-digest"] == digest
        assert sig["subject"]["digest"] == digest
        referrers = json.loads(reg.get_manifest(repo, f.tag_for(digest, ""))[0])
        assert reg.head_manifest(repo, f.tag_for(digest, "sig")).digest in [m["digest"] for m in referrers["manifests"]]
        if digest == record["index_digest"]:
            assert reg.head_manifest(repo, f.tag_for(digest, "att")) is None  # the index is signed only
            continue
        att = json.loads(reg.get_manifest(repo, f.tag_for(digest, "att"))[0])
        kinds = {}
        for layer in att["layers"]:
            envelope = Envelope.from_dict(json.loads(reg.get_blob(repo, layer["digest"])))
            envelope.verify([ssl_key], 1)
            statement = json.loads(envelope.payload)
            assert statement["subject"][0]["digest"] == {"sha256": digest.split(":")[1]}
            kinds[statement["predicateType"]] = statement["predicate"]
        assert set(kinds) == {f.CYCLONEDX, f.SLSA_PROVENANCE}
        prov = kinds[f.SLSA_PROVENANCE]
        params = prov["buildDefinition"]["externalParameters"]
        assert params["lock"] == {"sha256": LOCK} and params["buildArgs"] == {"BUILDER_BASE": "local/builder"}
        assert prov["buildDefinition"]["internalParameters"]["secretIds"] == ["pip-index"]
        names = {b["name"] for b in prov["runDetails"]["byproducts"]}
        assert names == {"image-config", "gates", "trivy-decision", "content-manifest"}
        arch = next(a for a, v in record["arches"].items() if v["digest"] == digest)
        content = json.loads((build / VARIANT / f"content-{arch}.json").read_text())
        assert content["files"] == 1 and {"sha256": content["digest"].split(":")[1]} in [
            b["digest"] for b in prov["runDetails"]["byproducts"]]


def test_verify_passes_the_signed_image_under_the_policy(registry, signed, keypairs):
    _, record, _ = signed
    proc = invoke(env_for(registry), "verify", "--image", ref_of(record), "--key",
                  str(keypairs["release"] / "cosign.pub"), "--policy", "policy/trivy.yaml")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert doc["passed"] is True and [v["kind"] for v in doc["verdicts"]] == ["index", "image", "image"]


def test_verify_refuses_another_key_and_a_missing_key(registry, signed, keypairs):
    _, record, _ = signed
    proc = invoke(env_for(registry), "verify", "--image", ref_of(record), "--key", str(keypairs["other"] / "cosign.pub"))
    assert proc.returncode == 1 and "signature does not verify with key" in proc.stderr
    assert "fix: check --key" in proc.stderr   # the likely cause first: the wrong public key
    proc = invoke(env_for(registry), "verify", "--image", ref_of(record))
    assert proc.returncode == 2 and "--key" in proc.stderr


def _copy_repo(registry, record, tag_suffix: str) -> tuple[Registry, str]:
    """A scratch copy of the signed arm64 image and its objects, to tamper with."""
    reg = direct(registry)
    src, dst = record["repository"], f"tamper-{uuid.uuid4().hex[:8]}/signed"
    digest = record["arches"]["arm64"]["digest"]
    manifest, desc = reg.get_manifest(src, digest)
    for ref in (digest, f.tag_for(digest, "sig"), f.tag_for(digest, "att")):
        data, d = reg.get_manifest(src, ref)
        doc = json.loads(data)
        for blob in [doc["config"], *doc["layers"]]:
            reg.upload_blob(dst, reg.get_blob(src, blob["digest"]), blob["digest"])
        reg.put_manifest(dst, ref if ref != digest else tag_suffix, data, d.media_type)
    return reg, dst


def _att_layers(reg, repo, digest):
    att = json.loads(reg.get_manifest(repo, f.tag_for(digest, "att"))[0])
    return att, {layer["annotations"]["predicateType"]: json.loads(reg.get_blob(repo, layer["digest"]))
                 for layer in att["layers"]}


def _put_att(reg, repo, digest, envelopes: dict[str, bytes]):
    art = f.attestation_artifact(envelopes, None)
    for blob in art.blobs:
        reg.upload_blob(repo, blob.data, blob.digest)
    reg.put_manifest(repo, f.tag_for(digest, "att"), art.manifest, f.OCI_MANIFEST)


def _verify(registry, repo, tag, pub, signed_in: str = "") -> subprocess.CompletedProcess:
    """invoke verify; `signed_in`: the repository the signatures were made in, when not `repo`."""
    extra = ["--signed-as", f"{registry.host}/{signed_in}"] if signed_in else []
    return invoke(env_for(registry), "verify", "--image", f"{registry.host}/{repo}:{tag}", "--key", str(pub), *extra)


def test_tampering_in_the_registry_is_refused(registry, signed, keypairs):
    from rapidship.sign.keys import open_signer

    _, record, _ = signed
    pub = keypairs["release"] / "cosign.pub"
    digest = record["arches"]["arm64"]["digest"]
    reg, repo = _copy_repo(registry, record, "v1")
    # a signature made in staging does not vouch for the same bytes in any other repository ...
    proc = _verify(registry, repo, "v1", pub)
    assert proc.returncode == 1 and f"signed as {registry.host}/{record['repository']}, not as " \
        f"{registry.host}/{repo}" in proc.stderr.replace("\n", "")
    # ... unless the verifier names where it was signed (a promotion)
    assert _verify(registry, repo, "v1", pub, record["repository"]).returncode == 0  # the untouched copy verifies

    # 1. the tag re-pushed with another manifest (same layers, one annotation more)
    doc = json.loads(reg.get_manifest(repo, digest)[0])
    doc["annotations"] = {"evil": "yes"}
    reg.put_manifest(repo, "v1", json.dumps(doc).encode(), doc["mediaType"])
    proc = _verify(registry, repo, "v1", pub, record["repository"])
    assert proc.returncode == 1 and "no signature" in proc.stderr
    reg.put_manifest(repo, "v1", reg.get_manifest(repo, digest)[0], doc["mediaType"])

    att, envelopes = _att_layers(reg, repo, digest)
    raw = {k: json.dumps(v).encode() for k, v in envelopes.items()}
    # 2. an edited attestation payload (the lock hash changed after signing)
    statement = json.loads(base64.b64decode(envelopes[f.SLSA_PROVENANCE]["payload"]))
    statement["predicate"]["buildDefinition"]["externalParameters"]["lock"]["sha256"] = "00" * 32
    edited = dict(envelopes[f.SLSA_PROVENANCE], payload=base64.b64encode(json.dumps(statement).encode()).decode())
    _put_att(reg, repo, digest, {**raw, f.SLSA_PROVENANCE: json.dumps(edited).encode()})
    proc = _verify(registry, repo, "v1", pub, record["repository"])
    assert proc.returncode == 1 and "provenance attestation: no signature by key" in proc.stderr

    # 3. a provenance that is signed by the release key but whose lock differs from the label
    os.environ["RAPIDSHIP_SIGNING_PASSWORD"] = PASSWORD
    try:
        signer = open_signer(str(keypairs["release"] / "cosign.key"))
    finally:
        del os.environ["RAPIDSHIP_SIGNING_PASSWORD"]
    name = statement["subject"][0]["name"]
    wrong = f.envelope(f.statement(name, digest, f.SLSA_PROVENANCE, statement["predicate"]), signer.sign)
    _put_att(reg, repo, digest, {**raw, f.SLSA_PROVENANCE: wrong})
    proc = _verify(registry, repo, "v1", pub, record["repository"])
    assert proc.returncode == 1 and "differs from the image label io.rapidship.lock.sha256" in proc.stderr

    # 4. the SBOM left out
    _put_att(reg, repo, digest, {f.SLSA_PROVENANCE: raw[f.SLSA_PROVENANCE]})
    proc = _verify(registry, repo, "v1", pub, record["repository"])
    assert proc.returncode == 1 and "no SBOM attestation" in proc.stderr

    # 5. the signature replaced by one from another key
    other = json.loads(reg.get_manifest(repo, f.tag_for(digest, "sig"))[0])
    os.environ["RAPIDSHIP_SIGNING_PASSWORD"] = PASSWORD
    try:
        intruder = open_signer(str(keypairs["other"] / "cosign.key"))
    finally:
        del os.environ["RAPIDSHIP_SIGNING_PASSWORD"]
    art = f.signature_artifact(name, {"mediaType": other["subject"]["mediaType"], "digest": digest,
                                      "size": other["subject"]["size"]}, intruder.sign)
    for blob in art.blobs:
        reg.upload_blob(repo, blob.data, blob.digest)
    reg.put_manifest(repo, f.tag_for(digest, "sig"), art.manifest, f.OCI_MANIFEST)
    proc = _verify(registry, repo, "v1", pub, record["repository"])
    assert proc.returncode == 1 and "signature does not verify with key" in proc.stderr


def test_promote_verifies_then_copies_the_signed_objects(registry, signed, keypairs, images):
    build, record, _ = signed
    release = f"{registry.host}/release-{uuid.uuid4().hex[:8]}"
    env = env_for(registry)
    proc = invoke(env, "promote", "--variant", VARIANT, "--to", release, "--build-dir", str(build))
    assert proc.returncode == 2 and "no public key" in proc.stderr
    proc = invoke(env, "promote", "--variant", VARIANT, "--to", release, "--build-dir", str(build), "--key",
                  str(keypairs["other"] / "cosign.pub"))
    assert proc.returncode == 1 and "does not verify" in proc.stderr and "nothing was copied" in proc.stderr
    target_repo = f"{release.split('/', 1)[1]}/{record['repository'].split('/', 1)[1]}"
    assert direct(registry).head_manifest(target_repo, record["tag"]) is None
    proc = invoke(env, "promote", "--variant", VARIANT, "--to", release, "--build-dir", str(build), "--key",
                  str(keypairs["release"] / "cosign.pub"))
    assert proc.returncode == 0, proc.stderr
    promoted = json.loads((build / VARIANT / "promote.json").read_text())
    assert promoted["signed_objects"] == 5 and promoted["verified_with"].startswith("sha256:")
    released = f"{registry.host}/{target_repo}:{record['tag']}"
    proc = invoke(env, "verify", "--image", released, "--key", str(keypairs["release"] / "cosign.pub"))
    assert proc.returncode == 1 and "signed as" in proc.stderr  # signed in staging, checked in release
    proc = invoke(env, "verify", "--image", released, "--key", str(keypairs["release"] / "cosign.pub"),
                  "--signed-as", f"{registry.host}/{record['repository']}")
    assert proc.returncode == 0, proc.stderr


def test_push_without_a_key_says_so_and_promote_refuses_it(registry, images, keypairs, tmp_path):
    variants, _, refs = images
    build = tmp_path / "build"
    write_records(build, refs)
    target = f"{registry.host}/staging-{uuid.uuid4().hex[:8]}"
    env = env_for(registry)
    env.pop("RAPIDSHIP_SIGNING_KEY", None)
    proc = invoke(env, "push", "--variant", VARIANT, "--registry", target, "--build-dir", str(build),
                  "--variants-file", str(variants))
    assert proc.returncode == 0 and "NOT SIGNED: no signing key configured" in proc.stderr
    assert not (build / VARIANT / "sign.json").exists()
    proc = invoke(env, "promote", "--variant", VARIANT, "--to", f"{registry.host}/rel-{uuid.uuid4().hex[:6]}",
                  "--build-dir", str(build), "--key", str(keypairs["release"] / "cosign.pub"))
    assert proc.returncode == 1 and "no signature" in proc.stderr
    # sign afterwards by --image; a stale record (gate record of another image) is refused first
    record = json.loads((build / VARIANT / "push.json").read_text())
    env_key = dict(env, RAPIDSHIP_SIGNING_PASSWORD=PASSWORD)
    gates = build / VARIANT / "gates-amd64.json"
    good = gates.read_text()
    gates.write_text(good.replace('"image_id": "sha256:', '"image_id": "sha256:0'))
    proc = invoke(env_key, "sign", "--image", ref_of(record), "--key", str(keypairs["release"] / "cosign.key"),
                  "--build-dir", str(build))
    assert proc.returncode == 2 and "STALE gate record" in proc.stderr
    gates.write_text(good)
    proc = invoke(env_key, "sign", "--image", ref_of(record), "--key", str(keypairs["release"] / "cosign.key"),
                  "--build-dir", str(build))
    assert proc.returncode == 0, proc.stderr


def test_the_password_and_private_key_never_leave(registry, signed, keypairs):
    """Not in any output, record or registry object: only the public fingerprint travels."""
    build, record, output = signed
    key_text = (keypairs["release"] / "cosign.key").read_text()
    secret_lines = [line for line in key_text.splitlines() if not line.startswith("-----")]
    needles = [PASSWORD, *secret_lines]
    assert not any(n in output for n in needles)
    for path in build.rglob("*"):
        if path.is_file():
            data = path.read_bytes().decode("utf-8", "replace")
            assert not any(n in data for n in needles), path
            assert "PRIVATE KEY" not in data, path
    reg = direct(registry)
    for digest in [a["digest"] for a in record["arches"].values()]:
        for suffix in ("sig", "att"):
            doc = json.loads(reg.get_manifest(record["repository"], f.tag_for(digest, suffix))[0])
            for blob in [doc["config"], *doc["layers"]]:
                data = reg.get_blob(record["repository"], blob["digest"]).decode("utf-8", "replace")
                assert PASSWORD not in data and "PRIVATE KEY" not in data


def test_sign_signs_only_the_index_rebuilt_from_the_checked_arches(registry, signed, keypairs, tmp_path):
    """push.json names the index sign signs; an index the registry holds under another digest, or
    one a Go client would read as other children, is refused before anything is signed."""
    import shutil

    build, record, _ = signed
    reg, repo = direct(registry), record["repository"]
    amd64, arm64 = record["arches"]["amd64"], record["arches"]["arm64"]
    child = (f'{{"mediaType": "{amd64["media_type"]}", "digest": "{amd64["digest"]}", "size": {amd64["size"]}, '
             f'"platform": {{"architecture": "amd64", "os": "linux"}}, "Digest": "{arm64["digest"]}"}}')
    two_faced = (f'{{"schemaVersion": 2, "mediaType": "{record["index_media_type"]}", "manifests": [{child}]}}').encode()
    only_one = json.dumps({"schemaVersion": 2, "mediaType": record["index_media_type"], "manifests": [
        {"mediaType": amd64["media_type"], "digest": amd64["digest"], "size": amd64["size"],
         "platform": {"architecture": "amd64", "os": "linux"}}]}).encode()
    env = env_for(registry, RAPIDSHIP_SIGNING_PASSWORD=PASSWORD)
    for index, why in ((two_faced, "differ only in case"), (only_one, "is not the index over the 2 per-arch")):
        digest = reg.put_manifest(repo, f"bent-{uuid.uuid4().hex[:6]}", index, record["index_media_type"])
        ws = tmp_path / uuid.uuid4().hex[:6]
        shutil.copytree(build, ws)
        bent = json.loads((ws / VARIANT / "push.json").read_text()) | {"index_digest": digest}
        (ws / VARIANT / "push.json").write_text(json.dumps(bent))
        proc = invoke(env, "sign", "--variant", VARIANT, "--key", str(keypairs["release"] / "cosign.key"),
                      "--build-dir", str(ws))
        assert proc.returncode == 2 and why in proc.stderr, proc.stderr
        assert reg.head_manifest(repo, f.tag_for(digest, "sig")) is None  # nothing of that index was signed
