"""Slots shared by two processes' connections: the limit holds, a lost session's
slots come back, waiters wake on a release, a cancelled wait holds nothing, a
released slot is kept idle for the next call and given to a process that asks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres


async def test_two_processes_never_hold_more_slots_than_the_limit(
    open_limits: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    first, second = await open_limits(poll_s=0.05), await open_limits(poll_s=0.05)
    in_flight = 0
    peak = 0
    over: list[int] = []

    async def use(limits: Any) -> None:
        nonlocal in_flight, peak
        await limits.take_slot("shared_tool", 2)
        in_flight += 1
        peak = max(peak, in_flight)
        locks = advisory_locks()
        if locks > 2:
            over.append(locks)
        await asyncio.sleep(0.01)
        in_flight -= 1
        limits.give_slot("shared_tool")

    await asyncio.gather(*(use(limits) for limits in (first, second) * 10))

    assert peak == 2
    assert over == []
    await wait_for(
        lambda: advisory_locks() == sum(first.idle.values()) + sum(second.idle.values()),
        "every slot unlocked or idle",
    )
    await first.aclose()
    await second.aclose()
    await wait_for(lambda: advisory_locks() == 0, "idle slots unlocked at shutdown")


async def test_a_take_locks_exactly_one_slot(
    open_limits: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    limits = await open_limits()

    await limits.take_slot("wide_tool", 50)
    await limits.take_slot("wide_tool", 50)

    assert advisory_locks() == 2
    assert limits.held == {"wide_tool": 2}


async def test_a_waiter_wakes_on_a_release_without_polling(
    open_limits: Callable[..., Any],
) -> None:
    holder, waiter = await open_limits(), await open_limits(poll_s=3600.0)
    await holder.take_slot("one_slot", 1)
    waiting = asyncio.create_task(waiter.take_slot("one_slot", 1))
    await asyncio.sleep(0)  # let it try once and start waiting
    await wait_for(lambda: waiter._wakeups.get("one_slot") is not None, "the waiter waits")
    assert not waiting.done()

    holder.give_slot("one_slot")

    # The poll is an hour: only the notification can wake it within the bound.
    await asyncio.wait_for(waiting, timeout=60.0)
    assert waiter.held == {"one_slot": 1}


async def test_a_lost_session_gives_its_slots_back(
    open_limits: Callable[..., Any], conninfo: str, advisory_locks: Callable[[], int]
) -> None:
    doomed, other = await open_limits(), await open_limits(poll_s=0.05)
    await doomed.take_slot("pair", 2)
    await doomed.take_slot("pair", 2)
    waiting = asyncio.create_task(other.take_slot("pair", 2))
    await wait_for(lambda: other._wakeups.get("pair") is not None, "the other waits")

    backend_pid = doomed._conn.info.backend_pid
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (backend_pid,))

    await asyncio.wait_for(waiting, timeout=60.0)
    assert other.held == {"pair": 1}
    # The doomed process's calls still running are orphans: giving them back unlocks
    # nothing of anybody's, and its next take is a fresh lock on a new session.
    assert doomed.held == {"pair": 2}
    doomed.give_slot("pair")
    doomed.give_slot("pair")
    assert doomed.held == {"pair": 0}
    assert advisory_locks() == 1
    await doomed.take_slot("pair", 2)
    assert advisory_locks() == 2
    assert doomed.held == {"pair": 1}


async def test_a_cancelled_wait_holds_no_slot(
    open_limits: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    holder, waiter = await open_limits(), await open_limits(poll_s=0.05)
    await holder.take_slot("one", 1)
    waiting = asyncio.create_task(waiter.take_slot("one", 1))
    await wait_for(lambda: waiter._wakeups.get("one") is not None, "the waiter waits")

    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    holder.give_slot("one")

    await wait_for(lambda: advisory_locks() == 0, "the slot is free")
    assert waiter.held == {"one": 0}


async def test_a_wait_cancelled_while_its_lock_is_taken_gives_the_slot_back(
    open_limits: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    limits = await open_limits()
    # A tool each time: a slot given back stays idle, and taking it needs no statement.
    tools = [f"free{n}" for n in range(20)]
    for tool_id in tools:
        taking = asyncio.create_task(limits.take_slot(tool_id, 3))
        await asyncio.sleep(0)  # the statement is on its way
        taking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await taking

    await wait_for(lambda: not any(limits.held.values()), "none counted as held")
    await wait_for(
        lambda: advisory_locks() == sum(limits.idle.values()), "no slot locked but idle ones"
    )
    assert all(idle <= 1 for idle in limits.idle.values())


async def test_a_lone_process_takes_its_idle_slot_with_no_statement(
    open_limits: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    limits = await open_limits()
    await limits.take_slot("cached", 2)
    limits.give_slot("cached")
    assert limits.idle == {"cached": 1}
    await wait_for(lambda: not limits._tasks, "nothing left to send")
    sent = limits.statements

    for _ in range(100):
        await limits.take_slot("cached", 2)
        limits.give_slot("cached")

    assert limits.statements == sent
    assert advisory_locks() == 1
    assert limits.idle == {"cached": 1}
    assert limits.held == {"cached": 0}


async def test_the_cache_holds_no_more_than_the_limit(
    open_limits: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    limits = await open_limits()
    for _ in range(5):
        await asyncio.gather(*(limits.take_slot("bounded", 3) for _ in range(3)))
        for _ in range(3):
            limits.give_slot("bounded")

    assert limits.idle == {"bounded": 3}
    assert advisory_locks() == 3


async def test_an_idle_slot_goes_to_another_process_that_asks(
    open_limits: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    holder, asker = await open_limits(), await open_limits(poll_s=3600.0)
    await holder.take_slot("one_slot", 1)
    holder.give_slot("one_slot")
    assert holder.idle == {"one_slot": 1}

    # The poll is an hour: only the ask and the holder's release can hand it over.
    await asyncio.wait_for(asker.take_slot("one_slot", 1), timeout=60.0)

    assert asker.held == {"one_slot": 1}
    assert holder.idle.get("one_slot", 0) == 0
    assert advisory_locks() == 1


async def test_a_process_asked_for_a_tool_gives_each_release_back_at_once(
    open_limits: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    holder, asker = await open_limits(), await open_limits(poll_s=3600.0)
    await holder.take_slot("busy", 1)
    asking = asyncio.create_task(asker.take_slot("busy", 1))
    await wait_for(lambda: asker._wakeups.get("busy") is not None, "the asker waits")
    await wait_for(lambda: holder._yielding.get("busy") is not None, "the holder heard")

    holder.give_slot("busy")  # in use when asked: unlocked on release, not kept

    await asyncio.wait_for(asking, timeout=60.0)
    assert holder.idle.get("busy", 0) == 0
    assert asker.held == {"busy": 1}
    assert advisory_locks() == 1


async def test_a_process_keeps_idle_slots_again_once_nobody_asks(
    open_limits: Callable[..., Any],
) -> None:
    holder, asker = await open_limits(yield_s=0.0), await open_limits(poll_s=3600.0)
    await holder.take_slot("again", 1)
    holder.give_slot("again")
    await asyncio.wait_for(asker.take_slot("again", 1), timeout=60.0)
    asker.give_slot("again")
    assert asker.idle == {"again": 1}  # nobody asked the asker

    # The holder's pause has passed: asking again hands the asker's idle slot over, and
    # the holder keeps it idle after its call.
    await asyncio.wait_for(holder.take_slot("again", 1), timeout=60.0)
    holder.give_slot("again")

    assert holder.idle == {"again": 1}
    assert asker.idle.get("again", 0) == 0
