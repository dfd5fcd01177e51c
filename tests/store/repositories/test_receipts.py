from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.journal.batch import Batch
from app.store.journal.session import insert as journal_insert
from app.store.repositories import ReceiptRepository
from tests.store.factories import T0, create_run, receipt_row


async def test_add_many_stores_rows_listed_in_sequence_order(session: AsyncSession) -> None:
    await create_run(session, "run-1")
    receipts = ReceiptRepository(session)
    output = {"z": 1, "a": [1.5, None, True], "text": "nul\u0000 and ünïcode"}
    await journal_insert(
        session,
        Batch(
            receipts=[
                receipt_row("run-1", 2, status="skipped", output=None, started_at=T0),
                receipt_row("run-1", 0, output=output, cache_hit=True, duration_ms=1.25),
                receipt_row(
                    "run-1",
                    1,
                    item_key="lane-a",
                    parallel_batch_id="batch-1",
                    status="failed",
                    output=None,
                    error={"kind": "timeout", "message": "took too long"},
                    attempts=3,
                    control={"continue": False},
                ),
            ]
        ),
    )
    await session.commit()
    session.expunge_all()

    stored = await receipts.list_for_run("run-1")

    assert [(r.seq, r.call_key, r.status) for r in stored] == [
        (0, "c0", "succeeded"),
        (1, "c1", "failed"),
        (2, "c2", "skipped"),
    ]
    first, second, third = stored
    assert first.output == output
    assert list(first.output) == ["z", "a", "text"]
    assert (first.cache_hit, first.duration_ms, first.output_truncated) == (True, 1.25, False)
    assert first.started_at == T0
    assert first.finished_at == T0 + timedelta(milliseconds=5)
    assert (second.item_key, second.parallel_batch_id, second.attempts) == ("lane-a", "batch-1", 3)
    assert second.error == {"kind": "timeout", "message": "took too long"}
    assert second.control == {"continue": False}
    assert (third.output, third.error, third.control) == (None, None, None)
    assert await receipts.list_for_run("other") == []


async def test_add_many_with_no_rows_does_nothing(session: AsyncSession) -> None:
    await journal_insert(session, Batch(receipts=[]))


async def test_sequence_numbers_are_unique_within_a_run(session: AsyncSession) -> None:
    await create_run(session, "run-1")
    await journal_insert(session, Batch(receipts=[receipt_row("run-1", 0)]))
    with pytest.raises(IntegrityError):
        await journal_insert(session, Batch(receipts=[receipt_row("run-1", 0, id="another")]))


async def test_a_receipt_needs_its_run(session: AsyncSession) -> None:
    with pytest.raises(IntegrityError):
        await journal_insert(session, Batch(receipts=[receipt_row("no-such-run", 0)]))


async def test_list_page_walks_newest_first_with_filters(session: AsyncSession) -> None:
    await create_run(session, "run-1")
    await create_run(session, "run-2")
    same_time = T0 + timedelta(minutes=1)
    rows = [
        receipt_row("run-1", 0, created_at=T0),
        receipt_row("run-1", 1, created_at=same_time, tool="lookup"),
        receipt_row("run-1", 2, created_at=same_time, status="failed"),
        receipt_row("run-2", 0, created_at=same_time + timedelta(seconds=1)),
    ]
    receipts = ReceiptRepository(session)
    await journal_insert(session, Batch(receipts=rows))
    await session.commit()

    first = await receipts.list_page(limit=3)
    rest = await receipts.list_page(limit=3, after=first.next)

    assert [r.id for r in first.items] == [
        "run-2-receipt-0",
        "run-1-receipt-2",
        "run-1-receipt-1",
    ]
    assert [r.id for r in rest.items] == ["run-1-receipt-0"]
    assert rest.next is None
    filtered = {
        "tool": await receipts.list_page(limit=10, tool="lookup"),
        "status": await receipts.list_page(limit=10, status="failed"),
        "succeeded": await receipts.list_page(limit=10, status="succeeded"),
        "owner": await receipts.list_page(limit=10, owner="nobody"),
        "run": await receipts.list_page(limit=10, run_id="run-2"),
    }
    assert {name: [r.id for r in page.items] for name, page in filtered.items()} == {
        "tool": ["run-1-receipt-1"],
        "status": ["run-1-receipt-2"],
        "succeeded": ["run-2-receipt-0", "run-1-receipt-1", "run-1-receipt-0"],
        "owner": [],
        "run": ["run-2-receipt-0"],
    }


async def test_get(session: AsyncSession) -> None:
    await create_run(session, "run-1")
    receipts = ReceiptRepository(session)
    await journal_insert(session, Batch(receipts=[receipt_row("run-1", 0)]))

    receipt = await receipts.get("run-1-receipt-0")

    assert receipt is not None
    assert receipt.fingerprint == f"sha256:{0:064x}"
    assert await receipts.get("missing") is None
