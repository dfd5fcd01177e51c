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
`CancelledError`. The heap and its timer are `app.foundation.timer_heap`'s, shared with
the engine's call watchdog.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from app.foundation.timer_heap import TimerHeap, current_task


class AttemptBounds(TimerHeap):
    """The bounds of the attempts running on one event loop."""

    __slots__ = ()

    def within(self, seconds: float) -> Bound:
        """`with bounds.within(s):` raises `TimeoutError` if the block runs longer than `s`."""
        task = current_task(self.loop)
        if task is None:
            raise RuntimeError("an attempt bound must be used inside a task")
        bound = Bound(self, task)
        self.push(self.loop.time() + seconds, bound)
        return bound


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
        self._bounds.disarmed()
        if (
            self.expired
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from None

    def expire(self) -> None:
        self.expired = True
        self._task.cancel()
