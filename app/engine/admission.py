"""Admission: a tool's declared concurrency and rate limits, held process-wide.

Every plan and run in the process shares one gate per tool, so a caller's own
`max_concurrency` (which bounds its lanes) can only narrow these limits.
Tools without limits get no gate at all: nothing to wait on, nothing to count.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from app.contract.compiled import RateLimit, Tool


class TokenBucket:
    """`burst` starts at once, then `per_second` on average.

    A caller that finds the bucket empty reserves the next token (the count goes
    negative) and sleeps until it is due, so waiters are served in arrival order
    without polling. A waiter cancelled while asleep forfeits its token: capacity
    can be lost, never exceeded.
    """

    __slots__ = ("_burst", "_clock", "_rate", "_tokens", "_updated")

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = limit.per_second
        self._burst = float(limit.burst)
        self._clock = clock
        self._tokens = self._burst
        self._updated = clock()

    def reserve(self) -> float:
        """Take one token; return how long to wait before using it (0.0: now)."""
        now = self._clock()
        tokens = min(self._burst, self._tokens + (now - self._updated) * self._rate) - 1.0
        self._tokens = tokens
        self._updated = now
        return 0.0 if tokens >= 0.0 else -tokens / self._rate

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0.0:
            await asyncio.sleep(delay)


class ToolGate:
    """A concurrency slot (if limited), then a rate token (if limited), per attempt."""

    __slots__ = ("bucket", "semaphore")

    def __init__(self, max_concurrency: int | None, rate_limit: RateLimit | None) -> None:
        self.semaphore = None if max_concurrency is None else asyncio.Semaphore(max_concurrency)
        self.bucket = None if rate_limit is None else TokenBucket(rate_limit)

    async def acquire(self, deadline: float | None) -> bool:
        """Wait for admission; False when the deadline (loop clock) passes first."""
        if deadline is None:
            await self._acquire()
            return True
        try:
            async with asyncio.timeout_at(deadline):
                await self._acquire()
        except TimeoutError:
            return False
        return True

    async def _acquire(self) -> None:
        # Slot first, then token: holding the slot while waiting for the token
        # keeps call starts spaced by the rate, not bunched when slots free up.
        semaphore = self.semaphore
        if semaphore is not None:
            await semaphore.acquire()
        if self.bucket is not None:
            try:
                await self.bucket.acquire()
            except BaseException:
                if semaphore is not None:
                    semaphore.release()
                raise

    def release(self) -> None:
        if self.semaphore is not None:
            self.semaphore.release()


def build_gates(tools: Mapping[str, Tool]) -> dict[str, ToolGate]:
    """One gate per tool that declares a limit; the rest are absent."""
    return {
        tool_id: ToolGate(tool.max_concurrency, tool.rate_limit)
        for tool_id, tool in tools.items()
        if tool.max_concurrency is not None or tool.rate_limit is not None
    }
