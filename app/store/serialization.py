"""JSON encoding for JSON columns: orjson on the hot path, the stdlib for what it refuses."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        # orjson refuses integers beyond 64 bits; the stdlib writes them exactly.
        return json.dumps(value, ensure_ascii=False, allow_nan=False)


def loads(data: str | bytes) -> Any:
    return orjson.loads(data)
