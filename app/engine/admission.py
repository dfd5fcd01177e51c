"""Admission: a tool's declared concurrency and rate limits, held process-wide.

Every plan and run in the process shares one gate per tool, so a caller's own
`max_concurrency` (which bounds its lanes) can only narrow these limits.
Tools without limits get no gate at all: nothing to wait on, nothing to count.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import suppress

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

    def try_take(self) -> bool:
        """Take a token if one is there now; otherwise change nothing."""
        now = self._clock()
        tokens = min(self._burst, self._tokens + (now - self._updated) * self._rate)
        if tokens < 1.0:
            return False
        self._tokens = tokens - 1.0
        self._updated = now
        return True

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0.0:
            await asyncio.sleep(delay)


class Slots:
    """A counting semaphore, first come first served, whose uncontended take is a
    plain call (`asyncio.Semaphore.acquire` is a coroutine even when it need not wait).

    A released slot goes straight to the first waiter, so while anyone waits no
    slot is free and a newcomer cannot overtake.
    """

    __slots__ = ("_free", "_waiters", "take_free")

    def __init__(self, count: int) -> None:
        # One entry per free slot: a list, so that taking one can be a C call.
        self._free: list[bool] = [True] * count
        self._waiters: deque[asyncio.Future[None]] = deque()
        # Takes a free slot; raises IndexError when none is. No other check is
        # needed: a slot is free only while nobody waits (a released slot goes
        # straight to the first waiter). The engine's hot path calls it directly.
        self.take_free: Callable[[], bool] = self._free.pop

    @property
    def free(self) -> int:
        return len(self._free)

    def try_take(self) -> bool:
        if self._free and not self._waiters:
            self._free.pop()
            return True
        return False

    async def take(self) -> None:
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot just as it was cancelled: pass the slot on
            else:
                waiter.cancel()
                with suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        if self._waiters:
            self._hand_over()
        else:
            self._free.append(True)

    def _hand_over(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free.append(True)


class ToolGate:
    """A concurrency slot (if limited), then a rate token (if limited), per attempt."""

    __slots__ = ("bucket", "slots")

    def __init__(self, max_concurrency: int | None, rate_limit: RateLimit | None) -> None:
        self.slots = None if max_concurrency is None else Slots(max_concurrency)
        self.bucket = None if rate_limit is None else TokenBucket(rate_limit)

    def try_acquire(self) -> bool:
        """Admit at once if a slot and a token are free now; False: nothing taken, wait
        in `acquire`."""
        slots = self.slots
        if slots is not None and not slots.try_take():
            return False
        bucket = self.bucket
        if bucket is not None and not bucket.try_take():
            if slots is not None:
                slots.give()
            return False
        return True

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
        slots = self.slots
        if slots is not None:
            await slots.take()
        if self.bucket is not None:
            try:
                await self.bucket.acquire()
            except BaseException:
                if slots is not None:
                    slots.give()
                raise

    def release(self) -> None:
        if self.slots is not None:
            self.slots.give()


def build_gates(tools: Mapping[str, Tool]) -> dict[str, ToolGate]:
    """One gate per tool that declares a limit; the rest are absent."""
    return {
        tool_id: ToolGate(tool.max_concurrency, tool.rate_limit)
        for tool_id, tool in tools.items()
        if tool.max_concurrency is not None or tool.rate_limit is not None
    }
