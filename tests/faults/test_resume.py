"""`POST /runs/{run_id}/resume` after a shutdown interrupted runs, in process, on both databases.

A shutdown leaves `cancelled` and `skipped` receipts; a resume replaces them in
place and runs only the calls that had not succeeded (counted by the tools).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.auth import create_key
from app.settings import Settings
from app.store.models import Receipt as StoredReceipt
from app.store.repositories.receipts import ReceiptRepository
from tests.api.run_support import parse_events, run_ended
from tests.faults import fault_tools
from tests.faults.registry import hold, parallel, sequential, step, write_registry
from tests.faults.service import service
from tests.support.app import stored_receipts, stored_run
from tests.support.waiting import wait_for

ASYNC = {"Prefer": "respond-async"}
# Replaced receipts stay verifiable (`tests.support.chain_check`).
pytestmark = pytest.mark.usefixtures("chains_intact")


@pytest.fixture
def settings(database_url: str, registry: Path) -> Settings:
    return Settings(registries=[registry], database_url=database_url)


def keys_of(run_id: str, *seqs: int) -> list[str]:
    return [f"{run_id}:{seq}" for seq in seqs]


async def start(client: httpx.AsyncClient, kind: str, plan: dict[str, Any]) -> str:
    response = await client.post(f"/plans/{kind}", json=plan, headers=ASYNC)
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


async def audit(client: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/runs/{run_id}/audit", params={"limit": 500})
    assert response.status_code == 200
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_a_sequential_run_resumes_from_its_first_call_that_did_not_succeed(
    settings: Settings,
) -> None:
    plan = sequential(step("a"), step("b"), hold("c"), step("d"))
    async with service(settings) as (app, client):
        run_id = await start(client, "sequential", plan)
        await wait_for(lambda: len(fault_tools.calls) == 3)
        await wait_for(lambda: _count(app, run_id, 2))
    assert fault_tools.calls == keys_of(run_id, 0, 1, 2)

    async with service(settings) as (app, client):
        assert (await stored_run(app, run_id)).status == "interrupted"
        before = await stored_receipts(app, run_id)
        assert [(r.call_key, r.status) for r in before] == [
            ("a", "succeeded"),
            ("b", "succeeded"),
            ("c", "failed"),
            ("d", "skipped"),
        ]
        other = sequential(step("a"), step("b"), hold("c"), step("e"))
        mismatch = await client.post(f"/runs/{run_id}/resume", json=other)
        assert mismatch.status_code == 422
        assert mismatch.headers["content-type"] == "application/problem+json"
        assert mismatch.json()["type"] == "urn:toolloop:problem:request-mismatch"

        fault_tools.release("c")
        # The same plan in another key order, with a default spelled out.
        resent = {"context": {}, "calls": plan["calls"], "owner": "faults"}
        response = await client.post(f"/runs/{run_id}/resume", json=resent)

        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "succeeded"
        assert [r["status"] for r in body["receipts"]] == ["succeeded"] * 4
        assert [r["receipt_id"] for r in body["receipts"][:2]] == [r.id for r in before[:2]]
        assert fault_tools.calls == keys_of(run_id, 0, 1, 2, 2, 3)
        after = await stored_receipts(app, run_id)
        assert [r.id for r in after] == [r["receipt_id"] for r in body["receipts"]]
        assert [r.idempotency_key for r in after] == keys_of(run_id, 0, 1, 2, 3)
        assert (await stored_run(app, run_id)).status == "succeeded"

        events = await audit(client, run_id)
        superseded = [e for e in events if e["kind"] == "receipt.superseded"]
        assert [(e["detail"]["receipt_id"], e["detail"]["status"]) for e in superseded] == [
            (before[2].id, "failed"),
            (before[3].id, "skipped"),
        ]
        assert [e["detail"]["superseded_by"] for e in superseded] == [r.id for r in after[2:]]
        assert superseded[0]["detail"]["error"]["kind"] == "cancelled"
        resumed = [e for e in events if e["kind"] == "run.resumed"]
        assert [e["detail"]["kept"] for e in resumed] == [2]

        again = await client.post(f"/runs/{run_id}/resume", json=plan)
        assert again.status_code == 409
        assert again.json()["type"] == "urn:toolloop:problem:run-not-resumable"


async def test_each_lane_resumes_from_its_own_first_call_that_did_not_succeed(
    settings: Settings,
) -> None:
    # One lane at a time: lane b holds, lane c is never taken before the shutdown.
    plan = parallel(
        {
            "a": [step("a1"), step("a2")],
            "b": [step("b1"), hold("b2"), step("b3")],
            "c": [step("c1")],
        },
        max_concurrency=1,
    )
    async with service(settings) as (app, client):
        run_id = await start(client, "parallel", plan)
        await wait_for(lambda: len(fault_tools.calls) == 4)
        await wait_for(lambda: _count(app, run_id, 3))

    async with service(settings) as (app, client):
        before = await stored_receipts(app, run_id)
        assert [(r.call_key, r.status) for r in before] == [
            ("a1", "succeeded"),
            ("a2", "succeeded"),
            ("b1", "succeeded"),
            ("b2", "failed"),
            ("b3", "skipped"),
            ("c1", "skipped"),
        ]
        fault_tools.release("b2")
        accepted = await client.post(f"/runs/{run_id}/resume", json=plan, headers=ASYNC)
        assert accepted.status_code == 202
        assert accepted.json() == {"run_id": run_id, "status": "running"}
        await wait_for(lambda: run_ended(app, run_id))

        run = await stored_run(app, run_id)
        assert (run.status, run.call_count) == ("succeeded", 6)
        assert fault_tools.calls[4:] == keys_of(run_id, 3, 4, 5)
        after = await stored_receipts(app, run_id)
        assert [r.status for r in after] == ["succeeded"] * 6
        assert [r.id for r in after[:3]] == [r.id for r in before[:3]]
        assert {r.parallel_batch_id for r in after} == {before[0].parallel_batch_id}
        response = await client.get(f"/runs/{run_id}/receipts")
        assert [r["seq"] for r in response.json()["items"]] == list(range(6))


async def test_only_an_interrupted_plan_run_resumes(settings: Settings) -> None:
    plan = sequential(step("a"))
    async with service(settings) as (_, client):
        done = await client.post("/plans/sequential", json=plan)
        assert done.json()["status"] == "succeeded"
        finished = await client.post(f"/runs/{done.json()['plan_id']}/resume", json=plan)
        missing = await client.post("/runs/no-such-run/resume", json=plan)
        not_json = await client.post(
            f"/runs/{done.json()['plan_id']}/resume",
            content=b"{",
            headers={"content-type": "application/json"},
        )

    assert finished.status_code == 409
    assert "succeeded" in finished.json()["detail"]
    assert missing.status_code == 404
    assert not_json.status_code == 422


async def test_a_run_admitted_under_another_contract_does_not_resume(
    database_url: str, registry: Path, tmp_path: Path
) -> None:
    plan = sequential(hold("a"))
    async with service(Settings(registries=[registry], database_url=database_url)) as (_, c):
        run_id = await start(c, "sequential", plan)
        await wait_for(lambda: len(fault_tools.calls) == 1)

    changed = write_registry(tmp_path / "changed", "Sleep a while, then answer the label.")
    async with service(Settings(registries=[changed], database_url=database_url)) as (_, c):
        response = await c.post(f"/runs/{run_id}/resume", json=plan)
    assert response.status_code == 409
    assert response.json()["type"] == "urn:toolloop:problem:contract-changed"


async def test_only_the_creator_or_an_admin_resumes(
    database_url: str, registry: Path, tmp_path: Path
) -> None:
    scopes = {
        "alice": ["plans:execute", "runs:read"],
        "bob": ["plans:execute", "runs:read"],
        "ops": ["runs:read:all"],
        "root": ["admin"],
    }
    keys = {name: create_key(tmp_path / "keys.yml", name, s) for name, s in scopes.items()}
    settings = Settings(
        registries=[registry], database_url=database_url, api_keys=tmp_path / "keys.yml"
    )

    def as_(name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {keys[name]}"}

    plan = sequential(hold("a"))
    async with service(settings) as (_, client):
        accepted = await client.post(
            "/plans/sequential", json=plan, headers={**ASYNC, **as_("alice")}
        )
        run_id = accepted.json()["run_id"]
        await wait_for(lambda: len(fault_tools.calls) == 1)

    fault_tools.release("a")
    async with service(settings) as (_, client):
        path = f"/runs/{run_id}/resume"
        assert (await client.post(path, json=plan, headers=as_("bob"))).status_code == 404
        assert (await client.post(path, json=plan, headers=as_("ops"))).status_code == 403
        assert (await client.post(path, json=plan)).status_code == 401
        response = await client.post(path, json=plan, headers=as_("root"))
    assert response.status_code == 200
    assert response.json()["status"] == "succeeded"


async def _count(app: Any, run_id: str, at_least: int) -> bool:
    return len(await stored_receipts(app, run_id)) >= at_least


def _signal_after_receipts_are_read(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set once a run's stored receipts have been read (the stream's replay)."""
    read = asyncio.Event()
    list_for_run = ReceiptRepository.list_for_run

    async def list_then_signal(
        self: ReceiptRepository, run_id: str, **options: Any
    ) -> list[StoredReceipt]:
        rows = await list_for_run(self, run_id, **options)
        read.set()
        return rows

    monkeypatch.setattr(ReceiptRepository, "list_for_run", list_then_signal)
    return read


