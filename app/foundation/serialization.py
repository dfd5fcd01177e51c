"""JSON encoding for JSON columns: orjson on the hot path, the stdlib for what it refuses."""

from __future__ import annotations

import json
from typing import Any

import orjson

_dumps = orjson.dumps
_NON_STR_KEYS = orjson.OPT_NON_STR_KEYS


def json_bytes(value: Any) -> bytes:
    """`value` as compact JSON, keys that are not strings written as strings.
    Raises TypeError for what orjson refuses even so (integers beyond 64 bits)."""
    try:
        # Without OPT_NON_STR_KEYS first: orjson then takes its quicker path for
        # every object (documents with only string keys, nearly all of them).
        return _dumps(value)
    except TypeError:
        return _dumps(value, option=_NON_STR_KEYS)


def dumps(value: Any) -> str:
    try:
        return json_bytes(value).decode()
    except TypeError:
        # orjson refuses integers beyond 64 bits; the stdlib writes them exactly.
        return json.dumps(value, ensure_ascii=False, allow_nan=False)


def loads(data: str | bytes | int | float) -> Any:
    # SQLite gives a column declared JSON numeric affinity: a document that is a
    # bare number ("3") comes back as that number, not as its text.
    if isinstance(data, (int, float)):
        return data
    return orjson.loads(data)
