"""Canonical JSON: one byte form per JSON value, used for hashes and fingerprints.

Sorted keys, no whitespace, UTF-8, and one number form: a float with an
integral value is written as the integer (1.0 -> 1, -0.0 -> 0). Integers
beyond 64 bits are embedded as exact digits. NaN and infinities are refused
(JSON has no form for them), and so is anything that is not a JSON value.
"""

from __future__ import annotations

import hashlib
import importlib
import math
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

import orjson


def _builtin_sha256() -> Callable[[bytes], Any]:
    """CPython's own SHA-256: for a few dozen bytes (a typical call's fingerprint)
    about twice as fast as OpenSSL's, whose setup cost dominates short inputs."""
    for name in ("_sha256", "_sha2"):  # renamed in 3.12
        with suppress(ImportError):
            function: Callable[[bytes], Any] = importlib.import_module(name).sha256
            return function
    return hashlib.sha256


_small_sha256 = _builtin_sha256()
_SMALL = 128  # bytes; beyond this OpenSSL's is as fast or faster

_dumps = orjson.dumps
_SORT_KEYS = orjson.OPT_SORT_KEYS

# orjson serialises integers in [-2**63, 2**64 - 1] natively.
_ORJSON_MIN_INT = -(2**63)
_ORJSON_MAX_INT = 2**64 - 1


def canonical_json(value: Any) -> bytes:
    if _orjson_ready(value, 0):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return orjson.dumps(_normalize(value), option=orjson.OPT_SORT_KEYS)


def sorted_json(value: Any) -> bytes:
    """Compact JSON with sorted keys, numbers as orjson writes them (a float keeps
    its `.0`): one byte form for a value read back from JSON text as for the value
    it was written from, without `canonical_json`'s walk through the value. A value
    orjson refuses (integers beyond 64 bits, keys that are not strings) is written
    by `canonical_json`."""
    try:
        return _dumps(value, option=_SORT_KEYS)
    except TypeError:
        return canonical_json(value)


def sha256_digest(data: bytes) -> str:
    if len(data) <= _SMALL:
        digest: str = _small_sha256(data).hexdigest()
        return "sha256:" + digest
    return "sha256:" + hashlib.sha256(data).hexdigest()


def fingerprint(tool_id: str, args: Any) -> str:
    # A JSON array keeps tool id and arguments apart without any separator convention.
    # (Once per call: the walk starts at the arguments, the tool id being a plain str,
    # and its first level, an arguments dict, is walked here, a frame fewer.)
    if type(args) is dict and type(tool_id) is str:
        for key, item in args.items():
            if type(key) is not str or (type(item) not in _PLAIN and not _orjson_ready(item, 2)):
                break
        else:
            data = _dumps([tool_id, args], option=_SORT_KEYS)
            if len(data) <= _SMALL:
                digest: str = _small_sha256(data).hexdigest()
                return "sha256:" + digest
            return sha256_digest(data)
    elif type(tool_id) is str and _orjson_ready(args, 1):
        return sha256_digest(_dumps([tool_id, args], option=_SORT_KEYS))
    return sha256_digest(_dumps(_normalize([tool_id, args]), option=_SORT_KEYS))


_PLAIN = frozenset({str, bool, type(None)})
_READY_MAX_DEPTH = 32


def _orjson_ready(value: Any, depth: int) -> bool:
    """Whether orjson's own output for `value` is already canonical, so the copying
    pass can be skipped: plain types only, 64-bit integers, non-integral finite floats."""
    kind = type(value)
    if kind is dict:
        if depth > _READY_MAX_DEPTH:
            return False
        for key, item in value.items():
            if type(key) is not str or (
                type(item) not in _PLAIN and not _orjson_ready(item, depth + 1)
            ):
                return False
        return True
    if kind is list or kind is tuple:
        if depth > _READY_MAX_DEPTH:
            return False
        for item in value:
            if type(item) not in _PLAIN and not _orjson_ready(item, depth + 1):
                return False
        return True
    if kind is int:
        integer: int = value
        return _ORJSON_MIN_INT <= integer <= _ORJSON_MAX_INT
    if kind is float:
        number: float = value
        return math.isfinite(number) and not number.is_integer()
    return kind in _PLAIN


def _normalize(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is dict:
        return {
            key if type(key) is str else _key(key): item
            if type(item) in _PLAIN
            else _normalize(item)
            for key, item in value.items()
        }
    if kind is list or kind is tuple:
        return [item if type(item) in _PLAIN else _normalize(item) for item in value]
    if kind is int:
        return value if _ORJSON_MIN_INT <= value <= _ORJSON_MAX_INT else _normalize_int(value)
    if kind is float:
        return _normalize_float(value)
    return _normalize_subclass(value)


def _normalize_subclass(value: Any) -> Any:
    if isinstance(value, str):
        return _plain_str(value)
    if isinstance(value, int):
        return _normalize_int(int(value))
    if isinstance(value, float):
        return _normalize_float(float(value))
    if isinstance(value, Mapping):
        return {_key(key): _normalize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_normalize(item) for item in value]
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _normalize_int(value: int) -> int | orjson.Fragment:
    if _ORJSON_MIN_INT <= value <= _ORJSON_MAX_INT:
        return value
    return orjson.Fragment(str(value).encode())


def _normalize_float(value: float) -> float | int | orjson.Fragment:
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a JSON number")
    if value.is_integer():
        return _normalize_int(int(value))
    return value


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key if type(key) is str else _plain_str(key)
    raise TypeError(f"object keys must be strings, not {type(key).__name__}")


def _plain_str(value: str) -> str:
    # str() would call a subclass's __str__ (an Enum's gives "Class.MEMBER").
    return str.__add__("", value)
