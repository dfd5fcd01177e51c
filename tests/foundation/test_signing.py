from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.foundation.signing import (
    SigningKeyError,
    load_public_key,
    load_signer,
    public_pem,
    verify,
)

LINK = "ab" * 32


def write_private_key(path: Path, key: Ed25519PrivateKey) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def test_a_signature_verifies_with_the_public_key_only(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    signer = load_signer(write_private_key(tmp_path / "key.pem", key))
    (tmp_path / "public.pem").write_bytes(public_pem(key.public_key()))
    public = load_public_key(tmp_path / "public.pem")

    signature = signer.sign(LINK)
    assert verify(public, LINK, signature)
    assert not verify(public, "cd" * 32, signature)
    assert not verify(public, LINK, "not base64!")
    other = Ed25519PrivateKey.generate().public_key()
    assert not verify(other, LINK, signature)

    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert signer.key_id == hashlib.sha256(raw).hexdigest()


def test_unusable_keys_are_refused_with_a_reason(tmp_path: Path) -> None:
    with pytest.raises(SigningKeyError, match="cannot read"):
        load_signer(tmp_path / "missing.pem")
    (tmp_path / "junk.pem").write_text("junk")
    with pytest.raises(SigningKeyError, match="not an unencrypted PEM private key"):
        load_signer(tmp_path / "junk.pem")
    ec_key = generate_private_key(SECP256R1())
    (tmp_path / "ec.pem").write_bytes(
        ec_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(SigningKeyError, match="not an Ed25519 key"):
        load_signer(tmp_path / "ec.pem")
    (tmp_path / "ec_public.pem").write_bytes(
        ec_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(SigningKeyError, match="not an Ed25519 key"):
        load_public_key(tmp_path / "ec_public.pem")
