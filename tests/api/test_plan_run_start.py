"""When a plan's run start commits: before the first call, or with its first receipts.

A plan of read tools whose caller waits for its end, with no Idempotency-Key,
runs its first call without waiting for its start to commit; every other plan
commits its start first. The writer is held here (its transactions wait for
the test) to see which calls ran before anything was committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.service.runs import records as run_records
from app.settings import Settings
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository
from tests.api import plan_tools
from tests.api.plan_registry import REGISTRY
from tests.support.app import AppFactory
from tests.support.waiting import wait_for


@pytest.fixture(autouse=True)
def _fresh_tool_counters() -> Iterator[None]:
    plan_tools.reset()
    yield
    plan_tools.reset()


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


class HeldWriter:
    """Holds every group commit of the app's writer until `release`."""

    def __init__(self, app: FastAPI) -> None:
        backend = app.state.runtime.writer.backend
        self.released = asyncio.Event()
        self.waiting = 0
        write = backend.write

        async def held(batch: Any) -> Any:
            self.waiting += 1
            await self.released.wait()
            return await write(batch)

        setattr(backend, "write", held)  # noqa: B010

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def held(app: FastAPI) -> Iterator[HeldWriter]:
    """The app's writer, held; released at the end, so that the app can close."""
    holding = HeldWriter(app)
    yield holding
    holding.release()


def read_call(key: str) -> dict[str, Any]:
    return {
        "call_key": key,
        "tool": "probe",
        "args": {"group": "read", "label": key, "delay_s": 0},
    }


def effect_call(key: str) -> dict[str, Any]:
    return {"call_key": key, "tool": "echo", "args": {"text": key}}  # non_idempotent


async def stored(app: FastAPI, run_id: str) -> tuple[Any, list[Any]]:
    async with app.state.runtime.sessions() as session:
        run = await RunRepository(session).get(run_id)
        receipts = await ReceiptRepository(session).list_for_run(run_id)
    return run, receipts


async def test_a_plan_of_read_tools_runs_its_calls_before_its_start_commits(
    app: FastAPI, client: httpx.AsyncClient, held: HeldWriter
) -> None:
    body = {"owner": "tester", "calls": [read_call("a"), read_call("b")]}

    answer = asyncio.create_task(client.post("/plans/sequential", json=body))
    await wait_for(lambda: plan_tools.calls["read"] == 2, every_s=0)
    assert held.waiting >= 1  # nothing was committed, and both calls ran
    assert not answer.done()  # the answer waits for the start and the receipts

    held.release()
    response = await answer
    assert response.status_code == 200
    run, receipts = await stored(app, response.json()["plan_id"])
    assert run is not None
    assert run.status == "succeeded"
    assert [r.call_key for r in receipts] == ["a", "b"]


async def test_a_parallel_plan_of_read_tools_runs_before_its_start_commits(
    app: FastAPI, client: httpx.AsyncClient, held: HeldWriter
) -> None:
    body = {
        "owner": "tester",
        "max_concurrency": 2,
        "lanes": [
            {"item_key": "x", "calls": [read_call("a")]},
            {"item_key": "y", "calls": [read_call("b")]},
        ],
    }

    answer = asyncio.create_task(client.post("/plans/parallel", json=body))
    await wait_for(lambda: plan_tools.calls["read"] == 2, every_s=0)

    held.release()
    response = await answer
    assert response.status_code == 200
    run, receipts = await stored(app, response.json()["plan_id"])
    assert run is not None
    assert len(receipts) == 2


@pytest.mark.parametrize(
    ("calls", "headers"),
    [
        ([effect_call("a")], {}),
        ([read_call("a"), effect_call("b")], {}),
        ([read_call("a")], {"Prefer": "respond-async"}),
    ],
    ids=["a-tool-with-effects", "read-then-effects", "respond-async"],
)
async def test_any_other_plan_commits_its_start_before_its_first_call(
    client: httpx.AsyncClient,
    held: HeldWriter,
    calls: list[dict[str, Any]],
    headers: dict[str, str],
) -> None:
    body = {"owner": "tester", "calls": calls}

    answer = asyncio.create_task(client.post("/plans/sequential", json=body, headers=headers))
    await wait_for(lambda: held.waiting >= 1, every_s=0)
    for _ in range(200):
        await asyncio.sleep(0)
    assert plan_tools.calls["read"] == 0
    assert plan_tools.calls["echo"] == 0

    held.release()
    response = await answer
    assert response.status_code in (200, 202)


