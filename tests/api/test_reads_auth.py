from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.auth import create_key
from app.settings import Settings
from tests.api.conftest import EXAMPLE_REGISTRY
from tests.api.test_reads_seed import T0, page_through, receipt_row, seed_receipts, seed_run

PLAN = {
    "owner": "text-worker",
    "calls": [{"call_key": "1", "tool": "word_count", "args": {"text": "a b"}}],
}
SCOPES = {
    "alice": ["plans:execute", "runs:read"],
    "bob": ["plans:execute", "runs:read"],
    "ops": ["runs:read:all"],
    "root": ["admin"],
    "runner": ["plans:execute"],
}


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    return {
        name: create_key(tmp_path / "keys.yml", name, scopes) for name, scopes in SCOPES.items()
    }


@pytest.fixture
def settings(database_url: str, tmp_path: Path, keys: dict[str, str]) -> Settings:
    return Settings(
        registries=[EXAMPLE_REGISTRY], database_url=database_url, api_keys=tmp_path / "keys.yml"
    )


def as_(keys: dict[str, str], name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {keys[name]}"}


async def _run_as(client: httpx.AsyncClient, keys: dict[str, str], name: str) -> str:
    response = await client.post("/plans/sequential", json=PLAN, headers=as_(keys, name))
    assert response.status_code == 200
    run_id: str = response.json()["plan_id"]
    return run_id


def _paths(run_id: str) -> list[str]:
    return [
        "/runs",
        "/receipts",
        f"/runs/{run_id}",
        f"/runs/{run_id}/receipts",
        f"/runs/{run_id}/audit",
        f"/runs/{run_id}/proof",
    ]


async def test_reads_need_a_key_with_runs_read(
    client: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    run_id = await _run_as(client, keys, "runner")

    for path in _paths(run_id):
        anonymous = await client.get(path)
        assert anonymous.status_code == 401, path
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert (await client.get(path, headers=as_(keys, "runner"))).status_code == 403, path


async def test_someone_else_s_run_does_not_exist_for_you(
    app: FastAPI, client: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    mine = await _run_as(client, keys, "alice")
    theirs = await _run_as(client, keys, "bob")
    await seed_run(app, "open-mode-run", caller=None)

    for path in _paths(mine)[2:]:
        assert (await client.get(path, headers=as_(keys, "alice"))).status_code == 200, path
    unknown = await client.get("/runs/no-such-run", headers=as_(keys, "alice"))
    for run_id in (theirs, "open-mode-run"):
        for path in _paths(run_id)[2:]:
            response = await client.get(path, headers=as_(keys, "alice"))
            assert response.status_code == 404, path
            assert response.json() == unknown.json()


async def test_listings_keep_only_your_own_runs(
    client: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    mine = await _run_as(client, keys, "alice")
    theirs = await _run_as(client, keys, "bob")
    alice = as_(keys, "alice")

    async def run_ids(**params: Any) -> list[str]:
        body = (await client.get("/runs", params=params, headers=alice)).json()
        return [item["run_id"] for item in body["items"]]

    async def receipt_runs(**params: Any) -> list[str]:
        body = (await client.get("/receipts", params=params, headers=alice)).json()
        return [item["run_id"] for item in body["items"]]

    assert await run_ids() == [mine]
    assert await run_ids(caller="alice") == [mine]
    assert await run_ids(caller="bob") == []
    assert await receipt_runs() == [mine]
    assert await receipt_runs(run_id=theirs) == []


@pytest.mark.parametrize("operator", ["ops", "root"])
async def test_operators_see_every_run(
    client: httpx.AsyncClient, keys: dict[str, str], operator: str
) -> None:
    mine = await _run_as(client, keys, "alice")
    theirs = await _run_as(client, keys, "bob")
    headers = as_(keys, operator)

    runs = (await client.get("/runs", headers=headers)).json()["items"]
    bobs = (await client.get("/runs", params={"caller": "bob"}, headers=headers)).json()
    receipts = (await client.get("/receipts", headers=headers)).json()["items"]

    assert [run["run_id"] for run in runs] == [theirs, mine]
    assert [run["caller"] for run in runs] == ["bob", "alice"]
    assert [run["run_id"] for run in bobs["items"]] == [theirs]
    assert {receipt["run_id"] for receipt in receipts} == {mine, theirs}
    for path in _paths(theirs)[2:]:
        assert (await client.get(path, headers=headers)).status_code == 200, path


async def test_paging_a_filtered_listing_yields_each_own_row_once(
    app: FastAPI, client: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    callers = ["alice", "bob", None]
    rows: list[dict[str, Any]] = []
    for number in range(9):
        run_id = f"run-{number}"
        await seed_run(
            app, run_id, caller=callers[number % 3], created_at=T0 + timedelta(seconds=number // 2)
        )
        rows.extend(
            receipt_row(run_id, seq, created_at=T0 + timedelta(seconds=seq % 2)) for seq in range(5)
        )
    await seed_receipts(app, rows)
    alice = as_(keys, "alice")

    runs = await page_through(client, "/runs", limit=1, headers=alice)
    receipts = await page_through(client, "/receipts", limit=2, headers=alice)

    assert [run["run_id"] for run in runs] == ["run-6", "run-3", "run-0"]
    own = [row for row in rows if row["run_id"] in {"run-0", "run-3", "run-6"}]
    own.sort(key=lambda row: (row["created_at"], row["id"]), reverse=True)
    assert [receipt["receipt_id"] for receipt in receipts] == [row["id"] for row in own]
    everything = await page_through(client, "/receipts", limit=4, headers=as_(keys, "ops"))
    assert len(everything) == len({item["receipt_id"] for item in everything}) == 45
