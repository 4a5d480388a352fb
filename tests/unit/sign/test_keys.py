"""cosign-format keys: made here, read back, and read by code that shares nothing with ours."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from nacl.secret import SecretBox

from rapidship.errors import ConfigError, RapidshipError
from rapidship.sign import keys

PASSWORD = "correct horse battery staple"


@pytest.fixture
def pair(tmp_path, monkeypatch):
    monkeypatch.setenv("RAPIDSHIP_SIGNING_PASSWORD", PASSWORD)
    return keys.generate(tmp_path / "k")


def test_generate_writes_cosigns_layout_readable_without_our_code(pair):
    key_path, pub_path = pair
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    text = key_path.read_text()
    body = re.search(r"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n(.*)\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----",
                     text, re.S).group(1)
    assert all(len(line) <= 64 for line in body.splitlines())
    doc = json.loads(base64.b64decode(body))
    assert doc["kdf"]["name"] == "scrypt" and doc["cipher"]["name"] == "nacl/secretbox"
    params = doc["kdf"]["params"]
    # OpenSSL's scrypt (hashlib) derives the box key: an implementation independent of ours
    box_key = hashlib.scrypt(PASSWORD.encode(), salt=base64.b64decode(doc["kdf"]["salt"]), n=params["N"],
                             r=params["r"], p=params["p"], dklen=32, maxmem=256 << 20)
    der = SecretBox(box_key).decrypt(base64.b64decode(doc["ciphertext"]), base64.b64decode(doc["cipher"]["nonce"]))
    private = serialization.load_der_private_key(der, None)
    public = serialization.load_pem_public_key(pub_path.read_bytes())
    assert private.public_key().public_numbers() == public.public_numbers()
    assert isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == "secp256r1"
    assert PASSWORD not in text and PASSWORD.encode() not in der


def test_signer_signs_what_cryptography_verifies(pair):
    key_path, pub_path = pair
    signer = keys.open_signer(str(key_path))
    sig = signer.sign(b"payload")
    serialization.load_pem_public_key(pub_path.read_bytes()).verify(sig, b"payload", ec.ECDSA(hashes.SHA256()))
    assert keys.fingerprint(signer.public_key()) == "sha256:" + hashlib.sha256(
        serialization.load_pem_public_key(pub_path.read_bytes()).public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).hexdigest()
    assert str(key_path) in repr(signer) and "PRIVATE" not in repr(signer)


def test_a_key_cosign_would_write_is_read(tmp_path, monkeypatch):
    """The older 'ENCRYPTED COSIGN PRIVATE KEY' label with N=32768, built here from the format alone."""
    private = ec.generate_private_key(ec.SECP256R1())
    der = private.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    salt, nonce = os.urandom(32), os.urandom(24)
    box_key = hashlib.scrypt(b"pw", salt=salt, n=32768, r=8, p=1, dklen=32, maxmem=256 << 20)
    sealed = SecretBox(box_key).encrypt(der, nonce).ciphertext
    doc = {"kdf": {"name": "scrypt", "params": {"N": 32768, "r": 8, "p": 1}, "salt": base64.b64encode(salt).decode()},
           "cipher": {"name": "nacl/secretbox", "nonce": base64.b64encode(nonce).decode()},
           "ciphertext": base64.b64encode(sealed).decode()}
    path = tmp_path / "cosign.key"
    path.write_text(keys.pem("ENCRYPTED COSIGN PRIVATE KEY", json.dumps(doc).encode()))
    monkeypatch.setenv("COSIGN_PASSWORD", "pw")
    monkeypatch.delenv("RAPIDSHIP_SIGNING_PASSWORD", raising=False)
    assert keys.open_signer(str(path)).public_key().public_numbers() == private.public_key().public_numbers()


@pytest.mark.parametrize("case", ["wrong password", "no password", "damaged", "not a key", "missing"])
def test_bad_keys_are_one_clear_error(pair, monkeypatch, tmp_path, case):
    key_path, _ = pair
    ref = str(key_path)
    if case == "wrong password":
        monkeypatch.setenv("RAPIDSHIP_SIGNING_PASSWORD", "nope")
    elif case == "no password":
        monkeypatch.delenv("RAPIDSHIP_SIGNING_PASSWORD")
        monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    elif case == "damaged":
        text = key_path.read_text().splitlines()
        text[2] = text[2][:10] + ("A" if text[2][10] != "A" else "B") + text[2][11:]
        key_path.write_text("\n".join(text) + "\n")
    elif case == "not a key":
        key_path.write_text("hello\n")
    else:
        ref = str(tmp_path / "absent.key")
    with pytest.raises(ConfigError) as err:
        keys.open_signer(ref)
    assert PASSWORD not in err.value.message
    assert {"wrong password": "wrong password", "no password": "RAPIDSHIP_SIGNING_PASSWORD",
            "damaged": "", "not a key": "not a cosign private key", "missing": "cannot read"}[case] in err.value.message


def test_keys_are_never_overwritten(pair):
    key_path, _ = pair
    before = key_path.read_bytes()
    with pytest.raises(ConfigError, match="exists"):
        keys.generate(key_path.parent)
    assert key_path.read_bytes() == before


def test_public_key_loader_refuses_what_is_not_a_p256_public_key(pair, tmp_path):
    key_path, pub_path = pair
    assert keys.load_public(pub_path).curve.name == "secp256r1"
    rsa_pub = tmp_path / "rsa.pub"
    rsa_pub.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    for path, words in ((key_path, "private key"), (rsa_pub, "P-256"), (tmp_path / "none.pub", "cannot read")):
        with pytest.raises(ConfigError, match=words):
            keys.load_public(path)


def test_uri_keys_need_the_signer_command(monkeypatch):
    monkeypatch.delenv(keys.COMMAND_ENV, raising=False)
    with pytest.raises(ConfigError, match=keys.COMMAND_ENV):
        keys.open_signer("pkcs11:token=release;object=cosign")
    with pytest.raises(ConfigError, match="not a key scheme"):
        keys.open_signer("ftp://somewhere/key")


def _token_script(tmp_path: Path, body: str) -> str:
    script = tmp_path / "token-sign.py"
    script.write_text(body)
    return f"{sys.executable} {script}"


def test_signer_command_is_the_hsm_seam_and_its_answers_are_checked(pair, tmp_path, monkeypatch):
    """A stand-in for a PKCS#11 token: a separate process holding the key signs stdin."""
    key_path, pub_path = pair
    private = keys.open_signer(str(key_path)).key
    held = tmp_path / "token.der"
    held.write_bytes(private.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    good = _token_script(tmp_path, (
        "import os, sys\nfrom cryptography.hazmat.primitives import hashes, serialization\n"
        "from cryptography.hazmat.primitives.asymmetric import ec\n"
        f"k = serialization.load_der_private_key(open({str(held)!r}, 'rb').read(), None)\n"
        "assert os.environ['RAPIDSHIP_SIGNER_KEY_REF'].startswith('pkcs11:')\n"
        "sys.stdout.buffer.write(k.sign(sys.stdin.buffer.read(), ec.ECDSA(hashes.SHA256())))\n"))
    monkeypatch.setenv(keys.COMMAND_ENV, good)
    monkeypatch.setenv(keys.COMMAND_PUB_ENV, str(pub_path))
    signer = keys.open_signer("pkcs11:token=release;object=cosign")
    assert keys.verify_signature(signer.public_key(), signer.sign(b"data"), b"data")
    monkeypatch.setenv(keys.COMMAND_ENV, _token_script(tmp_path, "import sys\nsys.stdout.write('MEUCIQ==')\n"))
    with pytest.raises(RapidshipError, match="does not verify"):
        keys.open_signer("pkcs11:token=release;object=cosign").sign(b"data")


def test_a_der_signature_ending_in_a_whitespace_byte_is_taken_as_printed(pair, tmp_path, monkeypatch):
    """About one DER signature in 40 ends in 0x09-0x0d or 0x20: stripping the answer broke those
    (the seam's test failed now and then)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key_path, pub_path = pair
    private = keys.open_signer(str(key_path)).key
    for attempt in range(2000):
        signature = private.sign(b"data", ec.ECDSA(hashes.SHA256()))
        if signature[-1:] in (b" ", b"\n", b"\t", b"\r", b"\x0b", b"\x0c"):
            break
    else:
        pytest.fail("no signature ending in whitespace in 2000 tries")
    held = tmp_path / "answer.der"
    held.write_bytes(signature)
    monkeypatch.setenv(keys.COMMAND_ENV, _token_script(
        tmp_path, f"import sys\nsys.stdin.buffer.read()\nsys.stdout.buffer.write(open({str(held)!r}, 'rb').read())\n"))
    monkeypatch.setenv(keys.COMMAND_PUB_ENV, str(pub_path))
    assert keys.open_signer("pkcs11:token=release;object=cosign").sign(b"data") == signature