async def test_the_events_stream_of_a_resumed_run_sends_the_replacing_receipts(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = sequential(step("a"), hold("b"), step("c"))
    async with service(settings) as (_, client):
        run_id = await start(client, "sequential", plan)
        await wait_for(lambda: len(fault_tools.calls) == 2)

    async with service(settings) as (app, client):
        before = await stored_receipts(app, run_id)
        accepted = await client.post(f"/runs/{run_id}/resume", json=plan, headers=ASYNC)
        assert accepted.status_code == 202
        await wait_for(lambda: len(fault_tools.calls) == 3)
        replayed = _signal_after_receipts_are_read(monkeypatch)
        stream = asyncio.create_task(client.get(f"/runs/{run_id}/events"))
        # "b" ends only once the stream has read what was stored: on a slow host
        # the resumed run could otherwise end first, and the stream would replay
        # only the replacing receipts (also right, but not what is tested here).
        await asyncio.wait_for(replayed.wait(), timeout=30)
        fault_tools.release("b")
        events = parse_events((await stream).text)
        after = await stored_receipts(app, run_id)

    sent = [(data["call_key"], data["receipt_id"]) for kind, data in events if kind == "receipt"]
    assert sent == [(r.call_key, r.id) for r in before] + [(r.call_key, r.id) for r in after[1:]]
    assert events[-1] == ("end", {"run_id": run_id, "status": "succeeded"})


async def test_a_resume_retried_with_its_idempotency_key_replays_and_runs_nothing(
    settings: Settings,
) -> None:
    plan = sequential(hold("a"))
    async with service(settings) as (_, client):
        run_id = await start(client, "sequential", plan)
        await wait_for(lambda: len(fault_tools.calls) == 1)

    fault_tools.release("a")
    async with service(settings) as (_, client):
        key = {"Idempotency-Key": "resume-1"}
        first = await client.post(f"/runs/{run_id}/resume", json=plan, headers=key)
        again = await client.post(f"/runs/{run_id}/resume", json=plan, headers=key)

    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["receipts"][0]["receipt_id"] == first.json()["receipts"][0]["receipt_id"]
    assert fault_tools.calls == keys_of(run_id, 0, 0)
