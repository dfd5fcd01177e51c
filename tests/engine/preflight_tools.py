"""Plain callables for the preflight test registry; preflight never runs them."""

from __future__ import annotations

from typing import Any


def transform(text: str, **_: Any) -> dict[str, Any]:
    return {"text": text.upper()}


def echo(**kwargs: Any) -> dict[str, Any]:
    return kwargs
