from __future__ import annotations

import enum
import json
from typing import Any

import pytest

from app.foundation.canonical import canonical_json, fingerprint, sha256_digest


def test_sorted_keys_and_no_whitespace() -> None:
    assert canonical_json({"b": [1, {"d": 2, "c": None}], "a": True}) == (
        b'{"a":true,"b":[1,{"c":null,"d":2}]}'
    )


def test_key_order_does_not_matter() -> None:
    assert canonical_json({"a": 1, "b": {"x": 1, "y": 2}}) == canonical_json(
        {"b": {"y": 2, "x": 1}, "a": 1}
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, b"1"),
        (-0.0, b"0"),
        (1e20, b"100000000000000000000"),
        (1.5, b"1.5"),
        (0.1, b"0.1"),
        (1e-7, b"1e-7"),
        ([2.0, 2], b"[2,2]"),
    ],
)
def test_one_number_form(value: Any, expected: bytes) -> None:
    assert canonical_json(value) == expected


def test_big_integers_are_exact() -> None:
    values = [2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**40, -(10**40)]
    encoded = canonical_json({"v": values})
    assert encoded == b'{"v":[' + ",".join(str(v) for v in values).encode() + b"]}"
    assert json.loads(encoded) == {"v": values}
    assert canonical_json(1e30) == str(int(1e30)).encode()


def test_unicode_is_raw_utf8_and_control_characters_are_escaped() -> None:
    assert canonical_json({"é": "😀\n\x00"}) == '{"é":"😀\\n\\u0000"}'.encode()
    assert canonical_json({"é": 1, "e": 2, "z": 3}) == '{"e":2,"z":3,"é":1}'.encode()


def test_tuples_and_subclasses_become_plain_json() -> None:
    class Colour(enum.Enum):
        RED = "red"

    class Label(str, enum.Enum):  # noqa: UP042 (str() of it is "Label.RED")
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    assert canonical_json((1, "a")) == canonical_json([1, "a"])
    assert canonical_json({Label.RED: Label.RED, "n": Level.HIGH}) == b'{"n":3,"red":"red"}'
    with pytest.raises(TypeError):
        canonical_json(Colour.RED)


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), {"a": float("-inf")}, {1: "x"}, {"a": {1, 2}}, b"x"]
)
def test_values_json_cannot_hold_are_refused(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_json(value)


def test_sha256_digest_format() -> None:
    assert sha256_digest(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_fingerprint_is_schema_agnostic_and_stable() -> None:
    a = fingerprint("lookup", {"term": "x", "limit": 1, "opts": {"b": 1, "a": 2}})
    b = fingerprint("lookup", {"opts": {"a": 2, "b": 1.0}, "limit": 1.0, "term": "x"})
    assert a == b
    assert a.startswith("sha256:")
    assert len(a) == len("sha256:") + 64


def test_fingerprint_separates_tool_and_arguments() -> None:
    assert fingerprint("lookup", {"term": "x"}) != fingerprint("search", {"term": "x"})
    assert fingerprint("lookup", {"term": "x"}) != fingerprint("lookup", {"term": "y"})
    assert fingerprint("a", ["b"]) != fingerprint("a,b", [])
    assert fingerprint("a", "") != fingerprint("", "a")
    assert fingerprint("t", {"n": 1}) != fingerprint("t", {"n": "1"})
    assert fingerprint("t", {"n": 1}) != fingerprint("t", {"n": True})
