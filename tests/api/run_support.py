"""Helpers of the run-control tests: runs counted and ended, and the events stream read."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI
from sqlalchemy import func, select

from app.store.models import Run
from tests.support.app import stored_run


async def run_count(app: FastAPI) -> int:
    async with app.state.runtime.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(Run)) or 0)


async def run_ended(app: FastAPI, run_id: str) -> bool:
    return (await stored_run(app, run_id)).status != "running"


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
