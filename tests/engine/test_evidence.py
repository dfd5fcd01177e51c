"""Evidence hooks get each redacted receipt after it is durable; a failing hook changes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from app.engine.ports import AuditKind, CachedOutput
from app.engine.receipt import Receipt, Status
from app.store.journal.events import audit_event_rows
from tests.engine import engine_tools
from tests.engine.harness import tool
from tests.support.waiting import wait_for


class GatedSink:
    """Receipts become durable only when the test says so."""

    def __init__(self) -> None:
        self.receipts: list[Receipt] = []
        self.futures: list[asyncio.Future[None]] = []

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.receipts.append(receipt)
        self.futures.append(future)
        return future

    def commit(self) -> None:
        for future in self.futures:
            if not future.done():
                future.set_result(None)


async def test_hook_runs_after_the_receipt_is_durable_and_gets_the_redacted_copy(
    make_harness: Any,
) -> None:
    sink = GatedSink()
    harness = make_harness(
        {"s": tool("secret", redact=["token"])}, hooks=["record_evidence"], receipts=sink
    )

    running = asyncio.create_task(harness.sequential([("1", "s", {"note": "n"})]))
    await wait_for(lambda: sink.receipts, every_s=0)
    for _ in range(10):
        await asyncio.sleep(0)
    assert engine_tools.STATE.evidence == []
    assert not running.done()  # the plan reports only durable receipts

    sink.commit()
    outcome = await running
    await harness.engine.drain()

    (delivered,) = engine_tools.STATE.evidence
    assert delivered == outcome.receipts[0].to_stored()
    assert delivered["output"]["token"] == "[REDACTED]"


async def test_a_failing_hook_is_audited_and_never_changes_the_receipt(
    make_harness: Any,
) -> None:
    harness = make_harness({"e": tool("aecho")}, hooks=["failing_hook", "record_evidence"])

    outcome = await harness.sequential([("1", "e", {})])
    await harness.engine.drain()

    (receipt,) = outcome.receipts
    assert receipt.status is Status.SUCCEEDED
    (failed,) = harness.events(AuditKind.EVIDENCE_FAILED)
    assert failed.detail["receipt_id"] == receipt.receipt_id
    assert failed.detail["hook"] == "tests.engine.engine_tools:failing_hook"
    # The row the writer stores is redacted (`app.store.journal.records`), as every audit row.
    (stored,) = audit_event_rows([failed])
    assert "sk-abc" not in stored["detail"]["error"]
    assert "RuntimeError: hook broke" in stored["detail"]["error"]
    assert len(engine_tools.STATE.evidence) == 1
