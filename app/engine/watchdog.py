"""The watchdog: a call's effective timeout and the wait that enforces it.

A coroutine callable is cancelled at its timeout. A sync callable cannot be
killed: its worker thread runs on, the call is reported timed out at the
deadline, and whatever it returns later is discarded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class WatchdogExpired(Exception):
    """The watchdog's own timeout fired (not a TimeoutError raised by the callable)."""


def effective_timeout(tool_timeout_s: float, deadline: float | None, now: float) -> float:
    """The smaller of the tool's timeout and what remains of the run's deadline."""
    if deadline is None:
        return tool_timeout_s
    return min(tool_timeout_s, deadline - now)


async def watch(awaitable: Awaitable[T], timeout_s: float) -> T:
    scope = asyncio.timeout(timeout_s)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise WatchdogExpired from None
        raise
