"""The watchdog: a call's effective timeout and the wait that enforces it.

A coroutine callable is cancelled at its timeout. A sync callable cannot be
killed: its worker thread runs on, the call is reported timed out at the
deadline, and whatever it returns later is discarded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from heapq import heappop, heappush
from types import TracebackType
from typing import TypeVar

from app.timer_heap import TimerHeap, current_task

T = TypeVar("T")


class WatchdogExpired(Exception):
    """The watchdog's own timeout fired (not a TimeoutError raised by the callable)."""


def effective_timeout(tool_timeout_s: float, deadline: float | None, now: float) -> float:
    """The smaller of the tool's timeout and what remains of the run's deadline."""
    if deadline is None:
        return tool_timeout_s
    return min(tool_timeout_s, deadline - now)


class Deadlines(TimerHeap):
    """The deadlines of the calls running on one event loop, on one loop timer
    (`TimerHeap`)."""

    __slots__ = ("now",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        # The loop's clock; time.monotonic itself when that is what the loop reads
        # (asyncio's own loops), which spares a Python frame per call.
        uses_monotonic = getattr(type(loop), "time", None) is asyncio.BaseEventLoop.time
        self.now: Callable[[], float] = time.monotonic if uses_monotonic else loop.time

    def arm(self, when: float) -> Watchdog:
        """A watchdog for the current task that expires at `when` (loop clock);
        the same as `Watchdog(deadlines, when)`."""
        return Watchdog(self, when)


class Watchdog:
    """`with deadlines.arm(when):` cancels the current task at `when` and turns
    that cancellation into WatchdogExpired.

    The protocol of `asyncio.timeout_at`: a cancellation requested by anyone
    else while it expires still propagates as CancelledError.
    """

    __slots__ = ("_cancelling", "_deadlines", "_task", "expired", "finished")

    # Arming and disarming are done here, not in methods of Deadlines: a watchdog
    # is armed once per call, and each Python call saved shows.
    def __init__(self, deadlines: Deadlines, when: float) -> None:
        task = current_task(deadlines.loop)
        if task is None:
            raise RuntimeError("a watchdog must be used inside a task")
        self._deadlines = deadlines
        self._task = task
        self._cancelling = task.cancelling()
        self.expired = False
        self.finished = False
        heappush(deadlines._heap, (when, next(deadlines._order), self))
        deadlines._live += 1
        if deadlines._timer is None or when < deadlines._timer_when:
            deadlines._schedule(when)

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finished = True
        deadlines = self._deadlines
        deadlines._live = live = deadlines._live - 1
        heap = deadlines._heap
        while heap and heap[0][2].finished:
            heappop(heap)
        if len(heap) > 2 * live + 64:
            deadlines._compact()
        if (
            self.expired
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise WatchdogExpired from None

    def expire(self) -> None:
        self.expired = True
        self._task.cancel()


async def watch(awaitable: Awaitable[T], timeout_s: float) -> T:
    loop = asyncio.get_running_loop()
    with Deadlines(loop).arm(loop.time() + timeout_s):
        return await awaitable
