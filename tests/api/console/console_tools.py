"""Tools for the console tests: an echo that takes a secret, a call held until the test
releases it, and one that fails."""

from __future__ import annotations

import asyncio
from typing import Any

_released: dict[str, asyncio.Event] = {}


def reset() -> None:
    _released.clear()


def release(label: str) -> None:
    _released.setdefault(label, asyncio.Event()).set()


def echo(text: str, secret: str | None = None) -> dict[str, Any]:
    return {"text": text}


async def hold(label: str) -> dict[str, Any]:
    await _released.setdefault(label, asyncio.Event()).wait()
    return {"label": label}


def fail(text: str) -> dict[str, Any]:
    raise RuntimeError(f"refused {len(text)} characters")
