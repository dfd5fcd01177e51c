"""Riding out a short database outage (a restart, a failover) where giving up loses work.

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
from typing import TypeVar

import psycopg
from sqlalchemy.exc import DBAPIError

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
