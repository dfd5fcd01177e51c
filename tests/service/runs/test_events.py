"""The in-process events hub, and the writer that feeds it after each commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.service.runs.events import RunEventHub
from app.store.database import create_session_factory
from app.store.journal.writer import GroupCommitWriter
from app.store.repositories.receipts import ReceiptRepository
from tests.writer_support import succeeded_receipt


def row(run_id: str, seq: int) -> dict[str, Any]:
    return {"run_id": run_id, "seq": seq}


async def test_subscribers_get_their_runs_receipts_and_end() -> None:
    hub = RunEventHub()
    with hub.subscribe("r1") as mine, hub.subscribe("r2") as other:
        hub.publish_receipts([row("r1", 0), row("r2", 0), row("r1", 1)])
        hub.end("r1", "succeeded")

        assert await mine.wait(10)
        assert [r["seq"] for r in mine.drain()] == [0, 1]
        assert mine.ended == "succeeded"
        assert [r["seq"] for r in other.drain()] == [0]
        assert other.ended is None
    assert hub.subscriber_count("r1") == 0


async def test_a_full_queue_marks_the_subscriber_lagged_but_keeps_the_end() -> None:
    hub = RunEventHub(max_pending=2)
    with hub.subscribe("r1") as subscription:
        hub.publish_receipts([row("r1", seq) for seq in range(5)])
        hub.end("r1", "failed")

        assert [r["seq"] for r in subscription.drain()] == [0, 1]
        assert subscription.lagged
        assert subscription.ended == "failed"


async def test_a_quiet_wait_times_out_and_close_wakes_everyone() -> None:
    hub = RunEventHub()
    with hub.subscribe("r1") as subscription:
        assert not await subscription.wait(0.001)
        hub.close()
        assert await subscription.wait(10)
        assert subscription.closed
    with hub.subscribe("r1") as late:
        assert late.closed


async def test_the_writer_publishes_committed_rows_as_stored(engine: AsyncEngine) -> None:
    sessions = create_session_factory(engine)
    published: list[Sequence[dict[str, Any]]] = []
    writer = GroupCommitWriter(sessions, linger_s=0)
    writer.add_listener(lambda rows: published.append(list(rows)))
    writer.add_listener(lambda rows: 1 / 0)  # a failing listener is logged, not fatal
    writer.start()
    secret = "Bearer abcdefghijklmnopqrstuvwxyz0123456789"
    await writer.submit(succeeded_receipt(0, {"token": secret}))
    await writer.aclose()

    ((published_row,),) = published
    async with sessions() as session:
        (stored,) = await ReceiptRepository(session).list_for_run("run-1")
    assert published_row["created_at"] == stored.created_at
    assert published_row["output"] == stored.output == {"token": "Bearer [REDACTED]"}
