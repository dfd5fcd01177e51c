"""The shared deadline timer behind every call's watchdog."""

from __future__ import annotations

import asyncio

import pytest

from app.engine.watchdog import Deadlines, Watchdog, WatchdogExpired
from tests.support.waiting import wait_for


async def test_an_overdue_await_is_cancelled_and_reported_as_expired() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    with pytest.raises(WatchdogExpired), deadlines.arm(loop.time() + 0.01):
        await asyncio.Event().wait()


async def test_a_finished_call_is_not_cancelled_later() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    with deadlines.arm(loop.time() + 0.01) as watchdog:
        await asyncio.sleep(0)
    await asyncio.sleep(0.03)  # the shared timer fires with nothing left to expire
    assert not watchdog.expired
    assert asyncio.current_task() is not None
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_an_earlier_deadline_armed_later_still_fires_first() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    order: list[str] = []

    async def wait(name: str, delay: float) -> None:
        try:
            with deadlines.arm(loop.time() + delay):
                await asyncio.Event().wait()
        except WatchdogExpired:
            order.append(name)

    late = asyncio.create_task(wait("late", 10.0))
    await asyncio.sleep(0)
    await wait("early", 0.01)
    assert order == ["early"]
    late.cancel()
    with pytest.raises(asyncio.CancelledError):
        await late


async def test_a_cancellation_from_outside_is_not_mistaken_for_expiry() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    started = asyncio.Event()

    async def call() -> None:
        with deadlines.arm(loop.time() + 10.0):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(call())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_outside_cancellation_racing_the_expiry_still_propagates() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    armed: list[Watchdog] = []

    async def call() -> None:
        with deadlines.arm(loop.time() + 10.0) as watchdog:
            armed.append(watchdog)
            await asyncio.Event().wait()

    task = asyncio.create_task(call())
    await wait_for(lambda: armed, every_s=0)
    armed[0].expire()  # what the timer does; then someone else cancels before the task resumes
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_finished_entries_do_not_pile_up_behind_a_long_call() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    with deadlines.arm(loop.time() + 60.0):  # stays at the top of the heap
        for _ in range(10_000):
            with deadlines.arm(loop.time() + 30.0):
                pass
        assert deadlines.pending <= 2 * 1 + 64 + 1


async def test_finished_entries_behind_an_earlier_deadline_are_dropped_in_rebuilds() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    with deadlines.arm(loop.time() + 30.0):  # the earliest deadline: stays at the top
        for _ in range(10_000):
            with deadlines.arm(loop.time() + 60.0):  # finishes behind it
                # This entry and the long one were live at the last rebuild.
                assert deadlines.pending <= 2 * 2 + 64 + 1
        assert deadlines.pending <= 2 * 2 + 64 + 1
    assert deadlines.pending == 0
