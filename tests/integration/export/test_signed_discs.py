"""Signed discs end to end: real images, a real registry, the real `invoke push` and `invoke sign`,
then export, and import / install.sh against the public key, through the real engine.

The disc (tests/support/signed_discs.py, made once for the package by conftest.py) spans two volumes.
Then every refusal an operator can meet: no key, another key, an archive holding another image (an
attacker re-exporting with the old signatures), a swapped layer, a swapped signature; each is named,
exits as documented and loads nothing. What a loader is handed whatever the archive says is
tests/integration/export/test_loaders_get_only_signed.py; rollbacks are test_rollback.py.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
import uuid

import pytest

from support.signed_discs import (ARCHES, CREATED, VARIANT, copy_dirs, error_of, forge, from_args, image_id, install,
                                  ok, other_image, reseal, run, saved_tar)

pytestmark = pytest.mark.docker


def swap_layer(archive: bytes, ref: str, replacement: bytes) -> bytes:
    """The docker-archive with the first layer of `ref` replaced (config and manifest.json untouched)."""
    source = tarfile.open(fileobj=io.BytesIO(archive))
    entry = next(e for e in json.loads(source.extractfile("manifest.json").read()) if ref in e["RepoTags"])
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for m in source:
            data = source.extractfile(m).read() if m.isfile() else None
            if m.name == entry["Layers"][0]:
                data, m.size = replacement, len(replacement)
            tar.addfile(m, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def one_file_layer(data: bytes) -> bytes:
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("payload.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return layer.getvalue()


# ---- export ------------------------------------------------------------------------------------

def test_the_disc_carries_every_signature_and_the_keys_fingerprint(signed):
    record, sign_record = signed["record"], signed["sign"]
    assert record["volume_count"] == 2 and record["signing_key_fingerprint"] == signed["fingerprint"]
    assert sign_record["key_fingerprint"] == signed["fingerprint"]
    by_id = {i["image_id"]: i for i in record["images"]}
    for arch in ARCHES:
        image = by_id[signed["ids"][arch]]
        assert image["signed_digest"] == sign_record["arches"][arch]["digest"] and not image["unsigned"]
    for volume in signed["dirs"]:  # every volume carries them, covered by its SHA256SUMS
        doc = json.loads((volume / "MANIFEST.json").read_text())
        assert doc["signing_key_fingerprint"] == signed["fingerprint"]
        for image in doc["images"]:
            folder = volume / "signatures" / image["signed_digest"].replace(":", "-")
            assert {p.name for p in folder.iterdir()} >= {"manifest.json", "sig.json", "att.json", "payload.json",
                                                          "payload.sig", "blobs"}
            kept = signed["build"] / VARIANT / "signed" / folder.name
            assert (folder / "sig.json").read_bytes() == (kept / "sig.json").read_bytes()
            assert json.loads((folder / "manifest.json").read_bytes())["config"]["digest"] == image["image_id"]
            payload = json.loads((folder / "payload.json").read_text())
            assert payload["critical"]["image"]["docker-manifest-digest"] == image["signed_digest"]
            stated = payload["optional"]["io.rapidship.release"]
            assert stated == {"created": CREATED, "revision": "0d" * 20, "serial": stated["serial"]}
            assert isinstance(stated["serial"], int) and stated["serial"] > 1_700_000_000_000  # ms since the epoch
        check = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=volume, capture_output=True, text=True)
        assert check.returncode == 0 and "signatures/" in check.stdout, check.stdout


def test_an_unsigned_image_is_refused_unless_unsigned_is_passed(signed, present, tmp_path):
    env, ref = signed["env"], f"rapidship-test-{uuid.uuid4().hex[:8]}:unsigned"
    other_image(signed, ref)
    proc = run(env, "export", "--image", ref, "--build-dir", str(signed["build"]), "--out", str(tmp_path / "a"))
    message = error_of(proc)
    assert proc.returncode == 2 and f"no signature for {ref}" in message and "--unsigned" in message
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())
    proc = ok(run(env, "export", "--image", ref, "--image", signed["refs"]["amd64"], "--unsigned", "--build-dir",
                  str(signed["build"]), "--out", str(tmp_path / "b"), "--keep-dirs", "--json"))
    assert "WARNING: --unsigned" in proc.stderr and ref in proc.stderr
    images = {i["ref"]: i for i in json.loads(proc.stdout)["images"]}
    assert images[ref]["unsigned"] and not images[ref]["signed_digest"]
    assert images[signed["refs"]["amd64"]]["signed_digest"]  # the signed one keeps its signature
    proc = run(env, "import", "--from", str(tmp_path / "b"), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1 and f"image {ref} " in message and "exported unsigned" in message


# ---- invoke import -------------------------------------------------------------------------------

def test_import_with_the_key_verifies_then_loads_identical_images(signed, absent):
    proc = ok(run(signed["env"], "import", *from_args(signed["isos"]), "--key", str(signed["pub"]), "--json"))
    report = json.loads(proc.stdout)
    assert report["verified_with"] == signed["fingerprint"] and report["verification"] == "signatures"
    assert {x["ref"]: x["image_id"] for x in report["loaded"]} == {signed["refs"][a]: signed["ids"][a] for a in ARCHES}
    assert all(image_id(signed["refs"][a]) == signed["ids"][a] for a in ARCHES)
    assert "verified 2 images" in proc.stderr


def test_import_without_a_key_is_refused_before_reading_anything(signed, absent):
    proc = run(signed["env"], "import", *from_args(signed["isos"]))
    message = error_of(proc)
    assert proc.returncode == 2 and "--key: no public key" in message and "--key cosign.pub" in message
    assert "--no-verify" in message and signed.nothing_loaded()


def test_no_verify_loads_and_says_what_it_skipped(signed, absent):
    proc = ok(run(signed["env"], "import", *from_args(signed["dirs"]), "--no-verify", "--json"))
    report = json.loads(proc.stdout)
    assert report["verification"] == "skipped" and report["verified_with"] == ""
    assert "WARNING: --no-verify" in proc.stderr and "NOT checked" in proc.stderr
    assert signed["fingerprint"] in proc.stderr.replace("\n", "")
    assert all(image_id(signed["refs"][a]) == signed["ids"][a] for a in ARCHES)


def test_another_signers_key_is_the_operators_input_naming_the_key_given_and_the_signer(signed, absent):
    # a valid key of someone else is a wrong --key (exit 2), not a damaged disc (exit 1, "ask for a new disc")
    proc = run(signed["env"], "import", *from_args(signed["isos"]), "--key", str(signed["other"]))
    message = error_of(proc)
    assert proc.returncode == 2
    assert f"--key: {signed['other']} is key {signed['other_fingerprint']}" in message
    assert f"signed with key {signed['fingerprint']}" in message and "nothing was loaded" in message
    assert "new one" not in message and "replace the named volume" not in message
    assert signed.nothing_loaded()


@pytest.mark.parametrize("task", ["import", "export-verify"])
def test_a_folder_that_is_not_a_disc_says_so(signed, task, tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a disc\n")
    proc = run(signed["env"], task, "--from", str(folder), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 2 and f"--from: {folder} is not a disc" in message
    assert "replace the named volume" not in message and "damaged" not in message


@pytest.fixture
def swapped_image(signed, present, tmp_path):
    """An attacker's re-export: the archive holds another image (tagged with the amd64 ref, as
    `docker save` of that tag would write it), while MANIFEST.json, the signatures and the
    fingerprint are the genuine ones (SHA256SUMS all match)."""
    amd64 = signed["refs"]["amd64"]
    evil = other_image(signed, f"rapidship-test-{uuid.uuid4().hex[:8]}:evil")
    subprocess.run(["docker", "tag", evil, amd64], check=True)
    archive = saved_tar(amd64)
    subprocess.run(["docker", "rmi", "-f", evil], capture_output=True)
    return forge(signed, archive, tmp_path), evil


def test_an_archive_holding_another_image_is_refused_naming_it(signed, swapped_image, absent):
    dirs, evil = swapped_image
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1
    amd64 = f"image {signed['refs']['amd64']} ({signed['ids']['amd64'][:19]})"
    assert f"{amd64}: the archive holds no config that hashes to {signed['ids']['amd64'][:19]}" in message
    assert "nothing was loaded" in message and signed.nothing_loaded() and image_id(evil) is None


def test_a_swapped_layer_is_refused_naming_the_image_and_layer(signed, present, absent, tmp_path):
    amd64 = signed["refs"]["amd64"]
    subprocess.run(["docker", "load", "-i", str(signed["saved"])], check=True, capture_output=True)
    archive = saved_tar(*signed["refs"].values())
    subprocess.run(["docker", "rmi", "-f", *signed["ids"].values()], capture_output=True)
    dirs = forge(signed, swap_layer(archive, amd64, one_file_layer(b"#!/bin/sh\necho not what was signed\n")),
                 tmp_path)
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1
    assert f"image {amd64} ({signed['ids']['amd64'][:19]}): layer 1 of 1" in message and "is not in the archive" in message
    assert signed["refs"]["arm64"] not in message and signed.nothing_loaded()


def test_a_swapped_signature_is_refused(signed, absent, tmp_path):
    dirs = copy_dirs(signed["dirs"], tmp_path)
    amd64, arm64 = (next(i for i in signed["record"]["images"] if i["image_id"] == signed["ids"][a]) for a in ARCHES)
    for volume in dirs:  # arm64's signature object passed off as amd64's, on every volume
        sigs = volume / "signatures"
        target = sigs / amd64["signed_digest"].replace(":", "-")
        shutil.copy(sigs / arm64["signed_digest"].replace(":", "-") / "sig.json", target / "sig.json")
        reseal(volume)
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))
    message = error_of(proc)
    assert proc.returncode == 1 and f"image {amd64['ref']} ({amd64['image_id'][:19]})" in message
    assert "names another digest" in message and arm64["ref"] not in message and signed.nothing_loaded()


def test_export_verify_takes_the_key_the_same_way(signed):
    report = json.loads(ok(run(signed["env"], "export-verify", "--from", str(signed["out"]), "--key",
                               str(signed["pub"]), "--json")).stdout)
    assert report["verified_with"] == signed["fingerprint"]
    assert {x["image_id"] for x in report["verified"]} == set(signed["ids"].values())
    proc = run(signed["env"], "export-verify", "--from", str(signed["out"]))
    assert proc.returncode == 2 and "--key" in error_of(proc)
    proc = run(signed["env"], "export-verify", "--from", str(signed["out"]), "--key", str(signed["other"]))
    message = error_of(proc)
    assert proc.returncode == 2 and f"--key: {signed['other']} is key {signed['other_fingerprint']}" in message
    assert f"signed with key {signed['fingerprint']}" in message


# ---- install.sh ----------------------------------------------------------------------------------

def test_install_sh_verifies_with_the_key_then_loads(signed, absent):
    proc = install(signed, list(reversed(signed["dirs"])), "--key", str(signed["pub"]))
    assert proc.returncode == 0, proc.stderr
    for arch in ARCHES:
        assert f"loaded {signed['refs'][arch]} {signed['ids'][arch]}" in proc.stdout
        assert f"signature ok: {signed['refs'][arch]} {signed['ids'][arch]}" in proc.stderr
        assert image_id(signed["refs"][arch]) == signed["ids"][arch]
    assert f"verified 2 image(s) with key {signed['fingerprint']}" in proc.stderr


def test_install_sh_without_a_key_refuses_and_no_verify_says_what_it_skipped(signed, absent):
    proc = install(signed, signed["dirs"])
    assert proc.returncode == 2 and "--key cosign.pub" in proc.stderr and "--no-verify" in proc.stderr
    assert "loading into docker" not in proc.stderr and signed.nothing_loaded()
    proc = install(signed, signed["dirs"], "--no-verify")
    assert proc.returncode == 0, proc.stderr
    assert "WARNING: --no-verify" in proc.stderr and "signature NOT checked" in proc.stderr
    assert signed["fingerprint"] in proc.stderr
    assert all(image_id(signed["refs"][a]) == signed["ids"][a] for a in ARCHES)


def test_install_sh_refuses_another_key_naming_both_fingerprints(signed, absent):
    proc = install(signed, signed["dirs"], "--key", str(signed["other"]))
    assert proc.returncode == 2 and "refuse the disc" not in proc.stderr   # the operator's input, as in invoke import
    assert signed["fingerprint"] in proc.stderr and signed["other_fingerprint"] in proc.stderr
    assert "loading into docker" not in proc.stderr and signed.nothing_loaded()


def test_install_sh_refuses_an_archive_holding_another_image(signed, swapped_image, absent):
    dirs, evil = swapped_image
    proc = install(signed, dirs, "--key", str(signed["pub"]))
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    amd64 = f"image {signed['refs']['amd64']} ({signed['ids']['amd64']})"
    assert f"{amd64}: the archive holds no config that hashes to {signed['ids']['amd64']}" in last, proc.stderr
    assert "loading into docker" not in proc.stderr and signed.nothing_loaded() and image_id(evil) is None


def test_install_sh_refuses_a_swapped_payload_signature(signed, absent, tmp_path):
    dirs = copy_dirs(signed["dirs"], tmp_path)
    amd64, arm64 = (next(i for i in signed["record"]["images"] if i["image_id"] == signed["ids"][a]) for a in ARCHES)
    for volume in dirs:
        sigs = volume / "signatures"
        shutil.copy(sigs / arm64["signed_digest"].replace(":", "-") / "payload.sig",
                    sigs / amd64["signed_digest"].replace(":", "-") / "payload.sig")
        reseal(volume)
    proc = install(signed, dirs, "--key", str(signed["pub"]))
    assert proc.returncode == 1
    assert f"image {amd64['ref']} ({amd64['image_id']}): its signature does not verify" in proc.stderr
    assert "loading into docker" not in proc.stderr and signed.nothing_loaded()
    proc = run(signed["env"], "import", *from_args(dirs), "--key", str(signed["pub"]))  # Python refuses it too
    assert proc.returncode == 1 and "payload.json or payload.sig differ" in error_of(proc)


def test_install_sh_refuses_a_swapped_layer_before_docker_load(signed, present, absent, tmp_path):
    """install.sh finds every layer the signed config lists by its hash, or loads nothing."""
    subprocess.run(["docker", "load", "-i", str(signed["saved"])], check=True, capture_output=True)
    archive = saved_tar(signed["refs"]["amd64"])
    subprocess.run(["docker", "rmi", "-f", *signed["ids"].values()], capture_output=True)
    dirs = forge(signed, swap_layer(archive, signed["refs"]["amd64"], one_file_layer(b"bad")), tmp_path)
    proc = install(signed, dirs, "--key", str(signed["pub"]))
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "layer 1 of 1" in last and "is not in the archive" in last, proc.stderr
    assert "loading into docker" not in proc.stderr
    assert image_id(signed["refs"]["amd64"]) is None and image_id(signed["ids"]["amd64"]) is None


def test_the_signature_lists_the_names_and_export_refuses_any_other(signed, present, tmp_path):
    amd64 = signed["refs"]["amd64"]
    folder = signed["dirs"][0] / "signatures" / signed["sign"]["arches"]["amd64"]["digest"].replace(":", "-")
    names = json.loads((folder / "payload.json").read_text())["optional"]["io.rapidship.names"]
    assert amd64 in names and any(n.endswith(":26.10-cpu-debian12-py3.11-amd64") and "/staging/" in n for n in names)
    alias = f"rapidship-test-{uuid.uuid4().hex[:8]}:alias"
    subprocess.run(["docker", "tag", amd64, alias], check=True)
    try:
        proc = run(signed["env"], "export", "--image", alias, "--build-dir", str(signed["build"]), "--out",
                   str(tmp_path / "x"))
        message = error_of(proc)
        assert proc.returncode == 2 and f"{alias} ({signed['ids']['amd64'][:19]}): its signature covers only" in message
    finally:
        subprocess.run(["docker", "rmi", alias], capture_output=True)
