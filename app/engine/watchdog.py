"""The watchdog: a call's effective timeout and the wait that enforces it.

A coroutine callable is cancelled at its timeout. A sync callable cannot be
killed: its worker thread runs on, the call is reported timed out at the
deadline, and whatever it returns later is discarded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from heapq import heapify, heappop, heappush
from itertools import count
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")


def _current_task_lookup() -> Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None]:
    """`asyncio.current_task(loop)` without a Python frame: in 3.11 it is a Python
    function reading a registry dict, read here directly; later it is C itself."""
    current_task = asyncio.current_task
    registry = getattr(current_task, "__globals__", {}).get("_current_tasks")
    if isinstance(registry, dict):
        lookup: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None] = registry.get
        return lookup
    return current_task


_current_task = _current_task_lookup()


class WatchdogExpired(Exception):
    """The watchdog's own timeout fired (not a TimeoutError raised by the callable)."""


def effective_timeout(tool_timeout_s: float, deadline: float | None, now: float) -> float:
    """The smaller of the tool's timeout and what remains of the run's deadline."""
    if deadline is None:
        return tool_timeout_s
    return min(tool_timeout_s, deadline - now)


class Deadlines:
    """The deadlines of the calls running on one event loop, on one loop timer.

    `asyncio.timeout` schedules a loop timer when a call starts and cancels it
    when the call ends. Here arming is a push onto a heap and disarming sets a
    flag; one loop timer, left to fire rather than cancelled, follows the
    earliest deadline. Entries of finished calls leave the heap when they reach
    its top, and the heap is rebuilt when they pile up behind a long-running
    call, so its size stays proportional to the calls still running.
    """

    __slots__ = ("_heap", "_live", "_order", "_timer", "_timer_when", "loop", "now")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # The loop's clock; time.monotonic itself when that is what the loop reads
        # (asyncio's own loops), which spares a Python frame per call.
        uses_monotonic = getattr(type(loop), "time", None) is asyncio.BaseEventLoop.time
        self.now: Callable[[], float] = time.monotonic if uses_monotonic else loop.time
        self._heap: list[tuple[float, int, Watchdog]] = []
        self._order = count()
        self._live = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0

    def arm(self, when: float) -> Watchdog:
        """A watchdog for the current task that expires at `when` (loop clock);
        the same as `Watchdog(deadlines, when)`."""
        return Watchdog(self, when)

    def _compact(self) -> None:
        self._heap = heap = [entry for entry in self._heap if not entry[2].finished]
        heapify(heap)

    def _schedule(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_at(when, self._fire)
        self._timer_when = when

    def _fire(self) -> None:
        self._timer = None
        heap = self._heap
        now = self.loop.time()
        while heap and (heap[0][0] <= now or heap[0][2].finished):
            watchdog = heappop(heap)[2]
            if not watchdog.finished:
                watchdog.expire()
        if heap:
            self._schedule(heap[0][0])


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
        task = _current_task(deadlines.loop)
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
