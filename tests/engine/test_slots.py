"""The concurrency slots behind a tool's `max_concurrency`."""

from __future__ import annotations

import asyncio

import pytest

from app.engine.admission import Slots
from tests.support.waiting import wait_for


async def test_free_slots_are_taken_without_waiting_then_callers_queue_in_order() -> None:
    slots = Slots(2)
    assert slots.try_take()
    assert slots.try_take()
    assert not slots.try_take()
    order: list[int] = []

    async def take(index: int) -> None:
        await slots.take()
        order.append(index)

    waiters = [asyncio.create_task(take(index)) for index in range(3)]
    await asyncio.sleep(0)
    assert order == []
    slots.give()
    slots.give()
    await wait_for(lambda: len(order) == 2, every_s=0)
    assert order == [0, 1]
    assert not slots.try_take()  # the third still waits: no slot is free to overtake it
    slots.give()
    await asyncio.gather(*waiters)
    assert order == [0, 1, 2]


async def test_a_cancelled_waiter_leaves_the_queue_and_takes_no_slot() -> None:
    slots = Slots(1)
    assert slots.try_take()
    waiter = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    slots.give()
    assert slots.try_take()


async def test_a_slot_handed_to_a_waiter_cancelled_before_it_resumed_passes_on() -> None:
    slots = Slots(1)
    assert slots.try_take()
    first = asyncio.create_task(slots.take())
    second = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    slots.give()  # hands the slot to `first`...
    first.cancel()  # ...which is cancelled before it resumes
    with pytest.raises(asyncio.CancelledError):
        await first
    await second  # the slot went on to the next waiter
    assert not slots.try_take()
    slots.give()
    assert slots.try_take()


async def test_take_free_is_refused_whenever_anyone_waits_or_nothing_is_free() -> None:
    # The engine takes uncontended slots with `take_free` alone, which relies on a
    # slot being free only while nobody waits.
    slots = Slots(1)
    slots.take_free()
    with pytest.raises(IndexError):
        slots.take_free()
    waiters = [asyncio.create_task(slots.take()) for _ in range(2)]
    await asyncio.sleep(0)
    slots.give()  # to the first waiter, not to the free list
    with pytest.raises(IndexError):
        slots.take_free()
    await waiters[0]
    waiters[1].cancel()
    await asyncio.gather(waiters[1], return_exceptions=True)
    assert slots.free == 0
    slots.give()  # nobody waits now: the slot is free again
    assert slots.free == 1
    slots.take_free()
