"""What the provider adapters share: the request they build, JSON encoding (whole
or spliced from kept fragments) and strict JSON decoding."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from app.llm.errors import LLMMalformedResponse
from app.llm.messages import Message, ToolDefinition


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    url: str
    headers: Mapping[str, str]
    body: bytes

    def __repr__(self) -> str:
        # Headers carry the API key; keep them out of every repr.
        return f"ProviderRequest(url={self.url!r})"

    def content(self) -> bytes:
        return self.body


def dumps(value: Any) -> bytes:
    """Compact JSON, as every request body is encoded (fragments included)."""
    return orjson.dumps(value, default=_plain)


# An already-encoded piece of a body.
Piece = bytes | bytearray


def spliced(fields: Sequence[tuple[str, Sequence[Piece]]]) -> bytes:
    """The JSON object whose members are `fields`, in order, each value given as
    already-encoded pieces to concatenate: byte for byte what `dumps` gives for
    the same object, with one copy of every piece."""
    parts: list[Piece] = []
    separator = b"{"
    for name, pieces in fields:
        parts.append(separator)
        parts.append(orjson.dumps(name))
        parts.append(b":")
        parts.extend(pieces)
        separator = b","
    parts.append(b"}" if parts else b"{}")
    return b"".join(parts)


def kept_prefix(kept: list[Message], history: Sequence[Message]) -> bool:
    """Whether `history` still starts with the messages encoded so far."""
    count = len(kept)
    if len(history) < count:
        return False
    prefix = history[:count]
    # Compared by identity first (the usual case), then by value.
    return (prefix if isinstance(prefix, list) else list(prefix)) == kept


class ToolsCache:
    """The encoded tools array, kept while the caller passes the same tuple."""

    __slots__ = ("encoded", "source")

    def __init__(self) -> None:
        self.source: object = None
        self.encoded = b""

    def get(
        self,
        tools: Sequence[ToolDefinition],
        encode: Callable[[Sequence[ToolDefinition]], bytes],
    ) -> bytes:
        if tools is self.source:
            return self.encoded
        encoded = encode(tools)
        if type(tools) is tuple:  # immutable: safe to recognise by identity next time
            self.source, self.encoded = tools, encoded
        return encoded


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
