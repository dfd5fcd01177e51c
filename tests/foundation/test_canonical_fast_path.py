"""Values orjson already writes canonically skip the copying pass, with the same bytes."""

from __future__ import annotations

import enum
import hashlib
from typing import Any

import orjson
import pytest

from app.foundation.canonical import _normalize, canonical_json, fingerprint, sha256_digest


class Label(str, enum.Enum):  # noqa: UP042 (a str subclass on purpose)
    RED = "red"


def _slow(value: Any) -> bytes:
    return orjson.dumps(_normalize(value), option=orjson.OPT_SORT_KEYS)


def _nested(depth: int) -> Any:
    value: Any = 1.0
    for _ in range(depth):
        value = {"a": [value]}
    return value


@pytest.mark.parametrize(
    "value",
    [
        {"text": "hello", "n": 3, "ok": True, "none": None},
        {"b": [1, 2, {"d": 0.5, "c": "x"}], "a": (1, "t")},
        {"f": 2.0},
        {"f": -0.0},
        {"f": [1.5, 3.0]},
        {"big": 2**64, "small": -(2**63) - 1, "edge": 2**64 - 1},
        {Label.RED: "key is a str subclass"},
        {"v": Label.RED},
        _nested(40),
        [],
        {},
        "plain",
    ],
)
def test_fast_and_slow_paths_write_the_same_bytes(value: Any) -> None:
    assert canonical_json(value) == _slow(value)


@pytest.mark.parametrize("value", [{"x": float("nan")}, {"x": [float("inf")]}, {1: "x"}])
def test_values_json_cannot_hold_are_still_refused(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_json(value)


def test_fingerprint_is_unchanged_by_the_fast_path() -> None:
    assert fingerprint("t", {"a": 1.0}) == fingerprint("t", {"a": 1})
    assert fingerprint("t", {"a": 1.5}) != fingerprint("t", {"a": 1})


@pytest.mark.parametrize(
    "args",
    [
        {"text": "hello"},
        {"f": 2.0, "g": -0.0},
        {"big": 2**70},
        {Label.RED: "key is a str subclass"},
        (1, "t"),
        "plain",
        _nested(40),
    ],
)
def test_fingerprint_hashes_the_canonical_pair(args: Any) -> None:
    expected = "sha256:" + hashlib.sha256(_slow(["tool", args])).hexdigest()
    assert fingerprint("tool", args) == expected


@pytest.mark.parametrize("size", [0, 1, 127, 128, 129, 4096])
def test_short_and_long_digests_agree_with_hashlib(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    assert sha256_digest(data) == "sha256:" + hashlib.sha256(data).hexdigest()