async def test_a_plan_with_an_idempotency_key_commits_its_start_first(
    app: FastAPI, client: httpx.AsyncClient, held: HeldWriter
) -> None:
    # The claim and the start share a group commit, which no call runs before.
    body = {"owner": "tester", "calls": [read_call("a")]}

    answer = asyncio.create_task(
        client.post("/plans/sequential", json=body, headers={"Idempotency-Key": "k-1"})
    )
    await wait_for(lambda: held.waiting == 1, every_s=0)
    for _ in range(50):
        await asyncio.sleep(0)
    assert plan_tools.calls["read"] == 0
    async with app.state.runtime.sessions() as session:
        assert (await RunRepository(session).list_page(limit=10)).items == []

    held.release()
    response = await answer
    assert response.status_code == 200
    assert plan_tools.calls["read"] == 1
    run, receipts = await stored(app, response.json()["plan_id"])
    assert run.status == "succeeded"
    assert [receipt.call_key for receipt in receipts] == ["a"]


async def test_a_plan_of_read_tools_is_refused_before_any_call_while_the_database_is_away(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    writer = app.state.runtime.writer
    writer.outage().set_result(None)  # what a transient write failure does

    response = await client.post(
        "/plans/sequential", json={"owner": "tester", "calls": [read_call("a")]}
    )

    assert response.status_code == 503
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["detail"] == "The database is unavailable; retry later."
    assert plan_tools.calls["read"] == 0


async def test_a_plan_whose_start_failed_answers_503_and_leaves_nothing_stored(
    app: FastAPI, client: httpx.AsyncClient, held: HeldWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_start_row = run_records.run_start_row

    def refused_row(**fields: Any) -> dict[str, Any]:
        return {**run_start_row(**fields), "contract_hash": "sha256:" + "0" * 64}

    monkeypatch.setattr(run_records, "run_start_row", refused_row)
    body = {"owner": "tester", "calls": [read_call("a"), read_call("b"), read_call("c")]}
    answer = asyncio.create_task(client.post("/plans/sequential", json=body))
    await wait_for(lambda: plan_tools.calls["read"] >= 1, every_s=0)
    held.release()
    response = await answer

    assert response.status_code == 503
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["detail"] == "The database is unavailable; retry later."
    async with app.state.runtime.sessions() as session:
        assert (await RunRepository(session).list_page(limit=10)).items == []
        assert (await ReceiptRepository(session).list_page(limit=10)).items == []

    monkeypatch.setattr(run_records, "run_start_row", run_start_row)
    after = await client.post(
        "/plans/sequential", json={"owner": "tester", "calls": [read_call("d")]}
    )
    assert after.status_code == 200  # the writer goes on


@pytest.mark.parametrize("kind", ["sequential", "parallel"])
async def test_the_end_of_a_read_plan_joins_its_receipts_while_its_start_is_being_written(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # The start's transaction is taken and held in flight; the calls settle meanwhile.
    # The end must still share the receipts' transaction: one commit to wait for, not two.
    runtime = app.state.runtime
    writer = runtime.writer
    in_flight = asyncio.Event()
    released = asyncio.Event()
    # The batch goes to the database, whichever way, only when released.
    backend = writer.backend
    write = backend.write

    async def held_write(batch: Any) -> Any:
        in_flight.set()
        await released.wait()
        return await write(batch)

    monkeypatch.setattr(backend, "write", held_write)
    end_run_with = writer.end_run_with
    joined: list[bool] = []

    def spied(pending: Any, values: Any, answer: Any = None) -> Any:
        future = end_run_with(pending, values, answer)
        joined.append(future is not None)
        return future

    monkeypatch.setattr(writer, "end_run_with", spied)
    calls = [read_call("a"), read_call("b"), read_call("c")]
    body: dict[str, Any] = {"owner": "tester", "calls": calls}
    if kind == "parallel":  # each lane's end in its own task; the plan's, one turn later
        lanes = [{"item_key": call["call_key"], "calls": [call]} for call in calls]
        body = {"owner": "tester", "max_concurrency": 3, "lanes": lanes}
    try:
        answer = asyncio.create_task(client.post(f"/plans/{kind}", json=body))
        await wait_for(lambda: in_flight.is_set() and bool(joined), every_s=0)
    finally:
        released.set()
    response = await answer

    assert response.status_code == 200
    assert joined == [True]
    run, receipts = await stored(app, response.json()["plan_id"])
    assert run is not None
    assert (run.status, len(receipts)) == ("succeeded", 3)
