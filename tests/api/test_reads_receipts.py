from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from app.api.schemas.plans import ReceiptOut
from app.api.schemas.runs import StoredReceiptOut
from tests.api.test_reads_seed import T0, page_through, receipt_row, seed_receipts, seed_run

SECRET = "Bearer abcdefghijklmnopqrstuvwxyz0123456789"


def _lanes(count: int) -> dict[str, Any]:
    return {
        "owner": "text-worker",
        "max_concurrency": 4,
        "lanes": [
            {
                "item_key": f"item-{number:02d}",
                "calls": [
                    {"call_key": "n", "tool": "normalize_text", "args": {"text": f" t{number} "}},
                    {"call_key": "w", "tool": "word_count", "args": {"text": f"a {number}"}},
                ],
            }
            for number in range(count)
        ],
    }


def _plan_receipts(plan: dict[str, Any]) -> list[dict[str, Any]]:
    if "lanes" in plan:
        return [receipt for lane in plan["lanes"] for receipt in lane["receipts"]]
    return list(plan["receipts"])


async def test_a_run_s_receipts_come_in_input_order_as_stored(client: httpx.AsyncClient) -> None:
    plan = (await client.post("/plans/parallel", json=_lanes(6))).json()
    answered = _plan_receipts(plan)

    stored = await page_through(client, f"/runs/{plan['plan_id']}/receipts", limit=5)

    assert [r["receipt_id"] for r in stored] == [r["receipt_id"] for r in answered]
    assert [r["seq"] for r in stored] == list(range(12))
    for mine, kept in zip(answered, stored, strict=True):
        assert {key: kept[key] for key in mine} == mine
        assert (kept["run_id"], kept["owner"]) == (plan["plan_id"], "text-worker")
        assert kept["item_key"] == mine["item_key"]


async def test_a_stored_receipt_has_every_plan_receipt_field(client: httpx.AsyncClient) -> None:
    sequential = {"owner": "text-worker", "calls": _lanes(1)["lanes"][0]["calls"]}
    plan = (await client.post("/plans/sequential", json=sequential)).json()
    (item, _) = (await client.get(f"/runs/{plan['plan_id']}/receipts")).json()["items"]

    assert set(ReceiptOut.model_fields) <= set(StoredReceiptOut.model_fields)
    assert set(item) == set(StoredReceiptOut.model_fields)
    assert set(item) >= {"run_id", "owner", "seq"}
    StoredReceiptOut.model_validate(item)


async def test_the_stored_copy_is_redacted_everywhere(client: httpx.AsyncClient) -> None:
    plan = (
        await client.post(
            "/plans/sequential",
            json={
                "owner": "text-worker",
                "calls": [{"call_key": "s", "tool": "normalize_text", "args": {"text": SECRET}}],
            },
        )
    ).json()
    assert plan["receipts"][0]["output"] == {"text": SECRET}
    run_id = plan["plan_id"]

    by_run = (await client.get(f"/runs/{run_id}/receipts")).json()["items"]
    across = (await client.get("/receipts", params={"run_id": run_id})).json()["items"]
    audit = await client.get(f"/runs/{run_id}/audit")
    run = await client.get(f"/runs/{run_id}")

    assert by_run[0]["output"] == {"text": "Bearer [REDACTED]"}
    assert across[0]["output"] == {"text": "Bearer [REDACTED]"}
    for response_text in (audit.text, run.text):
        assert "abcdefghijklmnopqrstuvwxyz0123456789" not in response_text


async def test_cache_hit_filter(client: httpx.AsyncClient) -> None:
    call = {"call_key": "1", "tool": "normalize_text", "args": {"text": "Cache  me"}}
    first = (
        await client.post("/plans/sequential", json={"owner": "text-worker", "calls": [call]})
    ).json()
    second = (
        await client.post("/plans/sequential", json={"owner": "text-worker", "calls": [call]})
    ).json()
    assert second["receipts"][0]["cache_hit"] is True

    hits = (await client.get("/receipts", params={"cache_hit": "true"})).json()["items"]
    misses = (await client.get("/receipts", params={"cache_hit": "false"})).json()["items"]

    assert [r["receipt_id"] for r in hits] == [second["receipts"][0]["receipt_id"]]
    assert hits[0]["cache_source_receipt_id"] == first["receipts"][0]["receipt_id"]
    assert [r["receipt_id"] for r in misses] == [first["receipts"][0]["receipt_id"]]


