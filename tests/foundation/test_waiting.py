"""Waits on shared futures: they end as asyncio's would, and never cancel what they wait on."""

from __future__ import annotations

import asyncio

import pytest

from app.foundation.waiting import wait_all, wait_first


def _futures(count: int) -> list[asyncio.Future[None]]:
    loop = asyncio.get_running_loop()
    return [loop.create_future() for _ in range(count)]


async def _no_callback_left(future: asyncio.Future[None]) -> None:
    """No callback of a wait is left on the future: a shared one (the writer's outage
    future lives as long as the process) would otherwise gather one per wait."""
    assert not future._callbacks  # type: ignore[attr-defined]


async def test_wait_first_returns_at_the_first_and_leaves_the_other_alone() -> None:
    durable, outage = _futures(2)
    waiting = asyncio.create_task(wait_first((durable, outage)))
    await asyncio.sleep(0)
    assert not waiting.done()

    asyncio.get_running_loop().call_soon(durable.set_result, None)
    await waiting

    assert not outage.done()
    await _no_callback_left(outage)


async def test_wait_first_returns_at_once_when_one_is_already_done() -> None:
    durable, outage = _futures(2)
    outage.set_result(None)

    await wait_first((durable, outage))

    assert not durable.done()
    await _no_callback_left(durable)


async def test_wait_all_returns_once_every_future_is_done_and_raises_none_of_their_errors() -> None:
    first, second, third = _futures(3)
    waiting = asyncio.create_task(wait_all((first, second, second, third)))
    await asyncio.sleep(0)  # waiting on all three
    first.set_result(None)
    second.set_exception(RuntimeError("not stored"))
    for _ in range(5):  # the futures' callbacks, then the waiter's task, had their turns
        await asyncio.sleep(0)
    assert not waiting.done()

    third.cancel()
    await waiting

    assert isinstance(second.exception(), RuntimeError)


async def test_wait_all_of_futures_already_done_does_not_wait() -> None:
    (done,) = _futures(1)
    done.set_result(None)

    await wait_all((done, done))
    await wait_all(())


@pytest.mark.parametrize("wait", [wait_all, wait_first])
async def test_a_cancelled_wait_cancels_none_of_its_futures(wait: object) -> None:
    durable, outage = _futures(2)
    waiting = asyncio.create_task(wait((durable, outage)))  # type: ignore[operator]
    await asyncio.sleep(0)

    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    assert not durable.cancelled()
    assert not outage.cancelled()
    await _no_callback_left(durable)
    await _no_callback_left(outage)


async def test_the_waits_make_their_waiter_on_the_futures_loop_without_looking_it_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No `asyncio.get_running_loop()` (a system call on CPython 3.11) once there is
    a future to wait on."""
    first, second = _futures(2)

    def looked_up() -> asyncio.AbstractEventLoop:
        raise AssertionError("the running loop was looked up")

    monkeypatch.setattr(asyncio, "get_running_loop", looked_up)
    waiting = [
        asyncio.ensure_future(wait_all((first, second))),
        asyncio.ensure_future(wait_first((first, second))),
    ]
    await asyncio.sleep(0)  # both are waiting now
    assert not any(wait.done() for wait in waiting)
    first.set_result(None)
    second.set_result(None)
    await asyncio.gather(*waiting)
