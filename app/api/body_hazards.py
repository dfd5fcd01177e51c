"""What a parsed JSON body may not hold: U+0000 in a string or key, or a repeated key.

PostgreSQL cannot store U+0000 in text or JSON, and a repeated key is ambiguous
(orjson, like most parsers, silently keeps the last one), so both are refused
(DESIGN §4) with a pointer to each.

Both checks are cheap on a body that has neither. A U+0000 can only reach a
string through the escape `\\u0000` (JSON forbids raw control characters), so
the walk runs only when the body holds that text. For repeated keys, the body's
colons are counted against those of the parsed value written back by orjson:
without repeated keys, each colon is either a key's separator in both or a
character inside a string in both. A repeated key loses its separator and its
value's colons, so the counts differ, unless a colon was written as an escape
(`\\u003a`) in the body: then, as when the counts differ, the body is parsed
again with the standard library, whose hook sees every key of every object.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from app.service.errors import ProblemItem

_NUL_ESCAPE = b"\\u0000"
NUL_IN_STRING = "a string may not contain U+0000"
NUL_IN_KEY = "an object key may not contain U+0000"
REPEATED_KEY = "an object may not repeat a key"
TOO_DEEP_TO_CHECK = "nested too deep to check for repeated keys"


def body_hazards(body: bytes | bytearray, data: Any) -> list[ProblemItem]:
    """Every U+0000 and every repeated key in `body`, which orjson parsed as `data`."""
    problems: list[ProblemItem] = []
    if _NUL_ESCAPE in body:
        problems.extend(_nul_problems(data))
    if _may_repeat_keys(body, data):
        problems.extend(_repeated_key_problems(body))
    return problems


def _may_repeat_keys(body: bytes | bytearray, data: Any) -> bool:
    if type(data) is not dict and type(data) is not list:
        return False
    if b"\\u003a" in body or b"\\u003A" in body:
        return True
    try:
        written = orjson.dumps(data)
    except TypeError:
        # Nested deeper than orjson writes (it reads deeper): the standard library decides.
        return True
    return body.count(b":") != written.count(b":")


def _nul_problems(data: Any) -> list[ProblemItem]:
    problems: list[ProblemItem] = []
    # (value, its pointer, whether the key it is under holds U+0000)
    stack: list[tuple[Any, str, bool]] = [(data, "", False)]
    while stack:
        value, pointer, nul_key = stack.pop()
        if nul_key:
            problems.append(ProblemItem(pointer, NUL_IN_KEY))
        if isinstance(value, str):
            if "\x00" in value:
                problems.append(ProblemItem(pointer, NUL_IN_STRING))
        elif isinstance(value, dict):
            stack.extend(
                (child, f"{pointer}/{escape_token(key)}", "\x00" in key)
                for key, child in reversed(value.items())
            )
        elif isinstance(value, list):
            stack.extend((child, at, False) for child, at in _reversed_items(value, pointer))
    return problems


class _RepeatingObject(dict[str, Any]):
    """An object whose source repeated `repeated` (each once, in source order)."""

    repeated: list[str]


def _keep_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    repeating = _RepeatingObject(obj)
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for key, _ in pairs:
        if key in seen:
            repeated[key] = None
        seen.add(key)
    repeating.repeated = list(repeated)
    return repeating


def _repeated_key_problems(body: bytes | bytearray) -> list[ProblemItem]:
    try:
        parsed = json.loads(body, object_pairs_hook=_keep_repeats)
    except RecursionError:
        # Only where the nesting limit allows more than the interpreter's recursion: fail closed.
        return [ProblemItem("", TOO_DEEP_TO_CHECK)]
    problems: list[ProblemItem] = []
    stack: list[tuple[Any, str]] = [(parsed, "")]
    while stack:
        value, pointer = stack.pop()
        if isinstance(value, dict):
            if isinstance(value, _RepeatingObject):
                problems.extend(
                    ProblemItem(f"{pointer}/{escape_token(key)}", REPEATED_KEY)
                    for key in value.repeated
                )
            stack.extend(
                (child, f"{pointer}/{escape_token(key)}") for key, child in reversed(value.items())
            )
        elif isinstance(value, list):
            stack.extend(_reversed_items(value, pointer))
    return problems


def _reversed_items(items: list[Any], pointer: str) -> list[tuple[Any, str]]:
    """A list's items with their pointers, last first: popped from a stack, they
    come in document order."""
    return [(items[index], f"{pointer}/{index}") for index in range(len(items) - 1, -1, -1)]


def escape_token(key: str) -> str:
    """`key` as one reference token of an RFC 6901 pointer."""
    return key.replace("~", "~0").replace("/", "~1")
