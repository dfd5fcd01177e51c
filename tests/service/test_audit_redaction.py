"""Every audit row is redacted once, where the writer makes it, whoever emitted the event."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.engine.ports import AuditEvent, AuditKind
from app.store.database import create_session_factory
from app.store.journal.writer import GroupCommitWriter
from app.store.models import AuditEvent as AuditRow
from app.store.repositories.audit import AuditRepository
from tests.writer_support import RUN_ID, started_writer_process

KEY = "tl_0123456789ab_" + "auditSECRET0123456789abcdefghijklmnopqrstuv"
BEARER = "Bearer auditBEARERsecret0123456789"
NEEDLES = ("auditSECRET0123456789", "auditBEARERsecret0123456789")
T0 = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)


def engine_events() -> list[AuditEvent]:
    """A call's start and finish, its error holding secrets nobody redacted."""
    identity = {"receipt_id": "r1", "seq": 0, "parent_receipt_id": None}
    return [
        AuditEvent(AuditKind.CALL_STARTED, T0, RUN_ID, "c", "t", "k", None, identity),
        AuditEvent(
            AuditKind.CALL_FINISHED,
            T0,
            RUN_ID,
            "c",
            "t",
            "k",
            None,
            {
                **identity,
                "status": "failed",
                "attempts": 1,
                "duration_ms": 1.0,
                "error": {"kind": "exception", "message": f"used {KEY}", "outcome_unknown": False},
            },
        ),
        AuditEvent(
            AuditKind.DISPATCH_REJECTED, T0, RUN_ID, "c", "t", "k", None, {"reasons": [BEARER]}
        ),
    ]


def service_row(run_id: str | None = RUN_ID) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "at": T0,
        "kind": "plan.rejected",
        "caller": "c",
        "tool": None,
        "call_key": None,
        "item_key": None,
        "detail": {"owner": KEY, "problems": [{"pointer": "/x", "message": BEARER}]},
    }


async def write_through(writer: GroupCommitWriter, events: Sequence[Any]) -> None:
    writer.start()
    try:
        for event in events:
            if isinstance(event, dict):
                writer.emit_row(event)
            else:
                writer.emit(event)
        await writer.flush()
    finally:
        await writer.aclose()


async def stored_details(engine: AsyncEngine) -> str:
    async with create_session_factory(engine)() as session:
        details = (await session.scalars(select(AuditRow.detail))).all()
        read = await AuditRepository(session).list_for_run(RUN_ID)
    return repr(details) + repr([event.detail for event in read])


def assert_redacted(stored: str) -> None:
    assert "[REDACTED]" in stored
    leaked = [needle for needle in NEEDLES if needle in stored]
    assert not leaked, stored


async def test_audit_rows_written_by_the_writer_are_redacted(engine: AsyncEngine) -> None:
    events: list[Any] = [*engine_events(), service_row(), service_row(None)]
    await write_through(GroupCommitWriter(create_session_factory(engine)), events)
    assert_redacted(await stored_details(engine))


@pytest.mark.parametrize("lone", [True, False], ids=["own-rows", "shared-row"])
async def test_audit_rows_sent_to_the_writer_process_are_redacted(
    database_url: str, engine: AsyncEngine, lone: bool
) -> None:
    events: list[Any] = engine_events()[1:2] if lone else [*engine_events(), service_row()]
    async with started_writer_process(database_url) as process:
        option = "sqlite_process" if database_url.startswith("sqlite") else "postgres_process"
        writer = GroupCommitWriter(create_session_factory(engine), **{option: process})
        await write_through(writer, events)
    assert_redacted(await stored_details(engine))
