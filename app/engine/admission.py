"""Admission: a tool's declared concurrency and rate limits, held process-wide,
and across processes when the service shares them (`SharedToolGate`).

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
from functools import partial

from app.contract.compiled import RateLimit, Tool
from app.engine.ports import SharedLimits


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
    """A concurrency slot (if limited), then a rate token (if limited), per attempt.

    `take_now` admits at once or raises IndexError (then wait in `acquire`); `give`
    (None: nothing to give back) releases what an admission took. A gate that limits
    concurrency alone (the usual case) is taken with the slots' own C call.
    """

    __slots__ = ("bucket", "give", "slots", "take_now")

    def __init__(self, max_concurrency: int | None, rate_limit: RateLimit | None) -> None:
        self.slots = None if max_concurrency is None else Slots(max_concurrency)
        self.bucket = None if rate_limit is None else TokenBucket(rate_limit)
        self.take_now: Callable[[], object] = (
            self.slots.take_free
            if self.slots is not None and self.bucket is None
            else partial(_take_now, self.try_acquire)
        )
        self.give: Callable[[], None] | None = None if self.slots is None else self.slots.give

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


class SharedToolGate(ToolGate):
    """The tool's limits held with every process sharing `SharedLimits`.

    A local slot first, so that this process never asks for more than the tool's
    limit, then one of the tool's shared slots, then a shared rate token. `take_now`
    admits at once only a tool without a rate limit whose shared slot this process
    holds idle; anything else waits for the shared store.
    """

    __slots__ = ("_limit", "_rate", "_shared", "_tool_id")

    def __init__(
        self,
        tool_id: str,
        max_concurrency: int | None,
        rate_limit: RateLimit | None,
        shared: SharedLimits,
    ) -> None:
        super().__init__(max_concurrency, None)
        self._tool_id = tool_id
        self._limit = max_concurrency
        self._rate = rate_limit
        self._shared = shared
        self.take_now = (
            partial(_take_now, self.try_acquire)
            if max_concurrency is not None and rate_limit is None
            else _must_wait
        )
        self.give = None if max_concurrency is None else self.release

    def try_acquire(self) -> bool:
        slots, limit = self.slots, self._limit
        if slots is None or limit is None or self._rate is not None or not slots.try_take():
            return False
        if self._shared.take_idle_slot(self._tool_id, limit):
            return True
        slots.give()
        return False

    async def acquire(self, deadline: float | None) -> bool:
        """Wait for admission; False when the deadline (loop clock) passes first."""
        if deadline is None:
            return await self._acquire_shared(None)
        try:
            async with asyncio.timeout_at(deadline):
                return await self._acquire_shared(deadline)
        except TimeoutError:
            return False

    async def _acquire_shared(self, deadline: float | None) -> bool:
        slots = self.slots
        if slots is not None and self._limit is not None:
            await slots.take()
            try:
                await self._shared.take_slot(self._tool_id, self._limit)
            except BaseException:
                slots.give()
                raise
        rate = self._rate
        if rate is None:
            return True
        try:
            max_wait = None if deadline is None else deadline - asyncio.get_running_loop().time()
            delay = await self._shared.take_token(
                self._tool_id, rate.per_second, rate.burst, max_wait
            )
            if delay is None:
                self.release()
                return False
            if delay > 0.0:
                # Cancelled while asleep, the token is forfeited: capacity lost, never exceeded.
                await asyncio.sleep(delay)
        except BaseException:
            self.release()
            raise
        return True

    def release(self) -> None:
        if self.slots is not None:
            self._shared.give_slot(self._tool_id)
            self.slots.give()


def _take_now(try_acquire: Callable[[], bool]) -> None:
    """A gate's uncontended take, as the slots' own take is: IndexError when it must wait."""
    if not try_acquire():
        raise IndexError


def _must_wait() -> None:
    raise IndexError


def build_gates(
    tools: Mapping[str, Tool], shared: SharedLimits | None = None
) -> dict[str, ToolGate]:
    """One gate per tool that declares a limit; the rest are absent. With `shared`,
    the limits hold across every process sharing it."""
    if shared is None:
        return {
            tool_id: ToolGate(tool.max_concurrency, tool.rate_limit)
            for tool_id, tool in tools.items()
            if tool.max_concurrency is not None or tool.rate_limit is not None
        }
    return {
        tool_id: SharedToolGate(tool_id, tool.max_concurrency, tool.rate_limit, shared)
        for tool_id, tool in tools.items()
        if tool.max_concurrency is not None or tool.rate_limit is not None
    }
