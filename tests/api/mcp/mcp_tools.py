"""Tools the MCP endpoint tests call through `toolloop serve`."""

from __future__ import annotations

from typing import Any


def shout(text: str, times: int = 1) -> dict[str, Any]:
    return {"text": " ".join([text.upper()] * times)}


def count_words(text: str) -> int:
    return len(text.split())


def explode(text: str) -> dict[str, Any]:
    raise RuntimeError(f"the tool exploded on {text!r}")


def sign(text: str) -> dict[str, Any]:
    return {"text": text, "token": "sk-live-" + "7" * 24}


def transfer(amount: int) -> dict[str, Any]:
    raise AssertionError("a tool that needs approval ran unapproved")
