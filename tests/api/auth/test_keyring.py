from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.api.auth.keyring import KeyEntry, KeyRing, hash_secret, new_key
from app.api.auth.principal import PLANS_EXECUTE, RUNS_READ, Principal

KEY_ID = "0123456789ab"


def ring_with_one_key() -> tuple[KeyRing, str]:
    key, key_hash = new_key(KEY_ID)
    entry = KeyEntry(
        KEY_ID, "worker", key_hash, frozenset({PLANS_EXECUTE, RUNS_READ}), datetime.now(UTC)
    )
    return KeyRing([entry]), key


def test_a_new_key_has_the_documented_shape_and_its_secret_is_hashed() -> None:
    key, key_hash = new_key(KEY_ID)
    prefix, key_id, secret = key.split("_", 2)

    assert (prefix, key_id) == ("tl", KEY_ID)
    assert len(secret) >= 43
    assert key_hash == hash_secret(secret)
    assert key_hash.startswith("sha256:")
    assert secret not in key_hash


def test_the_right_key_authenticates_as_its_name_and_scopes() -> None:
    ring, key = ring_with_one_key()

    assert ring.authenticate(key) == Principal("worker", frozenset({PLANS_EXECUTE, RUNS_READ}))


def test_a_wrong_secret_for_a_known_id_is_refused() -> None:
    ring, key = ring_with_one_key()
    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")

    assert ring.authenticate(wrong) is None


def test_an_unknown_id_is_refused() -> None:
    ring, key = ring_with_one_key()

    assert ring.authenticate(key.replace(KEY_ID, "ba9876543210")) is None


@pytest.mark.parametrize(
    "presented",
    ["", "tl_", "garbage", "tl_0123456789ab_short", "TL_0123456789ab_" + "a" * 43, "é" * 50],
)
def test_malformed_keys_are_refused(presented: str) -> None:
    ring, _ = ring_with_one_key()

    assert ring.authenticate(presented) is None


def test_an_empty_ring_refuses_everything() -> None:
    _, key = ring_with_one_key()

    assert KeyRing([]).authenticate(key) is None


def test_duplicate_ids_are_rejected() -> None:
    entry = KeyEntry(KEY_ID, "a", hash_secret("x"), frozenset({RUNS_READ}), datetime.now(UTC))

    with pytest.raises(ValueError, match="unique"):
        KeyRing([entry, entry])
