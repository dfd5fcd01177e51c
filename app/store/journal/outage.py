"""Riding out a short database outage (a restart, a failover) where giving up loses work.

The journal's batches retry here (`write_durably`), and so does a run's end
written outside it; the writer's `Outage` tells the requests that would start
something while a batch is being retried.

Only writes that must not be lost retry: a batch of receipts, and a run's end.
Requests that start something fail fast instead (503 with `Retry-After`), and
the caller retries. Connection-level errors are the transient ones; the pool
(`pool_pre_ping`) replaces the dead connections on the next checkout.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import psycopg
from sqlalchemy.exc import DBAPIError

if TYPE_CHECKING:
    from app.store.journal.backend import Backend
    from app.store.journal.batch import Batch

T = TypeVar("T")

logger = logging.getLogger("toolloop.outage")

RETRY_WINDOW_S = 30.0
FIRST_DELAY_S = 0.05
MAX_DELAY_S = 1.0


def is_transient(exc: BaseException) -> bool:
    """A lost or refused connection, a server shutting down, a busy SQLite file;
    not a missing table or a constraint violation."""
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    if isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError):
        return True
    return isinstance(orig, sqlite3.OperationalError) and (
        "locked" in str(orig) or "busy" in str(orig)
    )


async def retry_transient(
    attempt: Callable[[], Awaitable[T]], what: str, window_s: float = RETRY_WINDOW_S
) -> T:
    """`attempt()`, retried with backoff while it fails with a transient error, for at
    most `window_s`; then the last error propagates. An attempt must be safe to repeat."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + window_s
    delay = FIRST_DELAY_S
    while True:
        try:
            return await attempt()
        except Exception as exc:
            if not is_transient(exc) or loop.time() + delay > deadline:
                raise
            logger.warning("%s failed, retrying in %.2f s: %s", what, delay, type(exc).__name__)
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_DELAY_S)


class Outage:
    """Whether a write failed with a transient error and is being retried.

    `signal()` is a future resolved when a write fails so (already resolved while
    one is being retried); never cancel it: it is shared. The outage lasts while a
    write is being retried: once the retries end, committed or given up, the
    next write finds out afresh (a start that stayed refused would never see the
    database come back)."""

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None

    @property
    def on(self) -> bool:
        return self._future is not None and self._future.done()

    def signal(self) -> asyncio.Future[None]:
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return self._future

    def begin(self) -> None:
        if not self.signal().done():
            self.signal().set_result(None)

    def end(self) -> None:
        if self.on:
            self._future = None


async def write_durably(backend: Backend, batch: Batch, outage: Outage) -> set[str]:
    """Commit the batch through the backend, retried while it fails with a transient
    error (`retry_transient`); before each retry, look whether the last attempt
    committed and only its answer was lost. The ids of the runs whose key was
    claimed."""
    attempts = 0

    async def attempt() -> set[str]:
        nonlocal attempts
        attempts += 1
        if attempts > 1:
            won = await backend.committed(batch)
            if won is not None:
                return won
        try:
            return await backend.write(batch)
        except Exception as exc:
            if is_transient(exc):
                outage.begin()
            raise

    return await retry_transient(attempt, "a group commit")
