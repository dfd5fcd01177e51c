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
from typing import Any, TypeVar

from app.foundation.timer_heap import TimerHeap, current_task

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
        """A watchdog for the current task that expires at `when` (loop clock).

        The watchdog is built here, not by `Watchdog.__init__`: CPython runs a
        method called from Python without the C-level detour a class call takes
        to `__init__`, and a watchdog is armed once per call attempt.
        """
        task = current_task(self.loop)
        if task is None:
            raise RuntimeError("a watchdog must be used inside a task")
        watchdog: Watchdog = _new_object(Watchdog)
        watchdog._deadlines = self
        watchdog._task = task
        watchdog._cancelling = task.cancelling()
        watchdog.expired = watchdog.finished = False
        heap = self._heap
        heappush(heap, (when, next(self._order), watchdog))
        if len(heap) > self._limit:
            self._compact()
        if when < self._timer_when:  # infinity while no timer is set
            self._schedule(when)
        return watchdog


_new_object = object.__new__


class Watchdog:
    """`with deadlines.arm(when):` cancels the current task at `when` and turns
    that cancellation into WatchdogExpired.

    The protocol of `asyncio.timeout_at`: a cancellation requested by anyone
    else while it expires still propagates as CancelledError.
    """

    __slots__ = ("_cancelling", "_deadlines", "_task", "expired", "finished")

    _cancelling: int
    _deadlines: Deadlines
    _task: asyncio.Task[Any]
    expired: bool
    finished: bool

    def __new__(cls, deadlines: Deadlines, when: float) -> Watchdog:
        """`Watchdog(deadlines, when)` is `deadlines.arm(when)`."""
        return deadlines.arm(when)

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.disarm(exc_type is asyncio.CancelledError):
            raise WatchdogExpired from None

    def disarm(self, cancelled: bool) -> bool:
        """End the watch, once, without `with`: what `__exit__` does, for a block
        that ended with a CancelledError (`cancelled`) or otherwise. True: that
        cancellation is this watchdog's own expiry, to be reported as WatchdogExpired
        (nobody else asked for one meanwhile)."""
        self.finished = True
        heap = self._deadlines._heap
        while heap and heap[0][2].finished:
            heappop(heap)
        return self.expired and self._task.uncancel() <= self._cancelling and cancelled

    def expire(self) -> None:
        self.expired = True
        self._task.cancel()


async def watch(awaitable: Awaitable[T], timeout_s: float) -> T:
    loop = asyncio.get_running_loop()
    with Deadlines(loop).arm(loop.time() + timeout_s):
        return await awaitable
