"""What no database can store is found (outputs) or escaped (messages)."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.receipt import CallError, ErrorKind
from app.engine.storable import storable_text, unstorable_problem


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("plain", "plain"),
        ("ünï 🙂", "ünï 🙂"),
        ("a\x00b", "a\\u0000b"),
        ("ü\x00", "ü\\u0000"),
        ("a\ud800b\udfff", "a\\ud800b\\udfff"),
    ],
)
def test_a_message_is_stored_with_what_cannot_be_stored_escaped(text: str, stored: str) -> None:
    assert storable_text(text) == stored
    assert CallError(ErrorKind.EXCEPTION, text).to_dict()["message"] == stored
    stored.encode()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"a": ["x", {"b": "\x00"}]}, "at /a/1/b: a string holds U+0000"),
        ("\x00", "at /: a string holds U+0000"),
        ({"ok": 1, "k/\x00": 1}, "at /k~1\\u0000: an object key holds U+0000"),
        # The first in document order.
        (["ok", "\x00", {"\x00": 1}], "at /1: a string holds U+0000"),
    ],
)
def test_an_output_holding_nul_is_located(value: Any, problem: str) -> None:
    assert unstorable_problem(value) == problem


def test_an_output_without_nul_has_no_problem() -> None:
    assert unstorable_problem({"a": ["\\u0000", 1, None, 2.5, {"b": True}]}) is None
