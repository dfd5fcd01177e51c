"""Waiting for a group commit (`GroupCommitWriter`) on behalf of a request."""

from __future__ import annotations

import asyncio
from typing import TypeVar

from sqlalchemy.exc import SQLAlchemyError

from app.foundation.waiting import wait_all
from app.service.errors import StorageUnavailable

T = TypeVar("T")


async def committed(durable: asyncio.Future[T], failure: str) -> T:
    """The future's result once its transaction committed; StorageUnavailable
    (`failure: why`) if it failed or the writer was closed."""
    # Never cancelled: the future is shared by the whole transaction.
    await wait_all((durable,))
    try:
        return durable.result()
    except (SQLAlchemyError, RuntimeError) as exc:
        raise StorageUnavailable(f"{failure}: {exc}") from exc
