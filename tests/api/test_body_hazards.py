"""The body checks where the quick path cannot decide: deep nesting."""

from __future__ import annotations

from typing import Any

import orjson

from app.api.body_hazards import REPEATED_KEY, TOO_DEEP_TO_CHECK, body_hazards
from app.service.errors import ProblemItem


def _nested(depth: int, inner: bytes) -> tuple[bytes, Any]:
    body = b"[" * depth + inner + b"]" * depth
    return body, orjson.loads(body)


def test_a_repeated_key_deeper_than_orjson_writes_is_found() -> None:
    body, data = _nested(300, b'{"a": 1, "a": 2}')

    assert body_hazards(body, data) == [ProblemItem("/0" * 300 + "/a", REPEATED_KEY)]


def test_a_body_deeper_than_orjson_writes_without_repeats_passes() -> None:
    body, data = _nested(300, b'{"a": 1, "b": 2}')

    assert body_hazards(body, data) == []


def test_a_body_deeper_than_the_interpreter_recurses_fails_closed() -> None:
    body, data = _nested(1020, b'{"a": 1}')

    assert body_hazards(body, data) == [ProblemItem("", TOO_DEEP_TO_CHECK)]
