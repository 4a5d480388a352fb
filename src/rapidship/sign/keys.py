"""Signing keys in cosign's layout, and the signers that use them.

`cosign.key` is what `cosign generate-key-pair` writes: a PEM block "ENCRYPTED SIGSTORE PRIVATE
KEY" holding JSON {kdf: scrypt(N, r, p, salt), cipher: nacl/secretbox(nonce), ciphertext} over the
PKCS#8 DER of an ECDSA P-256 key; `cosign.pub` is the PKIX public key PEM. So keys made here sign
for cosign, Harbor, Kyverno and policy-controller, and cosign's keys sign here. The crypto is
`cryptography` (ECDSA, scrypt) and PyNaCl (secretbox); nothing is hand-rolled.

Passwords come from the environment only (RAPIDSHIP_SIGNING_PASSWORD, else COSIGN_PASSWORD):
never a flag, never a record. A key reference is a file, or a PKCS#11 / KMS URI handed to an
external signer command (the seam for HSMs: the private key never leaves it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from rapidship.errors import ConfigError, RapidshipError

PRIVATE_LABEL = "ENCRYPTED SIGSTORE PRIVATE KEY"
LEGACY_LABELS = (PRIVATE_LABEL, "ENCRYPTED COSIGN PRIVATE KEY")
PASSWORD_ENV = ("RAPIDSHIP_SIGNING_PASSWORD", "COSIGN_PASSWORD")
KEY_ENV = "RAPIDSHIP_SIGNING_KEY"
COMMAND_ENV = "RAPIDSHIP_SIGNER_COMMAND"
COMMAND_PUB_ENV = "RAPIDSHIP_SIGNER_PUBLIC_KEY"
URI_SCHEMES = ("pkcs11:", "awskms://", "gcpkms://", "azurekms://", "hashivault://")
SCRYPT_N, SCRYPT_R, SCRYPT_P = 65536, 8, 1  # cosign's "standard" strength (64 MiB, ~0.2 s)
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\s*(.*?)\s*-----END \1-----", re.S)


class Signer(Protocol):
    reference: str  # what to show: a path or a URI, never key material

    def public_key(self) -> ec.EllipticCurvePublicKey: ...

    def sign(self, data: bytes) -> bytes: ...  # ASN.1 DER ECDSA-SHA256


# ---- pure parts ----

def pem(label: str, der: bytes) -> str:
    body = base64.b64encode(der).decode()
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n"


def fingerprint(public: ec.EllipticCurvePublicKey) -> str:
    """sha256 of the public key's DER (SubjectPublicKeyInfo): what discs and records name a key by."""
    return "sha256:" + hashlib.sha256(public_der(public)).hexdigest()


