"""Rows for the read-API tests, written straight through the repositories, and a pager."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from app.store.journal.batch import Batch
from app.store.journal.session import insert as journal_insert
from app.store.repositories.runs import RunRepository

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


async def seed_run(
    app: FastAPI,
    run_id: str,
    *,
    owner: str = "text-worker",
    kind: str = "sequential",
    status: str = "succeeded",
    caller: str | None = None,
    created_at: datetime = T0,
    outcome: dict[str, Any] | None = None,
) -> None:
    runtime = app.state.runtime
    async with runtime.sessions.begin() as session:
        runs = RunRepository(session)
        run = await runs.create(
            id=run_id,
            kind=kind,
            owner=owner,
            contract_hash=runtime.contract.hash,
            instance_id=runtime.instance_id,
            caller=caller,
            started_at=created_at,
        )
        run.created_at = created_at
        if status != "running":
            await runs.finish(
                run_id,
                status=status,
                outcome=outcome,
                finished_at=created_at + timedelta(milliseconds=250),
            )


def receipt_row(run_id: str, seq: int, **overrides: Any) -> dict[str, Any]:
    started = T0 + timedelta(seconds=seq)
    row: dict[str, Any] = {
        "id": f"{run_id}-r{seq:04d}",
        "run_id": run_id,
        "seq": seq,
        "call_key": f"c{seq}",
        "item_key": None,
        "parallel_batch_id": None,
        "tool": "normalize_text",
        "owner": "text-worker",
        "status": "succeeded",
        "output": {"text": f"out {seq}"},
        "error": None,
        "attempts": 1,
        "cache_hit": False,
        "cache_source_receipt_id": None,
        "fingerprint": f"sha256:{seq:064x}",
        "idempotency_key": f"{run_id}:{seq}",
        "parent_receipt_id": None,
        "control": None,
        "admission_wait_ms": 0.0,
        "started_at": started,
        "finished_at": started + timedelta(milliseconds=5),
        "duration_ms": 5.0,
        "created_at": started,
    }
    row.update(overrides)
    return row


async def seed_receipts(app: FastAPI, rows: list[dict[str, Any]]) -> None:
    async with app.state.runtime.sessions.begin() as session:
        await journal_insert(session, Batch(receipts=rows))


async def page_through(
    client: httpx.AsyncClient,
    url: str,
    *,
    limit: int,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every item of a listing, following `next_cursor` until it is null."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = {**(params or {}), "limit": limit}
        if cursor is not None:
            query["cursor"] = cursor
        response = await client.get(url, params=query, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"items", "next_cursor"}
        assert len(body["items"]) <= limit
        items.extend(body["items"])
        cursor = body["next_cursor"]
        if cursor is None:
            return items
        assert body["items"], "a page with a next cursor must not be empty"
