"""The shared deadline heap's pieces not covered through its two users (the engine's
watchdog in tests/engine, the LLM client's attempt bounds in tests/llm)."""

from __future__ import annotations

import asyncio
import functools

import pytest

from app.foundation import timer_heap


def test_without_the_task_registry_the_current_task_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = functools.partial(asyncio.current_task)  # no __globals__ to read a registry from
    monkeypatch.setattr(asyncio, "current_task", asked)

    assert timer_heap._current_task_lookup() is asked


async def test_finished_entries_leave_and_the_due_one_expires() -> None:
    class Entry:
        def __init__(self) -> None:
            self.finished = False
            self.expired = asyncio.Event()

        def expire(self) -> None:
            self.expired.set()

    loop = asyncio.get_running_loop()
    heap = timer_heap.TimerHeap(loop)
    done, due = Entry(), Entry()
    heap.push(loop.time(), done)
    heap.push(loop.time() + 0.01, due)
    done.finished = True
    heap.disarmed()
    assert heap.pending == 1  # the finished entry left from the top at once
    await asyncio.wait_for(due.expired.wait(), timeout=30)
    assert not done.expired.is_set()
    assert heap.pending == 0


async def test_the_heap_is_rebuilt_once_finished_entries_pile_up_behind_a_live_one() -> None:
    class Entry:
        def __init__(self) -> None:
            self.finished = False

        def expire(self) -> None:
            raise AssertionError("nothing here is due")

    loop = asyncio.get_running_loop()
    heap = timer_heap.TimerHeap(loop)
    heap.push(loop.time() + 30.0, Entry())  # live throughout, at the top
    sizes = []
    for _ in range(1_000):
        entry = Entry()
        heap.push(loop.time() + 60.0, entry)
        sizes.append(heap.pending)
        entry.finished = True
        heap.disarmed()  # not at the top: stays until a rebuild
    assert max(sizes) <= 2 * 2 + 64 + 1
    assert min(sizes[100:]) < max(sizes)  # rebuilt, more than once