async def test_receipts_from_one_group_commit_page_exactly_once(
    client: httpx.AsyncClient,
) -> None:
    plan = (await client.post("/plans/parallel", json=_lanes(20))).json()
    expected = {r["receipt_id"] for r in _plan_receipts(plan)}

    for limit in (1, 3, 7):
        items = await page_through(client, "/receipts", limit=limit)
        ids = [item["receipt_id"] for item in items]
        assert len(ids) == len(set(ids)) == len(expected)
        assert set(ids) == expected
        order = [(item["created_at"], item["receipt_id"]) for item in items]
        assert order == sorted(order, reverse=True)


async def _seed_receipt_grid(app: FastAPI) -> list[dict[str, Any]]:
    """75 receipts over three runs, created at only five distinct instants."""
    rows: list[dict[str, Any]] = []
    for run_number, owner in enumerate(("text-worker", "text-worker", "other")):
        run_id = f"run-{run_number}"
        await seed_run(app, run_id, owner=owner)
        rows.extend(
            receipt_row(
                run_id,
                seq,
                owner=owner,
                tool="word_count" if seq % 3 == 0 else "normalize_text",
                status="failed" if seq % 5 == 0 else "succeeded",
                item_key=f"item-{seq % 4}",
                cache_hit=seq % 7 == 0,
                created_at=T0 + timedelta(seconds=seq % 5),
            )
            for seq in range(25)
        )
    await seed_receipts(app, rows)
    return sorted(rows, key=lambda row: (row["created_at"], row["id"]), reverse=True)


async def test_receipts_page_newest_first_with_ties_broken_by_id(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    rows = await _seed_receipt_grid(app)

    for limit in (1, 4, 7, 75, 500):
        items = await page_through(client, "/receipts", limit=limit)
        assert [item["receipt_id"] for item in items] == [row["id"] for row in rows]


async def test_receipt_filters(app: FastAPI, client: httpx.AsyncClient) -> None:
    rows = await _seed_receipt_grid(app)

    async def check(params: dict[str, Any], keep: Any) -> None:
        items = await page_through(client, "/receipts", limit=6, params=params)
        expected = [row["id"] for row in rows if keep(row)]
        assert expected, params
        assert [item["receipt_id"] for item in items] == expected, params

    await check({"run_id": "run-1"}, lambda row: row["run_id"] == "run-1")
    await check({"tool": "word_count"}, lambda row: row["tool"] == "word_count")
    await check({"owner": "other"}, lambda row: row["owner"] == "other")
    await check({"status": "failed"}, lambda row: row["status"] == "failed")
    await check({"item_key": "item-2"}, lambda row: row["item_key"] == "item-2")
    await check({"cache_hit": "true"}, lambda row: row["cache_hit"])
    await check({"cache_hit": "false"}, lambda row: not row["cache_hit"])
    since, until = T0 + timedelta(seconds=1), T0 + timedelta(seconds=3)
    await check({"since": since.isoformat()}, lambda row: row["created_at"] >= since)
    await check({"until": until.isoformat()}, lambda row: row["created_at"] < until)
    await check(
        {"since": since.isoformat(), "until": until.isoformat(), "tool": "normalize_text"},
        lambda row: since <= row["created_at"] < until and row["tool"] == "normalize_text",
    )
    await check(
        {"owner": "text-worker", "status": "succeeded", "item_key": "item-1"},
        lambda row: (
            row["owner"] == "text-worker"
            and row["status"] == "succeeded"
            and row["item_key"] == "item-1"
        ),
    )
    nothing = await client.get("/receipts", params={"status": "denied"})
    assert nothing.json() == {"items": [], "next_cursor": None}


async def test_a_run_s_receipts_page_by_seq(app: FastAPI, client: httpx.AsyncClient) -> None:
    await seed_run(app, "long")
    # Stored in reverse, all at one instant: the order still comes from `seq`.
    await seed_receipts(app, [receipt_row("long", seq, created_at=T0) for seq in range(9, -1, -1)])

    for limit in (1, 3, 10, 1000):
        items = await page_through(client, "/runs/long/receipts", limit=limit)
        assert [item["seq"] for item in items] == list(range(10))

    default = (await client.get("/runs/long/receipts")).json()
    assert len(default["items"]) == 10
    assert default["next_cursor"] is None
