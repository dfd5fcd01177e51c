"""The output gate's first check: a callable's result must be a JSON value.

The response and every stored copy are written (and read back) with orjson,
so orjson is the check, with datetimes and dataclasses refused instead of
converted, and integers beyond 64 bits refused too (orjson would read them
back as floats). When orjson refuses a value, a walk finds where and why. One
thing orjson does not refuse, NaN or an infinity, it writes as `null`, which
would silently change the result: the walk looks for them only when the JSON
holds a `null`. Values orjson writes by value (enum members, UUIDs,
subclasses of the JSON types) are accepted as what they write.
"""

from __future__ import annotations

import enum
import json
import math
import uuid
from typing import Any

import orjson

_dumps = orjson.dumps
_STRICT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
# orjson refuses containers nested deeper than this (and so any cycle).
MAX_DEPTH = 254
_MIN_INT = -(2**63)
_MAX_INT = 2**64 - 1


# The options `json_problem` writes with. The engine's hot path writes a result
# with them itself: when orjson writes it and the text holds no `null`, the
# result is JSON and `json_problem` need not run (it would answer None).
JSON_CHECK_OPTIONS = _STRICT


def json_problem(value: Any) -> str | None:
    """Why `value` cannot be returned and stored as JSON, or None when it can."""
    try:
        data = _dumps(value, option=_STRICT)
    except TypeError as exc:
        # Fail closed: what orjson refuses is refused, located by the walk when it can.
        return _problem(value, "", 0) or str(exc)
    # partition(), not `in` or find(): `bytes in bytes` first tries the needle as an
    # integer and raises and clears a TypeError; find() parses its arguments as a
    # tuple; partition() takes one argument and, for text without the needle,
    # answers the text itself and two empty bytes. Half the cost of find().
    if data.partition(b"null")[1] and not _finite(value):
        return _problem(value, "", 0)
    return None


_PLAIN = frozenset({str, int, bool, type(None)})


def _finite(value: Any) -> bool:
    """No NaN or infinity inside `value` (which orjson wrote, so it is not too deep)."""
    kind = type(value)
    if kind is dict or kind is list or kind is tuple:
        for item in value.values() if kind is dict else value:
            if type(item) not in _PLAIN and not _finite(item):
                return False
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(item) for item in value)
    if isinstance(value, enum.Enum):
        return _finite(value.value)
    return True


def _problem(value: Any, pointer: str, depth: int) -> str | None:
    if value is None or isinstance(value, bool | int | str | float):
        return _scalar_problem(value, pointer or "/")
    if isinstance(value, dict | list | tuple):
        return _nested_problem(value, pointer, depth)
    if isinstance(value, enum.Enum):
        return _problem(value.value, pointer, depth)
    if isinstance(value, uuid.UUID | orjson.Fragment):
        return None
    return f"at {pointer or '/'}: {type(value).__name__} is not a JSON value"


def _scalar_problem(value: bool | int | str | float | None, where: str) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        if _MIN_INT <= value <= _MAX_INT:
            return None
        return f"at {where}: an integer beyond 64 bits (it would be read back inexactly)"
    if isinstance(value, str):
        if value.isascii() or _utf8(value):
            return None
        return f"at {where}: a string holds a lone surrogate (not UTF-8: it cannot be stored)"
    if math.isfinite(value):
        return None
    return f"at {where}: {value!r} is not a JSON number"


def _nested_problem(
    value: dict[Any, Any] | list[Any] | tuple[Any, ...], pointer: str, depth: int
) -> str | None:
    if depth >= MAX_DEPTH:
        where = pointer if len(pointer) <= 80 else pointer[:80] + "..."
        return f"at {where}: nested more than {MAX_DEPTH} levels (or self-referencing)"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                kind = type(key).__name__
                return f"at {pointer or '/'}: object keys must be strings, not {kind}"
            found = _problem(item, f"{pointer}/{_escape(key)}", depth + 1)
            if found is not None:
                return found
        return None
    for index, item in enumerate(value):
        found = _problem(item, f"{pointer}/{index}", depth + 1)
        if found is not None:
            return found
    return None


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def json_size(value: Any) -> int:
    """Bytes of `value` written as JSON (compact, UTF-8), as the stores write it."""
    try:
        return len(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
