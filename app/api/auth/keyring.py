"""API keys in memory: look a presented key up by its id, compare its hash in constant time.

A key reads `tl_<id>_<secret>`: `id` is 12 random hex digits, a public handle
used only for lookup; `secret` is 32 random bytes, base64url (43 characters).
The file stores `sha256:<hex>` of the secret. A plain, unsalted SHA-256 is
enough here, unlike for passwords: the secret carries 256 bits of entropy, so
a stolen hash cannot be reversed by guessing, and a slow hash would only make
every request slower.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from app.api.auth.principal import Principal

KEY_PREFIX = "tl_"
KEY_ID_PATTERN = re.compile(r"[0-9a-f]{12}")
_PRESENTED = re.compile(r"tl_([0-9a-f]{12})_([A-Za-z0-9_-]{43,256})")
_SECRET_BYTES = 32
_DUMMY_HASH = "sha256:" + "0" * 64


@dataclass(frozen=True, slots=True)
class KeyEntry:
    id: str
    name: str
    hash: str
    scopes: frozenset[str]
    created_at: datetime


def hash_secret(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


def new_key_id() -> str:
    return secrets.token_hex(6)


def new_key(key_id: str) -> tuple[str, str]:
    """A fresh key for `key_id` and the hash to store for it."""
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    return f"{KEY_PREFIX}{key_id}_{secret}", hash_secret(secret)


class KeyRing:
    def __init__(self, entries: Iterable[KeyEntry]) -> None:
        self.entries = tuple(entries)
        self._by_id = {entry.id: entry for entry in self.entries}
        if len(self._by_id) != len(self.entries):
            raise ValueError("key ids must be unique")

    def __len__(self) -> int:
        return len(self.entries)

    def authenticate(self, presented: str) -> Principal | None:
        match = _PRESENTED.fullmatch(presented)
        entry = self._by_id.get(match.group(1)) if match else None
        # Hash and compare on every path, so timing does not tell a malformed key,
        # an unknown id and a wrong secret apart.
        computed = hash_secret(match.group(2) if match else presented[:256])
        expected = entry.hash if entry else _DUMMY_HASH
        if hmac.compare_digest(computed, expected) and entry is not None:
            return Principal(name=entry.name, scopes=entry.scopes)
        return None
