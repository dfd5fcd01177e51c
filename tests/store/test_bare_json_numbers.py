"""A JSON column holding a bare number reads back (SQLite stores it as a number)."""

from __future__ import annotations

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.database import create_session_factory
from app.store.models import Receipt
from app.store.repositories import ReceiptRepository
from tests.store.factories import create_run, receipt_row


@pytest.mark.parametrize("output", [3, -7, 2.5, 0, True, None, "3", [1, 2]])
async def test_a_receipts_output_reads_back_whatever_json_value_it_is(
    engine: AsyncEngine, output: object
) -> None:
    sessions = create_session_factory(engine)
    async with sessions.begin() as session:
        await create_run(session, "run-1")
        await session.execute(insert(Receipt), [receipt_row("run-1", 0, output=output)])

    async with sessions() as session:
        (receipt,) = await ReceiptRepository(session).list_for_run("run-1")
    assert receipt.output == output
    assert type(receipt.output) is type(output)