def public_der(public: ec.EllipticCurvePublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def public_pem(public: ec.EllipticCurvePublicKey) -> str:
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def _kdf(password: bytes, salt: bytes, n: int, r: int, p: int) -> bytes:
    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(password)


def encrypt_private(key: ec.EllipticCurvePrivateKey, password: bytes) -> str:
    """The cosign.key text for `key` under `password`."""
    from nacl.secret import SecretBox
    from nacl.utils import random

    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    salt, nonce = random(32), random(SecretBox.NONCE_SIZE)
    box = SecretBox(_kdf(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P))
    sealed = box.encrypt(der, nonce).ciphertext
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731 - Go's []byte JSON is standard base64
    doc = {"kdf": {"name": "scrypt", "params": {"N": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P}, "salt": b64(salt)},
           "cipher": {"name": "nacl/secretbox", "nonce": b64(nonce)}, "ciphertext": b64(sealed)}
    return pem(PRIVATE_LABEL, json.dumps(doc, separators=(",", ":")).encode())


def decrypt_private(text: str, password: bytes, where: str) -> ec.EllipticCurvePrivateKey:
    from nacl.exceptions import CryptoError
    from nacl.secret import SecretBox

    found = _PEM.search(text)
    if not found or found.group(1) not in LEGACY_LABELS:
        raise ConfigError(where, "not a cosign private key (no ENCRYPTED SIGSTORE PRIVATE KEY block)",
                          "pass the cosign.key that `invoke keys.generate` or `cosign generate-key-pair` wrote")
    try:
        doc = json.loads(base64.b64decode(found.group(2)))
        kdf, cipher = doc["kdf"], doc["cipher"]
        params = kdf["params"]
        n, r, p = int(params["N"]), int(params["r"]), int(params["p"])
        salt, nonce = base64.b64decode(kdf["salt"]), base64.b64decode(cipher["nonce"])
        sealed = base64.b64decode(doc["ciphertext"])
    except (ValueError, KeyError, TypeError):
        raise ConfigError(where, "the encrypted key is damaged", "restore cosign.key from its backup") from None
    if kdf.get("name") != "scrypt" or cipher.get("name") != "nacl/secretbox" or len(nonce) != 24:
        raise ConfigError(where, f"unsupported key encryption ({kdf.get('name')} / {cipher.get('name')})",
                          "re-create the key with invoke keys.generate")
    if n < 2 or n & (n - 1) or n > 1 << 20 or not 0 < r * p < 64:
        raise ConfigError(where, f"scrypt parameters N={n} r={r} p={p} are out of range", "re-create the key")
    try:
        der = SecretBox(_kdf(password, salt, n, r, p)).decrypt(sealed, nonce)
    except CryptoError:
        raise ConfigError(where, "wrong password (or a damaged key)",
                          f"export the key's password as {PASSWORD_ENV[0]} (or {PASSWORD_ENV[1]})") from None
    key = serialization.load_der_private_key(der, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ConfigError(where, "not an ECDSA P-256 key", "re-create the key with invoke keys.generate")
    return key


def load_public(path: str | Path, flag: str = "--key") -> ec.EllipticCurvePublicKey:
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise ConfigError(flag, f"{path}: cannot read the public key ({err.strerror or err.__class__.__name__})",
                          "pass the cosign.pub that was given to you out of band") from None
    if len(data) > 64 * 1024:
        raise ConfigError(flag, f"{path} is not a public key (over 64 KiB)", "pass cosign.pub")
    if b"PRIVATE KEY" in data:
        raise ConfigError(flag, f"{path} is a private key", "verification takes the public key (cosign.pub)")
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise ConfigError(flag, f"{path} is not a PEM public key", "pass cosign.pub") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ConfigError(flag, f"{path} is not an ECDSA P-256 public key", "cosign keys are P-256: pass cosign.pub")
    return key


def verify_signature(public: ec.EllipticCurvePublicKey, signature: bytes, data: bytes) -> bool:
    try:
        public.verify(signature, data, ec.ECDSA(hashes.SHA256()))
        return True
    except InvalidSignature:
        return False


# ---- signers ----

@dataclass(frozen=True)
class FileSigner:
    reference: str
    key: ec.EllipticCurvePrivateKey

    def __repr__(self) -> str:  # keep the key out of any traceback
        return f"FileSigner({self.reference!r})"

    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self.key.public_key()

    def sign(self, data: bytes) -> bytes:
        return self.key.sign(data, ec.ECDSA(hashes.SHA256()))


@dataclass(frozen=True)
class CommandSigner:
    """A PKCS#11 / KMS key behind an external command: payload on stdin, the DER (or base64) signature
    on stdout, the key URI in $RAPIDSHIP_SIGNER_KEY_REF. Each answer is checked against the public
    key before it is used, so a misbehaving signer cannot produce a bad signature silently."""

    reference: str
    command: tuple[str, ...]
    public: ec.EllipticCurvePublicKey

    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self.public

    def sign(self, data: bytes) -> bytes:
        try:
            proc = subprocess.run(self.command, input=data, capture_output=True, check=False, timeout=120,
                                  env=dict(os.environ, RAPIDSHIP_SIGNER_KEY_REF=self.reference))
        except (OSError, subprocess.TimeoutExpired) as err:
            raise RapidshipError(COMMAND_ENV, f"the signer command did not run: {err.__class__.__name__}",
                                 "check the command and the token / KMS it talks to") from None
        if proc.returncode != 0:
            raise RapidshipError(COMMAND_ENV, f"the signer command failed (exit {proc.returncode})",
                                 "check the token / KMS and the key URI")
        # DER as printed (stripping it would eat a last byte that happens to be 0x0a or 0x20), DER
        # with a line end after it, or base64 text: the first form that verifies is the signature
        out = proc.stdout
        candidates = [out, out.rstrip(b"\r\n"), _b64_or_none(out.strip())]
        signature = next((c for c in candidates if c and verify_signature(self.public, c, data)), None)
        if signature is None:
            raise RapidshipError(COMMAND_ENV, f"the signer's answer does not verify with {COMMAND_PUB_ENV}",
                                 "the command must print an ECDSA-SHA256 signature made by that key")
        return signature


def _b64_or_none(data: bytes) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        return None


def password(required_for: str) -> bytes:
    for name in PASSWORD_ENV:
        value = os.environ.get(name)
        if value:
            return value.encode()
    raise ConfigError(PASSWORD_ENV[0], f"no password for {required_for}",
                      f"export {PASSWORD_ENV[0]} (or {PASSWORD_ENV[1]}); passwords are never flags")


def configured_key() -> str | None:
    return os.environ.get(KEY_ENV) or None


def open_signer(ref: str, flag: str = "--key") -> Signer:
    """A file path (cosign.key) or a PKCS#11 / KMS URI (through $RAPIDSHIP_SIGNER_COMMAND)."""
    if ref.startswith(URI_SCHEMES):
        command = os.environ.get(COMMAND_ENV, "")
        pub = os.environ.get(COMMAND_PUB_ENV, "")
        if not command or not pub:
            raise ConfigError(flag, f"{ref.split(':', 1)[0]}: keys live in a token or KMS",
                              f"set {COMMAND_ENV} (a command that signs stdin with that key) and {COMMAND_PUB_ENV} "
                              "(its public key PEM); see docs/supply-chain.md")
        return CommandSigner(ref, tuple(shlex.split(command)), load_public(pub, COMMAND_PUB_ENV))
    if "://" in ref:
        raise ConfigError(flag, f"{ref.split('://', 1)[0]}:// is not a key scheme rapidship knows",
                          "pass a cosign.key path or a pkcs11:/awskms:// ... URI")
    path = Path(ref)
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(flag, f"{ref}: cannot read the key ({getattr(err, 'strerror', None) or err.__class__.__name__})",
                          "pass the cosign.key path (or set RAPIDSHIP_SIGNING_KEY)") from None
    return FileSigner(ref, decrypt_private(text, password(f"the key {ref}"), flag))


def generate(out: Path) -> tuple[Path, Path]:
    """Write out/cosign.key (0600, encrypted) and out/cosign.pub; refuse to overwrite either."""
    secret = password("the new key")
    key_path, pub_path = out / "cosign.key", out / "cosign.pub"
    for path in (key_path, pub_path):
        if path.exists():
            raise ConfigError("--out", f"{path} exists", "move it away or pick another --out: keys are never overwritten")
    out.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(encrypt_private(key, secret))
    pub_path.write_text(public_pem(key.public_key()))
    return key_path, pub_path
