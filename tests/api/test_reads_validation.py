from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import httpx
import pytest
from fastapi import FastAPI

from app.api.pagination import keyset_cursor, position_cursor
from app.api.schemas.runs import ReceiptStatus, RunKind, RunStatus
from app.service.runs.reads import RECEIPT_STATUSES, Keyset
from app.store.models import RUN_KINDS, RUN_STATUSES
from tests.api.test_reads_seed import page_through, receipt_row, seed_receipts, seed_run

LISTINGS = ["/runs", "/receipts", "/runs/r/receipts", "/runs/r/audit"]


async def _problem(response: httpx.Response) -> list[str]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == 422
    return [error["pointer"] for error in body["errors"]]


def test_the_documented_vocabularies_match_the_store() -> None:
    assert set(get_args(RunKind)) == set(RUN_KINDS)
    assert set(get_args(RunStatus)) == set(RUN_STATUSES)
    assert set(get_args(ReceiptStatus)) == set(RECEIPT_STATUSES)


@pytest.mark.parametrize("path", LISTINGS)
async def test_malformed_cursors_are_422_naming_the_cursor(
    app: FastAPI, client: httpx.AsyncClient, path: str
) -> None:
    await seed_run(app, "r")
    keyset = Keyset(datetime(2026, 1, 1, tzinfo=UTC), "x")
    foreign = [keyset_cursor("elsewhere", keyset), position_cursor("elsewhere", 1)]
    for cursor in ["garbage!", "e30", base64.urlsafe_b64encode(b"null").decode(), *foreign]:
        response = await client.get(path, params={"cursor": cursor})
        assert await _problem(response) == ["/cursor"], cursor


