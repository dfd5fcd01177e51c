"""Ed25519 signatures over checkpoint links, with the `cryptography` library.

The operator holds the private key (PEM, PKCS8, unencrypted; the file named by
`TOOLLOOP_CHECKPOINT_SIGNING_KEY`); a verifier needs only the public key (PEM,
SubjectPublicKeyInfo). A signature covers the checkpoint link's 32 bytes and is
stored as base64. A key's id is SHA-256 of its raw public bytes, hex.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


class SigningKeyError(ValueError):
    """A key file that cannot be read as an Ed25519 key (the message says why)."""


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True, slots=True)
class CheckpointSigner:
    private_key: Ed25519PrivateKey
    key_id: str

    def sign(self, link_hex: str) -> str:
        return base64.b64encode(self.private_key.sign(bytes.fromhex(link_hex))).decode()


def signer_from_pem(data: bytes) -> CheckpointSigner:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        raise SigningKeyError(f"not an unencrypted PEM private key: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError("the private key is not an Ed25519 key")
    return CheckpointSigner(key, key_id(key.public_key()))


def load_signer(path: str | Path) -> CheckpointSigner:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise SigningKeyError(
            f"cannot read the signing key {str(path)!r}: {error.strerror}"
        ) from None
    return signer_from_pem(data)


def public_key_from_pem(data: bytes) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as error:
        raise SigningKeyError(f"not a PEM public key: {error}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningKeyError("the public key is not an Ed25519 key")
    return key


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise SigningKeyError(
            f"cannot read the public key {str(path)!r}: {error.strerror}"
        ) from None
    return public_key_from_pem(data)


def verify(public_key: Ed25519PublicKey, link_hex: str, signature_b64: str) -> bool:
    """Whether `signature_b64` is the key's signature of the checkpoint link."""
    try:
        signature = base64.b64decode(signature_b64, validate=True)
        public_key.verify(signature, bytes.fromhex(link_hex))
    except (InvalidSignature, ValueError):
        return False
    return True


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
