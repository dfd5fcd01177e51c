"""Runs written through the service, and tampering with their stored rows by SQL, for the
hash chain's read-side tests (`GET /runs/{id}/proof`, `toolloop audit export|verify`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Table, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.cli import main as cli_main
from app.entry_point import main as toolloop
from app.foundation import chain as links
from app.service.evidence.stored import stored_rows
from app.store.models import AuditEvent, Receipt
from tests.router.http_support import run_body
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text

RECEIPTS: Table = Receipt.__table__  # type: ignore[assignment]
AUDIT: Table = AuditEvent.__table__  # type: ignore[assignment]
TABLES = {"receipts": RECEIPTS, "audit_events": AUDIT}
CHAIN_COLUMNS = ("chain_seq", "chain_link")

PLAN = {
    "owner": "agent",
    "calls": [
        {"call_key": "a", "tool": "echo", "args": {"text": "one"}},
        {"call_key": "b", "tool": "echo", "args": {"text": "two"}},
        {"call_key": "c", "tool": "lookup", "args": {"term": "three"}},
    ],
}


async def write_runs(app: FastAPI, client: httpx.AsyncClient, model: FakeLLM) -> tuple[str, str]:
    """(a sequential plan's run id, a router run's), both ended and stored."""
    plan = await client.post("/plans/sequential", json=PLAN)
    assert plan.status_code == 200, plan.text
    model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_text("enough"),
        openai_text("ToolLoop runs tools."),
    )
    routed = await client.post("/router/runs", json=run_body())
    assert routed.status_code == 200, routed.text
    assert routed.json()["status"] == "done"
    await app.state.runtime.writer.flush()
    return str(plan.json()["plan_id"]), str(routed.json()["run_id"])


async def chained_rows(session: AsyncSession, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(table, row as read) of the run's chained rows, in chain order."""
    rows: list[tuple[str, dict[str, Any]]] = []
    for name, table in TABLES.items():
        result = await session.execute(
            select(table).where(table.c.run_id == run_id, table.c.chain_seq.is_not(None))
        )
        rows.extend((name, dict(row)) for row in result.mappings())
    return sorted(rows, key=lambda found: int(found[1]["chain_seq"]))


def _key(table: Table, row: dict[str, Any]) -> Any:
    return table.c.id == row["id"]


Tamper = Callable[[AsyncSession, str], Awaitable[None]]


async def change_receipt_column(session: AsyncSession, run_id: str) -> None:
    _, row = next(found for found in await chained_rows(session, run_id) if found[0] == "receipts")
    await session.execute(
        update(RECEIPTS).where(_key(RECEIPTS, row)).values(attempts=row["attempts"] + 1)
    )


async def change_receipt_output(session: AsyncSession, run_id: str) -> None:
    receipts = [row for name, row in await chained_rows(session, run_id) if name == "receipts"]
    await session.execute(
        update(RECEIPTS).where(_key(RECEIPTS, receipts[-1])).values(output={"forged": True})
    )


async def change_audit_detail(session: AsyncSession, run_id: str) -> None:
    audit = [row for name, row in await chained_rows(session, run_id) if name == "audit_events"]
    await session.execute(
        update(AUDIT).where(_key(AUDIT, audit[0])).values(detail={"forged": True})
    )


async def remove_middle_row(session: AsyncSession, run_id: str) -> None:
    rows = await chained_rows(session, run_id)
    name, row = rows[len(rows) // 2]
    await session.execute(delete(TABLES[name]).where(_key(TABLES[name], row)))


async def remove_last_row(session: AsyncSession, run_id: str) -> None:
    name, row = (await chained_rows(session, run_id))[-1]
    await session.execute(delete(TABLES[name]).where(_key(TABLES[name], row)))


async def swap_positions(session: AsyncSession, run_id: str) -> None:
    """Two neighbours' places swapped, each keeping its own link."""
    rows = await chained_rows(session, run_id)
    (first_table, first), (second_table, second) = rows[1], rows[2]
    for name, row, seq in (
        (first_table, first, -1),
        (second_table, second, first["chain_seq"]),
        (first_table, first, second["chain_seq"]),
    ):
        await session.execute(
            update(TABLES[name]).where(_key(TABLES[name], row)).values(chain_seq=seq)
        )


_CONTENT = ("call_key", "tool", "status", "output", "attempts", "fingerprint")


async def swap_contents(session: AsyncSession, run_id: str) -> None:
    """Two receipts' contents swapped, each row keeping its place and link."""
    receipts = [row for name, row in await chained_rows(session, run_id) if name == "receipts"]
    first, second = receipts[0], receipts[1]
    for row, other in ((first, second), (second, first)):
        await session.execute(
            update(RECEIPTS)
            .where(_key(RECEIPTS, row))
            .values({column: other[column] for column in _CONTENT})
        )


async def insert_row(session: AsyncSession, run_id: str) -> None:
    """A forged receipt put in the middle with a link made for it, the rows after it
    moved one place on: what someone who knows the scheme but not the history would do."""
    rows = await chained_rows(session, run_id)
    place = len(rows) // 2
    template = next(row for name, row in rows if name == "receipts")
    forged = dict(template, id=template["id"] + "-forged", seq=999, call_key="forged")
    forged["chain_seq"] = rows[place][1]["chain_seq"]
    (stored,) = stored_rows([forged])
    forged["chain_link"] = links.link(
        rows[place - 1][1]["chain_link"], links.row_digest("receipts", stored)
    )
    for name, row in reversed(rows[place:]):
        await session.execute(
            update(TABLES[name])
            .where(_key(TABLES[name], row))
            .values(chain_seq=row["chain_seq"] + 1)
        )
    await session.execute(insert(RECEIPTS).values(forged))


TAMPERS: dict[str, Tamper] = {
    "changed receipt column": change_receipt_column,
    "changed receipt output": change_receipt_output,
    "changed audit detail": change_audit_detail,
    "removed middle row": remove_middle_row,
    "removed last row": remove_last_row,
    "swapped positions": swap_positions,
    "swapped contents": swap_contents,
    "inserted row": insert_row,
}


async def tamper(app: FastAPI, run_id: str, change: Tamper) -> None:
    async with app.state.runtime.sessions() as session, session.begin():
        await change(session, run_id)


async def export(database_url: str, out: Path, *selection: str) -> int:
    """`toolloop audit export` in a thread (it runs its own event loop)."""
    argv = ["audit", "export", *selection, "--out", str(out), "--database-url", database_url]
    return await asyncio.to_thread(cli_main, argv)


def verify(
    bundle: Path, capsys: pytest.CaptureFixture[str], *options: str
) -> tuple[int, list[str]]:
    """`toolloop audit verify`: its status and its output's lines."""
    capsys.readouterr()
    status = toolloop(["audit", "verify", str(bundle), *options])
    return status, capsys.readouterr().out.splitlines()
