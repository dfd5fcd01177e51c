"""Waiting on futures that others share, without ever cancelling them.

A receipt's durability future is shared by its whole transaction, a run's task
by every request waiting for it: a waiter that is cancelled must not cancel
them. `asyncio.wait` and `asyncio.shield` promise that with a task or an inner
future per wait; these need one callback per future and one waiter, and they
run once or twice per run. The waiter is made on the futures' own loop: on
CPython 3.11 `asyncio.get_running_loop()` makes a `getpid` system call each
time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def wait_all(futures: Iterable[asyncio.Future[Any]]) -> None:
    """Return once every future is done (results and errors are left to the caller)."""
    pending = {future for future in futures if not future.done()}
    if not pending:
        return
    left = len(pending)
    waiter = next(iter(pending)).get_loop().create_future()

    def one_done(_: asyncio.Future[Any]) -> None:
        nonlocal left
        left -= 1
        if left == 0 and not waiter.done():
            waiter.set_result(None)

    for future in pending:
        future.add_done_callback(one_done)
    try:
        await waiter
    finally:
        if left:  # cancelled: what has not fired would fire into a dead wait
            for future in pending:
                future.remove_done_callback(one_done)


async def wait_first(futures: Iterable[asyncio.Future[Any]]) -> None:
    """Return once one of the futures is done (as `asyncio.wait(FIRST_COMPLETED)`)."""
    watched = set(futures)
    if any(future.done() for future in watched):
        return
    loop = next(iter(watched)).get_loop() if watched else asyncio.get_running_loop()
    waiter = loop.create_future()

    def wake(_: asyncio.Future[Any]) -> None:
        if not waiter.done():
            waiter.set_result(None)

    for future in watched:
        future.add_done_callback(wake)
    try:
        await waiter
    finally:
        for future in watched:
            future.remove_done_callback(wake)
