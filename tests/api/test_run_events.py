from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from fastapi import FastAPI

from app.api.auth import OPEN, create_key
from app.service.runs.stream import RunEvent, RunEventStream
from app.settings import Settings
from app.store.journal.batch import Batch
from app.store.journal.session import insert as journal_insert
from app.store.repositories.runs import RunRepository
from tests.api import run_tools
from tests.api.run_registry import REGISTRY, echo, gate, parallel, sequential
from tests.api.run_support import parse_events
from tests.support.app import AppFactory, stored_receipts
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


async def follow(app: FastAPI, client: httpx.AsyncClient, run_id: str) -> asyncio.Task[Any]:
    """Open the run's events stream and return once it is subscribed."""
    hub = app.state.runtime.events
    before = hub.subscriber_count(run_id)
    stream = asyncio.create_task(client.get(f"/runs/{run_id}/events"))
    await wait_for(lambda: hub.subscriber_count(run_id) > before)
    return stream


def receipt_keys(events: list[tuple[str, Any]]) -> list[tuple[str | None, str]]:
    return [(data["item_key"], data["call_key"]) for kind, data in events if kind == "receipt"]


async def test_a_running_parallel_plan_streams_each_receipt_then_its_end(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    lanes = {key: [gate("1", key), echo("2", key)] for key in ("a", "b", "c")}
    started = await client.post("/plans/parallel", json=parallel(lanes), headers=ASYNC)
    run_id = started.json()["run_id"]
    await wait_for(lambda: sum(run_tools.entered.values()) == 3)
    stream = await follow(app, client, run_id)

    for key in ("c", "a", "b"):
        run_tools.release(key)
    response = await stream

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_events(response.text)
    assert sorted(receipt_keys(events)) == [(k, c) for k in ("a", "b", "c") for c in ("1", "2")]
    assert events[-1] == ("end", {"run_id": run_id, "status": "succeeded"})
    assert [kind for kind, _ in events].count("end") == 1
    stored = {r.id: r for r in await stored_receipts(app, run_id)}
    for kind, data in events[:-1]:
        assert kind == "receipt"
        row = stored[data["receipt_id"]]
        assert (data["run_id"], data["status"], data["seq"]) == (run_id, row.status, row.seq)
        assert data["output"] == row.output


async def test_a_late_subscriber_first_gets_what_already_happened(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    lanes = {"done": [echo("1", "early")], "held": [gate("1", "held")]}
    started = await client.post("/plans/parallel", json=parallel(lanes), headers=ASYNC)
    run_id = started.json()["run_id"]
    await wait_for(lambda: run_tools.entered["held"] == 1 and run_tools.echoed == ["early"])
    await app.state.runtime.writer.flush()
    assert len(await stored_receipts(app, run_id)) == 1

    stream = await follow(app, client, run_id)
    run_tools.release("held")
    events = parse_events((await stream).text)

    assert receipt_keys(events) == [("done", "1"), ("held", "1")]
    assert events[-1] == ("end", {"run_id": run_id, "status": "succeeded"})


async def test_a_finished_run_replays_its_receipts_and_ends(client: httpx.AsyncClient) -> None:
    done = await client.post(
        "/plans/sequential",
        json=sequential(echo("1", "a"), {"call_key": "2", "tool": "echo", "args": {"text": "b"}}),
    )
    run_id = done.json()["plan_id"]

    response = await client.get(f"/runs/{run_id}/events")

    events = parse_events(response.text)
    assert [data["receipt_id"] for _, data in events[:-1]] == [
        r["receipt_id"] for r in done.json()["receipts"]
    ]
    assert events[-1] == ("end", {"run_id": run_id, "status": "succeeded"})
    assert ": keep-alive" not in response.text


async def test_a_cancelled_run_ends_its_stream_cancelled(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    started = await client.post(
        "/plans/sequential", json=sequential(gate("1", "held"), echo("2")), headers=ASYNC
    )
    run_id = started.json()["run_id"]
    await wait_for(lambda: run_tools.entered["held"] == 1)
    stream = await follow(app, client, run_id)

    await client.post(f"/runs/{run_id}/cancel")
    events = parse_events((await stream).text)

    assert [(data["call_key"], data["status"]) for _, data in events[:-1]] == [
        ("1", "failed"),
        ("2", "skipped"),
    ]
    assert events[-1] == ("end", {"run_id": run_id, "status": "cancelled"})


async def test_an_unknown_run_has_no_events(client: httpx.AsyncClient) -> None:
    response = await client.get("/runs/no-such-run/events")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


async def _next(events: AsyncIterator[RunEvent]) -> RunEvent:
    return await asyncio.wait_for(anext(events), timeout=30)


async def _next_news(events: AsyncIterator[RunEvent]) -> RunEvent:
    """The next event that is not a heartbeat."""
    for _ in range(100_000):
        event = await _next(events)
        if event.kind != "heartbeat":
            return event
    raise AssertionError("only heartbeats")


async def test_a_quiet_stream_sends_heartbeats(app: FastAPI, client: httpx.AsyncClient) -> None:
    runtime = app.state.runtime
    started = await client.post(
        "/plans/sequential", json=sequential(gate("1", "held")), headers=ASYNC
    )
    run_id = started.json()["run_id"]
    stream = RunEventStream(
        runtime.sessions, runtime.events, runtime.runs, heartbeat_s=0.01, poll_s=0.01
    )
    events = await stream.open(run_id, OPEN)
    try:
        assert (await _next(events)).kind == "heartbeat"
        run_tools.release("held")
        after = [await _next_news(events), await _next_news(events)]
        assert [event.kind for event in after] == ["receipt", "end"]
        assert after[1].data == {"run_id": run_id, "status": "succeeded"}
    finally:
        await events.aclose()


async def test_a_run_executing_elsewhere_is_followed_through_the_store(app: FastAPI) -> None:
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
        runtime.sessions, runtime.events, runtime.runs, heartbeat_s=60, poll_s=0.01
    )
    events = await stream.open(run_id, OPEN)
    try:
        elsewhere = foreign_receipt(run_id)
        async with runtime.sessions.begin() as session:
            await journal_insert(session, Batch(receipts=[elsewhere]))
        received = await _next(events)
        assert (received.kind, received.data and received.data["receipt_id"]) == (
            "receipt",
            elsewhere["id"],
        )
        async with runtime.sessions.begin() as session:
            await RunRepository(session).finish(run_id, status="failed", call_count=1)
        assert await _next(events) == RunEvent("end", {"run_id": run_id, "status": "failed"})
    finally:
        await events.aclose()


def foreign_receipt(run_id: str) -> dict[str, Any]:
    """A receipt row as another replica's writer would store it."""
    now = datetime.now(UTC)
    return {
        "id": f"{run_id}-0",
        "run_id": run_id,
        "seq": 0,
        "call_key": "1",
        "tool": "echo",
        "owner": "runner",
        "status": "failed",
        "output": None,
        "attempts": 1,
        "fingerprint": "sha256:" + "0" * 64,
        "idempotency_key": f"{run_id}:0",
        "started_at": now,
        "finished_at": now,
        "duration_ms": 1.0,
    }


class TestOnlyVisibleRunsStream:
    @pytest.fixture
    def keys_file(self, tmp_path: Path) -> Path:
        return tmp_path / "keys.yml"

    @pytest.fixture
    def keys(self, keys_file: Path) -> dict[str, str]:
        return {
            "alice": create_key(keys_file, "alice", ["plans:execute", "runs:read"]),
            "bob": create_key(keys_file, "bob", ["plans:execute", "runs:read"]),
        }

    @pytest.fixture
    def settings(self, make_app: AppFactory, keys_file: Path, keys: dict[str, str]) -> Settings:
        return make_app.settings(REGISTRY, api_keys=keys_file)

    async def test_another_callers_run_is_404(
        self, client: httpx.AsyncClient, keys: dict[str, str]
    ) -> None:
        done = await client.post(
            "/plans/sequential",
            json=sequential(echo("1")),
            headers={"Authorization": f"Bearer {keys['alice']}"},
        )
        run_id = done.json()["plan_id"]
        by_bob = await client.get(
            f"/runs/{run_id}/events", headers={"Authorization": f"Bearer {keys['bob']}"}
        )
        by_alice = await client.get(
            f"/runs/{run_id}/events", headers={"Authorization": f"Bearer {keys['alice']}"}
        )
        assert by_bob.status_code == 404
        assert parse_events(by_alice.text)[-1][0] == "end"
