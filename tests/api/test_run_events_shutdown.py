"""A shutdown beginning (`Runtime.begin_shutdown`, on SIGTERM) ends every event stream
with a final event: `end` with `interrupted` for this process's runs, `shutdown`
for a run going on elsewhere."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from uuid import uuid4

import httpx
import pytest
from fastapi import FastAPI

from app.api.auth import OPEN
from app.service.runs.stream import SHUTDOWN, RunEvent, RunEventStream
from app.settings import Settings
from app.store.repositories.runs import RunRepository
from tests.api import run_tools
from tests.api.run_registry import REGISTRY, gate, sequential
from tests.api.run_support import parse_events
from tests.support.app import AppFactory, stored_run
from tests.support.waiting import wait_for

ASYNC = {"Prefer": "respond-async"}


@pytest.fixture(autouse=True)
def _fresh_tools() -> Iterator[None]:
    run_tools.reset()
    yield
    run_tools.reset()


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


async def test_a_shutdown_ends_a_local_runs_stream_interrupted(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    runtime = app.state.runtime
    started = await client.post(
        "/plans/sequential", json=sequential(gate("1", "held")), headers=ASYNC
    )
    run_id = started.json()["run_id"]
    await wait_for(lambda: run_tools.entered["held"] == 1)
    stream = asyncio.create_task(client.get(f"/runs/{run_id}/events"))
    await wait_for(lambda: runtime.events.subscriber_count(run_id) == 1)

    await runtime.begin_shutdown()
    events = parse_events((await stream).text)

    assert events[-1] == ("end", {"run_id": run_id, "status": "interrupted"})
    assert [data["status"] for kind, data in events if kind == "receipt"] == ["failed"]
    assert (await stored_run(app, run_id)).status == "interrupted"


async def test_a_shutdown_ends_the_stream_of_a_run_going_on_elsewhere(app: FastAPI) -> None:
    runtime = app.state.runtime
    run_id = str(uuid4())
    async with runtime.sessions.begin() as session:
        await RunRepository(session).create(
            id=run_id,
            kind="sequential",
            owner="runner",
            contract_hash=runtime.contract.hash,
            instance_id=runtime.instance_id,
        )
    stream = RunEventStream(
        runtime.sessions, runtime.events, runtime.runs, heartbeat_s=60, poll_s=60
    )
    events = await stream.open(run_id, OPEN)
    try:
        first = asyncio.ensure_future(anext(events))
        await wait_for(lambda: runtime.events.subscriber_count(run_id) == 1)
        await runtime.begin_shutdown()
        assert await first == RunEvent(
            "shutdown", {"run_id": run_id, "status": "running", "detail": SHUTDOWN}
        )
        with pytest.raises(StopAsyncIteration):
            await anext(events)
    finally:
        await events.aclose()
