"""A run start waits for the first of its commit and an outage, cancelling neither."""

from __future__ import annotations

import asyncio

import pytest

from app.service.run_records import _first_done


async def test_returns_when_the_first_future_is_done_and_leaves_the_other_alone() -> None:
    loop = asyncio.get_running_loop()
    durable: asyncio.Future[None] = loop.create_future()
    outage: asyncio.Future[None] = loop.create_future()
    waiting = asyncio.create_task(_first_done(durable, outage))
    await asyncio.sleep(0)
    assert not waiting.done()

    loop.call_soon(durable.set_result, None)
    await waiting

    assert not outage.done()
    # No callback of the finished wait is left on the shared future.
    calls: list[str] = []
    outage.add_done_callback(lambda _: calls.append("mine"))
    outage.set_result(None)
    await asyncio.sleep(0)
    assert calls == ["mine"]


async def test_the_outage_ends_the_wait_too() -> None:
    loop = asyncio.get_running_loop()
    durable: asyncio.Future[None] = loop.create_future()
    outage: asyncio.Future[None] = loop.create_future()
    loop.call_soon(outage.set_result, None)

    await _first_done(durable, outage)

    assert not durable.done()


async def test_a_cancelled_wait_cancels_neither_shared_future() -> None:
    loop = asyncio.get_running_loop()
    durable: asyncio.Future[None] = loop.create_future()
    outage: asyncio.Future[None] = loop.create_future()
    waiting = asyncio.create_task(_first_done(durable, outage))
    await asyncio.sleep(0)

    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    assert not durable.cancelled()
    assert not outage.cancelled()
    durable.set_result(None)
    outage.set_result(None)
