"""Fixtures' helpers for the run-control tests: reading the store and the events stream."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI
from sqlalchemy import func, select

from app.store.models import Receipt, Run
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository


async def run_row(app: FastAPI, run_id: str) -> Run:
    async with app.state.runtime.sessions() as session:
        run = await RunRepository(session).get(run_id)
    assert run is not None
    return run


async def run_count(app: FastAPI) -> int:
    async with app.state.runtime.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(Run)) or 0)


async def stored_receipts(app: FastAPI, run_id: str) -> list[Receipt]:
    async with app.state.runtime.sessions() as session:
        return await ReceiptRepository(session).list_for_run(run_id)


async def run_ended(app: FastAPI, run_id: str) -> bool:
    return (await run_row(app, run_id)).status != "running"


def parse_events(text: str) -> list[tuple[str, Any]]:
    """(event, data) pairs of a text/event-stream body; comment lines are dropped."""
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        events.append((fields["event"], orjson.loads(fields["data"])))
    return events
