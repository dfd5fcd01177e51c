from __future__ import annotations

import enum
import uuid
from collections import OrderedDict
from datetime import date
from typing import Any

import pytest

from app.engine.json_output import MAX_DEPTH, json_problem, json_size


class Colour(enum.Enum):
    RED = "red"
    BAD = frozenset({1})


class Size(enum.IntEnum):
    SMALL = 1


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        None,
        {"a": [1, 2.5, True, None, "x"]},
        (1, 2),
        OrderedDict(a=1),
        {"n": 2**64 - 1, "m": -(2**63)},
        [Colour.RED, Size.SMALL, uuid.UUID(int=3)],
        {"text": "null", "value": None},
        nested(MAX_DEPTH),
    ],
)
def test_json_values_pass(value: Any) -> None:
    assert json_problem(value) is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({1, 2}, "at /: set is not a JSON value"),
        ({"a": [None, {"b": float("nan")}]}, "at /a/1/b: nan is not a JSON number"),
        ({"a~b/c": float("inf")}, "at /a~0b~1c: inf is not a JSON number"),
        ([date(2026, 1, 1)], "at /0: date is not a JSON value"),
        ({"n": 2**64}, "at /n: an integer beyond 64 bits"),
        ({"n": -(2**63) - 1}, "at /n: an integer beyond 64 bits"),
        ({None: 1}, "at /: object keys must be strings, not NoneType"),
        ([Colour.BAD], "at /0: frozenset is not a JSON value"),
        (nested(MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} levels"),
        ("\udfff", "at /: a string holds a lone surrogate"),
    ],
)
def test_what_json_cannot_hold_is_named_with_its_pointer(value: Any, problem: str) -> None:
    found = json_problem(value)
    assert found is not None
    assert problem in found, found


def test_a_key_orjson_refuses_is_refused_even_when_it_is_a_str() -> None:
    class Key(enum.StrEnum):
        A = "a"

    assert json_problem({Key.A: 1}) is not None


def test_json_size_counts_the_compact_utf8_bytes() -> None:
    assert json_size({"a": "\u2603"}) == len('{"a":"\u2603"}'.encode())
