from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import OperationalError

from app.service.commits import committed
from app.service.errors import StorageUnavailable


async def test_the_result_of_a_committed_transaction_is_passed_on() -> None:
    durable: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    durable.set_result(True)
    assert await committed(durable, "x") is True


@pytest.mark.parametrize(
    "error", [OperationalError("COMMIT", {}, Exception("gone")), RuntimeError("closed")]
)
async def test_a_failed_transaction_is_storage_unavailable_naming_what_failed(
    error: Exception,
) -> None:
    durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    durable.set_exception(error)
    with pytest.raises(StorageUnavailable, match=r"^the run could not be recorded: "):
        await committed(durable, "the run could not be recorded")


async def test_a_waiter_cancelled_leaves_the_shared_future_alone() -> None:
    durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiter = asyncio.create_task(committed(durable, "x"))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not durable.cancelled()
    durable.set_result(None)
