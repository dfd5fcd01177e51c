"""Whole-attempt time bounds for model requests, on one loop timer per event loop.

`asyncio.timeout` schedules a loop timer when a request starts and cancels it
when the answer arrives: two heap operations on the loop and a timer handle per
request. Here arming pushes the attempt's deadline onto a heap of our own and
disarming sets a flag; one loop timer, left to fire rather than cancelled,
follows the earliest deadline. Requests of one profile have the same timeout, so
a later request's deadline is never earlier than the timer's and arming it
schedules nothing: the timer fires once per timeout period, finds the finished
attempts, and is set again for the earliest one still running.

An expired bound cancels its task and turns that cancellation into
`TimeoutError` when its block exits, with the protocol of `asyncio.timeout`: a
cancellation requested by anyone else meanwhile still propagates as
`CancelledError`. (The engine's `Deadlines` does the same for calls and run
deadlines; `app.llm` imports nothing from the engine, hence this copy.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from heapq import heapify, heappop, heappush
from itertools import count
from types import TracebackType
from typing import Any


def _task_lookup() -> Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None]:
    """`asyncio.current_task(loop)` without a Python frame: in 3.11 it is a Python
    function reading a registry dict, read here directly; later it is C itself."""
    registry = getattr(asyncio.current_task, "__globals__", {}).get("_current_tasks")
    if isinstance(registry, dict):
        lookup: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None] = registry.get
        return lookup
    return asyncio.current_task


_current_task = _task_lookup()


class AttemptBounds:
    """The bounds of the attempts running on one event loop."""

    __slots__ = ("_heap", "_live", "_order", "_timer", "_timer_when", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[float, int, Bound]] = []
        self._order = count()
        self._live = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0

    def within(self, seconds: float) -> Bound:
        """`with bounds.within(s):` raises `TimeoutError` if the block runs longer than `s`."""
        task = _current_task(self.loop)
        if task is None:
            raise RuntimeError("an attempt bound must be used inside a task")
        when = self.loop.time() + seconds
        bound = Bound(self, task)
        heappush(self._heap, (when, next(self._order), bound))
        self._live += 1
        if self._timer is None or when < self._timer_when:
            self._schedule(when)
        return bound

    @property
    def pending(self) -> int:
        """Entries still on the heap (finished ones leave it lazily)."""
        return len(self._heap)

    def _disarmed(self) -> None:
        self._live = live = self._live - 1
        heap = self._heap
        while heap and heap[0][2].finished:
            heappop(heap)
        if len(heap) > 2 * live + 64:
            self._heap = heap = [entry for entry in heap if not entry[2].finished]
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
            bound = heappop(heap)[2]
            if not bound.finished:
                bound.expire()
        if heap:
            self._schedule(heap[0][0])


class Bound:
    __slots__ = ("_bounds", "_cancelling", "_task", "expired", "finished")

    def __init__(self, bounds: AttemptBounds, task: asyncio.Task[Any]) -> None:
        self._bounds = bounds
        self._task = task
        self._cancelling = task.cancelling()
        self.expired = False
        self.finished = False

    def __enter__(self) -> Bound:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finished = True
        self._bounds._disarmed()
        if (
            self.expired
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from None

    def expire(self) -> None:
        self.expired = True
        self._task.cancel()