async def test_a_cursor_from_one_listing_is_refused_by_another(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    for number in range(3):
        await seed_run(app, f"run-{number}")
    cursor = (await client.get("/runs", params={"limit": 1})).json()["next_cursor"]

    assert await _problem(await client.get("/receipts", params={"cursor": cursor})) == ["/cursor"]
    assert (await client.get("/runs", params={"cursor": cursor})).status_code == 200


async def test_a_cursor_past_every_row_is_an_empty_page(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await seed_run(app, "r")
    await seed_receipts(app, [receipt_row("r", 0)])
    cursors = {
        "/runs/r/receipts": position_cursor("run-receipts", 2**31 - 1),
        "/runs/r/audit": position_cursor("run-audit", 2**63 - 1),
        "/receipts": keyset_cursor("receipts", Keyset(datetime(1970, 1, 1, tzinfo=UTC), "a")),
    }
    for path, cursor in cursors.items():
        response = await client.get(path, params={"cursor": cursor})
        assert response.json() == {"items": [], "next_cursor": None}, path

    beyond_seq = position_cursor("run-receipts", 2**31)
    response = await client.get("/runs/r/receipts", params={"cursor": beyond_seq})
    assert await _problem(response) == ["/cursor"]


@pytest.mark.parametrize(
    ("path", "limit"),
    [
        ("/runs", 0),
        ("/runs", 501),
        ("/receipts", -1),
        ("/receipts", 501),
        ("/runs/r/receipts", 0),
        ("/runs/r/receipts", 1001),
        ("/runs/r/audit", 1001),
        ("/runs", "ten"),
    ],
)
async def test_limit_out_of_bounds_is_422(
    app: FastAPI, client: httpx.AsyncClient, path: str, limit: Any
) -> None:
    await seed_run(app, "r")

    assert await _problem(await client.get(path, params={"limit": limit})) == ["/limit"]


async def test_limit_bounds_are_inclusive(app: FastAPI, client: httpx.AsyncClient) -> None:
    await seed_run(app, "r")
    for path, limit in (("/runs", 500), ("/receipts", 1), ("/runs/r/audit", 1000)):
        assert (await client.get(path, params={"limit": limit})).status_code == 200, path


async def test_listings_default_to_50_newest_first(app: FastAPI, client: httpx.AsyncClient) -> None:
    await seed_run(app, "r")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    await seed_receipts(
        app, [receipt_row("r", seq, created_at=start + timedelta(seconds=seq)) for seq in range(51)]
    )

    body = (await client.get("/receipts")).json()

    assert [item["seq"] for item in body["items"]] == list(range(50, 0, -1))
    assert body["next_cursor"] is not None
    assert len(await page_through(client, "/receipts", limit=50)) == 51


@pytest.mark.parametrize("path", ["/runs", "/receipts"])
@pytest.mark.parametrize(
    "moment", ["2026-01-01T00:00:00", "2026-01-01", "soon", "0001-01-01T00:00:00+05:00"]
)
async def test_since_and_until_need_an_aware_time(
    client: httpx.AsyncClient, path: str, moment: str
) -> None:
    response = await client.get(path, params={"since": moment, "until": moment})

    assert await _problem(response) == ["/since", "/until"]


async def test_vocabularies_are_checked(client: httpx.AsyncClient) -> None:
    runs = await client.get("/runs", params={"status": "happy", "kind": "batch"})
    receipts = await client.get("/receipts", params={"status": "running", "cache_hit": "maybe"})

    assert await _problem(runs) == ["/status", "/kind"]
    assert await _problem(receipts) == ["/status", "/cache_hit"]


async def test_text_filters_refuse_nul_and_huge_values(client: httpx.AsyncClient) -> None:
    for name in ("run_id", "tool", "owner", "item_key"):
        assert await _problem(await client.get("/receipts", params={name: "a\x00b"})) == [
            f"/{name}"
        ]
    for name in ("owner", "caller"):
        assert await _problem(await client.get("/runs", params={name: "x" * 5000})) == [f"/{name}"]
    assert await _problem(await client.get("/runs/a%00b")) == ["/run_id"]


async def test_the_openapi_document_names_every_read_operation(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]

    operations = {
        "/runs": "listRuns",
        "/runs/{run_id}": "getRun",
        "/runs/{run_id}/receipts": "listRunReceipts",
        "/runs/{run_id}/audit": "listRunAudit",
        "/receipts": "listReceipts",
    }
    for path, operation_id in operations.items():
        operation = paths[path]["get"]
        assert operation["operationId"] == operation_id
        assert {"200", "401", "403", "422"} <= set(operation["responses"])
        assert ("404" in operation["responses"]) == ("{run_id}" in path)


@pytest.mark.parametrize("path", [*LISTINGS, "/runs/r"])
async def test_an_unknown_query_parameter_is_422_naming_it(
    app: FastAPI, client: httpx.AsyncClient, path: str
) -> None:
    await seed_run(app, "r")
    known = {} if path == "/runs/r" else {"limit": "5"}

    response = await client.get(path, params={**known, "stauts": "failed", "a/b": "1"})

    assert await _problem(response) == ["/stauts", "/a~1b"]
    assert response.json()["errors"][0]["message"] == "unknown query parameter"
    assert (await client.get(path, params=known)).status_code == 200


@pytest.mark.parametrize("path", ["/runs", "/receipts"])
@pytest.mark.parametrize(
    "moment",
    [
        "1767225600",
        "2026-01-01 00:00:00Z",
        "2026-01-01T00:00Z",
        "2026-01-01T00:00:00+0500",
        "2026-01-01T00:00:00+05",
        "2026-W01-1T00:00:00Z",
    ],
)
async def test_since_and_until_are_rfc3339_only(
    client: httpx.AsyncClient, path: str, moment: str
) -> None:
    response = await client.get(path, params={"since": moment, "until": moment})

    assert await _problem(response) == ["/since", "/until"]
    assert "RFC 3339" in response.json()["errors"][0]["message"]


@pytest.mark.parametrize(
    "moment", ["2026-01-01T00:00:00Z", "2026-01-01t00:00:00.123456z", "2026-01-01T00:00:00-05:00"]
)
async def test_rfc3339_times_are_taken(client: httpx.AsyncClient, moment: str) -> None:
    response = await client.get("/receipts", params={"since": moment, "until": moment})

    assert response.status_code == 200, response.text
