"""Tools for the observability tests: echo, raise, fail then succeed, hang, hold."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

attempts: Counter[str] = Counter()
entered: asyncio.Event | None = None
release: asyncio.Event | None = None


def echo(text: str) -> dict[str, Any]:
    return {"text": text}


def padded_echo(text: str) -> dict[str, Any]:
    return {"text": text, "pad": "x" * 4096}


def leak(text: str) -> dict[str, Any]:
    raise RuntimeError(f"could not handle {text}")


def flaky(token: str, failures: int) -> dict[str, Any]:
    attempts[token] += 1
    if attempts[token] <= failures:
        raise ConnectionError(f"attempt {attempts[token]} failed")
    return {"text": token}


async def hang(text: str) -> dict[str, Any]:
    await asyncio.Event().wait()
    return {"text": text}


async def hold(text: str) -> dict[str, Any]:
    assert entered is not None
    assert release is not None
    entered.set()
    await release.wait()
    return {"text": text}
