"""Validation of the keys file's entries; every problem is reported, with its item index."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from app.api.auth.keyring import KEY_ID_PATTERN, KeyEntry
from app.api.auth.principal import SCOPES

FIELDS = ("id", "name", "hash", "scopes", "created_at")
NAME_PATTERN = re.compile(r"[A-Za-z0-9._@:-]{1,64}")
KNOWN_SCOPES = ", ".join(sorted(SCOPES))
_HASH_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")


def parse_entries(data: Any) -> tuple[list[KeyEntry], list[str]]:
    """The valid entries of a parsed keys file and every problem found (none: all valid)."""
    if data is None:
        return [], []
    if not isinstance(data, list):
        return [], ["the file must hold a YAML list of keys"]
    problems: list[str] = []
    entries = [_entry(item, f"[{index}]", problems) for index, item in enumerate(data)]
    problems.extend(_duplicates(entries))
    return [entry for entry in entries if entry is not None], problems


def unknown_scope(scope: object) -> str:
    return f"unknown scope {scope!r} (known: {KNOWN_SCOPES})"


def _entry(item: Any, where: str, problems: list[str]) -> KeyEntry | None:
    if not isinstance(item, dict):
        problems.append(f"{where}: each key is a mapping with {', '.join(FIELDS)}")
        return None
    found = len(problems)
    problems.extend(f"{where}: unknown field {field!r}" for field in item if field not in FIELDS)
    problems.extend(f"{where}: missing field {field!r}" for field in FIELDS if field not in item)
    key_id = _string(item, "id", KEY_ID_PATTERN, "12 lowercase hex digits", where, problems)
    name = _string(item, "name", NAME_PATTERN, "1-64 letters, digits or ._@:-", where, problems)
    key_hash = _string(item, "hash", _HASH_PATTERN, '"sha256:" and 64 hex digits', where, problems)
    scopes = _scopes(item, f"{where}.scopes", problems)
    created_at = _timestamp(item, f"{where}.created_at", problems)
    if len(problems) > found or not (key_id and name and key_hash and scopes and created_at):
        return None
    return KeyEntry(key_id, name, key_hash, scopes, created_at)


def _string(
    item: dict[str, Any],
    field: str,
    pattern: re.Pattern[str],
    expected: str,
    where: str,
    problems: list[str],
) -> str | None:
    if field not in item:
        return None
    value = item[field]
    if not isinstance(value, str) or not pattern.fullmatch(value):
        problems.append(f"{where}.{field}: expected {expected}, got {value!r}")
        return None
    return value


def _scopes(item: dict[str, Any], where: str, problems: list[str]) -> frozenset[str] | None:
    if "scopes" not in item:
        return None
    value = item["scopes"]
    if not isinstance(value, list) or not value:
        problems.append(f"{where}: expected a non-empty list of scopes")
        return None
    bad = [scope for scope in value if not isinstance(scope, str) or scope not in SCOPES]
    problems.extend(f"{where}: {unknown_scope(scope)}" for scope in bad)
    if len(set(map(str, value))) != len(value):
        problems.append(f"{where}: a scope is listed twice")
    return None if bad else frozenset(value)


def _timestamp(item: dict[str, Any], where: str, problems: list[str]) -> datetime | None:
    if "created_at" not in item:
        return None
    value = item["created_at"]
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        problems.append(f"{where}: expected an ISO 8601 timestamp with a UTC offset")
        return None
    return parsed


def _duplicates(entries: list[KeyEntry | None]) -> list[str]:
    problems = []
    for field in ("id", "name"):
        first: dict[str, int] = {}
        for index, entry in enumerate(entries):
            if entry is None:
                continue
            value = getattr(entry, field)
            if value in first:
                problems.append(f"[{index}].{field}: {value!r} is also [{first[value]}]'s {field}")
            else:
                first[value] = index
    return problems
