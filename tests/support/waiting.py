"""Waiting in tests for an event that cannot be awaited directly: poll a condition.

The bound only keeps a broken test from hanging; it is generous, and never a timing
assertion. The condition's truthy value is returned, so a wait can also fetch.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

BOUND_S = 60.0


async def wait_for(
    condition: Callable[[], T | Awaitable[T]],
    what: str = "the condition",
    *,
    bound_s: float = BOUND_S,
    every_s: float = 0.005,
) -> T:
    """Poll `condition` (plain or async) on the running loop until it is truthy."""
    deadline = time.monotonic() + bound_s
    while True:
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return held  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"never held: {what}")
        await asyncio.sleep(every_s)


def wait_for_sync(
    condition: Callable[[], T],
    what: str = "the condition",
    *,
    bound_s: float = BOUND_S,
    every_s: float = 0.05,
) -> T:
    """Poll `condition` from a plain thread (a server in another process, a thread)."""
    deadline = time.monotonic() + bound_s
    while True:
        held = condition()
        if held:
            return held
        if time.monotonic() > deadline:
            raise AssertionError(f"never held: {what}")
        time.sleep(every_s)
