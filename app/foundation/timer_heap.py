"""Many deadlines on one event loop, served by one loop timer.

`asyncio.timeout` schedules a loop timer when a block starts and cancels it
when the block ends: two heap operations on the loop and a timer handle each
time. A `TimerHeap` keeps the deadlines on a heap of its own; arming is a push
and disarming sets the entry's `finished` flag. One loop timer, left to fire
rather than cancelled, follows the earliest deadline; when it fires it expires
the entries that are due and are not finished, and is set again for the
earliest one left. Finished entries leave the heap when they reach its top,
and the heap is rebuilt, keeping the live entries, when it grows past twice
the live entries of its last rebuild (plus 64) because finished ones pile up
behind a long-running one: its size stays proportional to the entries live.

A leaf module: the engine's call watchdog and the LLM client's attempt bounds
both build on it, and it imports nothing of the service.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from heapq import heapify, heappop, heappush
from itertools import count
from typing import Any, Protocol


class Expirable(Protocol):
    finished: bool

    def expire(self) -> None: ...


def _current_task_lookup() -> Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None]:
    """`asyncio.current_task(loop)` without a Python frame: in 3.11 it is a Python
    function reading a registry dict, read here directly; later it is C itself."""
    registry = getattr(asyncio.current_task, "__globals__", {}).get("_current_tasks")
    if isinstance(registry, dict):
        lookup: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None] = registry.get
        return lookup
    return asyncio.current_task


current_task = _current_task_lookup()

_SLACK = 64  # entries the heap may hold beyond twice its live ones
_NEVER = float("inf")


class TimerHeap:
    """The deadlines of one event loop. Hot paths may push and pop `_heap` inline
    (as `push` and `disarmed` do) to spare a Python call per deadline."""

    __slots__ = ("_heap", "_limit", "_order", "_timer", "_timer_when", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[float, int, Any]] = []
        self._order = count()
        # Beyond this size the heap is rebuilt without its finished entries. Counting
        # live entries instead would cost an update at every arming and disarming.
        self._limit = _SLACK
        self._timer: asyncio.TimerHandle | None = None
        # When the timer fires; infinity while there is none, so that one comparison
        # tells whether a new deadline needs the timer set (earlier).
        self._timer_when = _NEVER

    @property
    def pending(self) -> int:
        """Entries still on the heap (finished ones leave it lazily)."""
        return len(self._heap)

    def push(self, when: float, entry: Expirable) -> None:
        """Expire `entry` at `when` (loop clock) unless it is finished by then."""
        heap = self._heap
        heappush(heap, (when, next(self._order), entry))
        if len(heap) > self._limit:
            self._compact()
        if when < self._timer_when:
            self._schedule(when)

    def disarmed(self) -> None:
        """An entry was just marked finished."""
        heap = self._heap
        while heap and heap[0][2].finished:
            heappop(heap)

    def _compact(self) -> None:
        self._heap = heap = [entry for entry in self._heap if not entry[2].finished]
        heapify(heap)
        self._limit = 2 * len(heap) + _SLACK

    def _schedule(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_at(when, self._fire)
        self._timer_when = when

    def _fire(self) -> None:
        self._timer = None
        self._timer_when = _NEVER
        heap = self._heap
        now = self.loop.time()
        while heap and (heap[0][0] <= now or heap[0][2].finished):
            entry = heappop(heap)[2]
            if not entry.finished:
                entry.expire()
        if heap:
            self._schedule(heap[0][0])
