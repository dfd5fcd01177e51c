from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from tests.api.test_reads_seed import T0, page_through, receipt_row, seed_receipts, seed_run

PLAN = {
    "owner": "text-worker",
    "calls": [
        {"call_key": "n", "tool": "normalize_text", "args": {"text": "  a  b "}},
        {"call_key": "w", "tool": "word_count", "args": {"text": "a b c"}},
    ],
}


async def test_a_plan_run_reads_back_with_timings_and_counts(client: httpx.AsyncClient) -> None:
    plan = (await client.post("/plans/sequential", json=PLAN)).json()

    response = await client.get(f"/runs/{plan['plan_id']}")

    assert response.status_code == 200
    run = response.json()
    assert {key: run[key] for key in ("run_id", "kind", "owner", "status", "caller")} == {
        "run_id": plan["plan_id"],
        "kind": "sequential",
        "owner": "text-worker",
        "status": "succeeded",
        "caller": None,
    }
    assert run["contract_hash"] == plan["contract_hash"]
    assert run["call_count"] == 2
    assert run["receipt_count"] == 2
    assert run["receipt_counts"] == {
        "succeeded": 2,
        "failed": 0,
        "timed_out": 0,
        "skipped": 0,
        "denied": 0,
    }
    assert run["outcome"] is None
    assert run["finished_at"] >= run["started_at"]
    assert run["duration_ms"] >= 0
    assert run["created_at"].endswith("+00:00")


async def test_counts_group_every_receipt_status(app: FastAPI, client: httpx.AsyncClient) -> None:
    await seed_run(app, "mixed", status="failed")
    statuses = ["succeeded", "succeeded", "failed", "skipped", "skipped", "skipped", "timed_out"]
    await seed_receipts(
        app, [receipt_row("mixed", seq, status=status) for seq, status in enumerate(statuses)]
    )

    run = (await client.get("/runs/mixed")).json()

    assert run["receipt_counts"] == {
        "succeeded": 2,
        "failed": 1,
        "timed_out": 1,
        "skipped": 3,
        "denied": 0,
    }
    assert run["receipt_count"] == 7
    assert run["status"] == "failed"
    assert run["duration_ms"] == 250


async def test_a_router_run_shows_its_outcome(app: FastAPI, client: httpx.AsyncClient) -> None:
    outcome = {"stopped_by": "", "text": "done", "turns": 2}
    await seed_run(app, "routed", kind="router", status="done", outcome=outcome)

    run = (await client.get("/runs/routed")).json()

    assert (run["kind"], run["status"], run["outcome"]) == ("router", "done", outcome)


async def test_a_running_run_has_no_end_yet(app: FastAPI, client: httpx.AsyncClient) -> None:
    await seed_run(app, "busy", status="running")

    run = (await client.get("/runs/busy")).json()

    assert (run["status"], run["finished_at"], run["duration_ms"]) == ("running", None, None)


async def test_an_unknown_run_is_404_problem(client: httpx.AsyncClient) -> None:
    for path in ("/runs/nope", "/runs/nope/receipts", "/runs/nope/audit"):
        response = await client.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["status"] == 404


async def _seed_run_grid(app: FastAPI) -> None:
    """Twelve runs; several share a creation instant."""
    grid: list[dict[str, Any]] = [
        {"owner": "text-worker", "kind": "sequential", "status": "succeeded", "caller": "a"},
        {"owner": "text-worker", "kind": "parallel", "status": "failed", "caller": "b"},
        {"owner": "other", "kind": "router", "status": "done", "caller": "a"},
        {"owner": "other", "kind": "sequential", "status": "interrupted", "caller": None},
    ]
    for number in range(12):
        await seed_run(
            app,
            f"run-{number:02d}",
            created_at=T0 + timedelta(seconds=number // 3),
            **grid[number % 4],
        )


async def test_runs_page_newest_first_and_each_exactly_once(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await _seed_run_grid(app)

    for limit in (1, 2, 5, 12, 500):
        items = await page_through(client, "/runs", limit=limit)
        assert [item["run_id"] for item in items] == [f"run-{n:02d}" for n in range(11, -1, -1)]


async def test_runs_filters(app: FastAPI, client: httpx.AsyncClient) -> None:
    await _seed_run_grid(app)

    async def ids(**params: Any) -> list[str]:
        items = await page_through(client, "/runs", limit=2, params=params)
        return [item["run_id"] for item in items]

    assert await ids(owner="other") == ["run-11", "run-10", "run-07", "run-06", "run-03", "run-02"]
    assert await ids(status="failed") == ["run-09", "run-05", "run-01"]
    assert await ids(kind="router") == ["run-10", "run-06", "run-02"]
    assert await ids(caller="b") == ["run-09", "run-05", "run-01"]
    assert await ids(kind="sequential", owner="text-worker") == ["run-08", "run-04", "run-00"]
    assert await ids(owner="nobody") == []
    since, until = (T0 + timedelta(seconds=1)).isoformat(), (T0 + timedelta(seconds=3)).isoformat()
    assert await ids(since=since, until=until) == [f"run-{n:02d}" for n in range(8, 2, -1)]
    assert await ids(since=since) == [f"run-{n:02d}" for n in range(11, 2, -1)]
    assert await ids(until=until) == [f"run-{n:02d}" for n in range(8, -1, -1)]
    assert await ids(since=(T0 + timedelta(hours=1)).isoformat()) == []


async def test_since_and_until_accept_any_utc_offset(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await seed_run(app, "early", created_at=T0)
    await seed_run(app, "late", created_at=T0 + timedelta(hours=2))

    # 10:00+01:00 is 09:00Z, T0 itself: `since` is inclusive.
    response = await client.get("/runs", params={"since": "2026-03-01T10:00:00+01:00"})
    zulu = await client.get("/runs", params={"until": "2026-03-01T10:00:00Z"})

    assert [item["run_id"] for item in response.json()["items"]] == ["late", "early"]
    assert [item["run_id"] for item in zulu.json()["items"]] == ["early"]


async def test_a_run_listing_item_is_a_summary(app: FastAPI, client: httpx.AsyncClient) -> None:
    await seed_run(app, "one", caller="a")

    (item,) = (await client.get("/runs")).json()["items"]

    assert item == {
        "run_id": "one",
        "kind": "sequential",
        "owner": "text-worker",
        "status": "succeeded",
        "caller": "a",
        "contract_hash": app.state.runtime.contract.hash,
        "parallel_batch_id": None,
        "trace_id": None,
        "call_count": 0,
        "created_at": "2026-03-01T09:00:00+00:00",
        "started_at": "2026-03-01T09:00:00+00:00",
        "finished_at": "2026-03-01T09:00:00.250000+00:00",
        "duration_ms": 250.0,
    }
