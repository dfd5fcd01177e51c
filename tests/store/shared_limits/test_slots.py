"""Slots shared by two processes' connections: the limit holds, a lost session's
slots come back, waiters wake on a release, a cancelled wait holds nothing."""

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
    await wait_for(lambda: advisory_locks() == 0, "every slot unlocked")


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
    for _ in range(20):
        taking = asyncio.create_task(limits.take_slot("free", 3))
        await asyncio.sleep(0)  # the statement is on its way
        taking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await taking

    await wait_for(lambda: advisory_locks() == 0, "no slot left locked")
    await wait_for(lambda: limits.held.get("free", 0) == 0, "none counted as held")
