"""What the provider adapters share: the request they build and strict JSON decoding."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.llm.errors import LLMMalformedResponse


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    url: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]

    def __repr__(self) -> str:
        # Headers carry the API key; keep them out of every repr.
        return f"ProviderRequest(url={self.url!r})"

    def content(self) -> bytes:
        return orjson.dumps(self.body, default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def decode_json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise LLMMalformedResponse("body is not JSON") from None


def encode_json(value: Any) -> str:
    return orjson.dumps(value).decode()


def expect_mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise LLMMalformedResponse(f"{what} is not an object")
    return value


def expect_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise LLMMalformedResponse(f"{what} is not a list")
    return value


def expect_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise LLMMalformedResponse(f"{what} is missing or not a non-empty string")
    return value


def optional_text(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise LLMMalformedResponse(f"{what} is not a string")
    return value


def token_count(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LLMMalformedResponse(f"{what} is not a non-negative integer")
    return value
