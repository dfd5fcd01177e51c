from __future__ import annotations

from typing import Any


def transform(text: str) -> dict[str, Any]:
    return {"text": text.upper()}


async def fetch(key: str) -> dict[str, Any]:
    return {"key": key}


def guard(call: dict[str, Any]) -> str | None:
    return None


async def verify(run: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "reason": "fine"}


def record(receipt: dict[str, Any]) -> None:
    return None


def two_arguments(first: Any, second: Any) -> None:
    return None


_hidden = transform


def _private_function(text: str) -> dict[str, Any]:
    return {"text": text}


def fetch_nothing() -> None:
    return None
