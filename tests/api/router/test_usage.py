"""The usage ledger over HTTP: every model request's tokens and cost, `GET /usage` in
hour and day buckets, the `budget:max_cost` stop, and who may read what; on SQLite
and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.auth import create_key
from app.settings import Settings
from app.store.repositories.usage import UsageRepository
from tests.router.http_support import router_settings, run_body
from tests.support.app import running
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text, profiles_yaml
from toolloop.client import AsyncClient

# 0.002 and 0.010 per million tokens: 2 and 10 nano-units a token.
PRICES = """\
    prices:
      input_per_million: "0.002"
      output_per_million: 0.01
"""
PRICED = {"router_profile": "router-priced", "final_profile": "final-priced"}


def priced_profiles(base_url: str) -> str:
    priced = "".join(
        f"  {name}-priced:\n    provider: openai\n    base_url: {base_url}/v1\n"
        f"    model: scripted-{name}\n    timeout_s: 10\n{PRICES}"
        for name in ("router", "final")
    )
    return profiles_yaml(base_url) + priced


def usage_settings(database_url: str, tmp_path: Path, base_url: str, **extra: Any) -> Settings:
    profiles = tmp_path / "priced-profiles.yml"
    profiles.write_text(priced_profiles(base_url))
    return router_settings(database_url, tmp_path, base_url, profiles=profiles, **extra)


@pytest.fixture
def settings(database_url: str, tmp_path: Path, model_url: str) -> Settings:
    return usage_settings(database_url, tmp_path, model_url)


def _priced_run(model: FakeLLM) -> None:
    model.script(
        openai_calls(("c1", "lookup", {"term": "x"}), prompt_tokens=100, completion_tokens=20),
        openai_text("enough", prompt_tokens=150, completion_tokens=5),
        openai_text("answer", prompt_tokens=50, completion_tokens=30),
    )


async def test_every_model_request_is_in_the_ledger_with_its_cost(
    client: httpx.AsyncClient, model: FakeLLM
) -> None:
    _priced_run(model)
    response = await client.post("/router/runs", json=run_body(**PRICED))
    assert response.status_code == 200, response.text
    assert response.json()["state"]["cost"] == "0.000001150"

    hourly = await client.get("/usage", params={"bucket": "hour"})
    daily = await client.get("/usage")

    assert hourly.status_code == 200, hourly.text
    items = hourly.json()["items"]
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    assert [(i["bucket"], i["owner"], i["caller"], i["profile"], i["requests"]) for i in items] == [
        ("hour", "agent", None, "final-priced", 1),
        ("hour", "agent", None, "router-priced", 2),
    ]
    assert {i["start"] for i in items} <= {
        hour.isoformat(),
        (hour - timedelta(hours=1)).isoformat(),
    }
    router_row = items[1]
    assert (router_row["input_tokens"], router_row["output_tokens"]) == (250, 25)
    assert router_row["cost"] == "0.000000750"
    assert items[0]["cost"] == "0.000000400"
    assert hourly.json()["next_cursor"] is None
    assert [i["bucket"] for i in daily.json()["items"]] == ["day", "day"]
    assert daily.json()["items"][0]["start"].endswith("T00:00:00+00:00")

    metrics = (await client.get("/metrics")).text
    assert 'toolloop_llm_cost_total{profile="router-priced"}' in metrics
    assert 'toolloop_llm_tokens_total{direction="input",profile="final-priced"}' in metrics


async def test_a_profile_without_prices_is_in_the_ledger_without_a_cost(
    client: httpx.AsyncClient, model: FakeLLM
) -> None:
    model.script(openai_text("enough"), openai_text("answer"))
    assert (await client.post("/router/runs", json=run_body())).status_code == 200

    items = (await client.get("/usage", params={"profile": "router-small"})).json()["items"]

    assert [(i["requests"], i["input_tokens"], i["cost"]) for i in items] == [(1, 10, None)]


async def test_usage_sums_in_hour_and_day_buckets_and_pages(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    day = datetime(2026, 3, 1, tzinfo=UTC)
    rows = [
        (day + timedelta(hours=9, minutes=5), "a", 3),
        (day + timedelta(hours=9, minutes=55), "a", 4),
        (day + timedelta(hours=10, minutes=1), "a", 5),
        (day + timedelta(hours=10, minutes=2), "b", 6),
        (day + timedelta(days=1, hours=1), "a", 7),
    ]
    async with app.state.runtime.sessions.begin() as session:
        for at, owner, tokens in rows:
            hour = at.replace(minute=0)
            await UsageRepository(session).add(
                {
                    "at": at,
                    "hour": hour,
                    "day": hour.replace(hour=0),
                    "run_id": None,
                    "owner": owner,
                    "caller": "",
                    "profile": "p",
                    "role": "router",
                    "input_tokens": tokens,
                    "output_tokens": 1,
                    "cost_nanos": tokens * 1000,
                }
            )
    window = {"since": day.isoformat(), "until": (day + timedelta(days=2)).isoformat()}

    hourly = (await client.get("/usage", params={"bucket": "hour", **window})).json()
    daily = (await client.get("/usage", params={"bucket": "day", **window})).json()
    first_day = await client.get("/usage", params={"until": (day + timedelta(days=1)).isoformat()})

    assert [(i["start"][11:13], i["owner"], i["input_tokens"]) for i in hourly["items"]] == [
        ("01", "a", 7),
        ("10", "a", 5),
        ("10", "b", 6),
        ("09", "a", 7),
    ]
    assert [(i["start"][:10], i["owner"], i["requests"], i["cost"]) for i in daily["items"]] == [
        ("2026-03-02", "a", 1, "0.000007000"),
        ("2026-03-01", "a", 3, "0.000012000"),
        ("2026-03-01", "b", 1, "0.000006000"),
    ]
    assert [i["owner"] for i in first_day.json()["items"]] == ["a", "b"]

    seen: list[tuple[str, str]] = []
    cursor = None
    while True:
        params = {"bucket": "hour", "limit": "1", **window}
        if cursor is not None:
            params["cursor"] = cursor
        page = (await client.get("/usage", params=params)).json()
        seen.extend((i["start"], i["owner"]) for i in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [(i["start"], i["owner"]) for i in hourly["items"]]

    one = (await client.get("/usage", params={"bucket": "hour", "limit": "1", **window})).json()
    wrong = await client.get("/usage", params={"bucket": "day", "cursor": one["next_cursor"]})
    assert wrong.status_code == 422
    assert wrong.json()["errors"][0]["pointer"] == "/cursor"


async def test_bad_usage_queries_are_422_naming_each_problem(client: httpx.AsyncClient) -> None:
    unknown = await client.get("/usage", params={"sort": "cost", "bucket": "hour"})
    invalid = await client.get("/usage", params={"bucket": "week", "since": "yesterday"})

    for response in (unknown, invalid):
        assert response.status_code == 422
        assert response.headers["content-type"].startswith("application/problem+json")
    assert [e["pointer"] for e in unknown.json()["errors"]] == ["/sort"]
    assert [e["pointer"] for e in invalid.json()["errors"]] == ["/bucket", "/since"]


async def test_max_cost_stops_the_run(client: httpx.AsyncClient, model: FakeLLM) -> None:
    _priced_run(model)

    response = await client.post(
        "/router/runs", json=run_body(**PRICED, budgets={"max_cost": "0.0000004"})
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["stopped_by"], body["text"]) == (
        "incomplete",
        "budget:max_cost",
        "",
    )
    assert body["state"]["cost"] == "0.000000400"
    usage = (await client.get("/usage")).json()["items"]
    assert [(i["profile"], i["requests"]) for i in usage] == [("router-priced", 1)]


async def test_max_cost_without_prices_is_a_422(client: httpx.AsyncClient, model: FakeLLM) -> None:
    unpriced = await client.post("/router/runs", json=run_body(budgets={"max_cost": "1"}))
    malformed = await client.post(
        "/router/runs", json=run_body(**PRICED, budgets={"max_cost": "1e-3"})
    )
    as_number = await client.post(
        "/router/runs", json=run_body(**PRICED, budgets={"max_cost": 0.5})
    )

    assert unpriced.status_code == 422
    assert [(e["pointer"], e["message"]) for e in unpriced.json()["errors"]] == [
        (
            "/budgets/max_cost",
            "profile 'final-local' declares no prices; a cost budget needs prices on the "
            "router and final profiles",
        ),
        (
            "/budgets/max_cost",
            "profile 'router-small' declares no prices; a cost budget needs prices on the "
            "router and final profiles",
        ),
    ]
    for refused in (malformed, as_number):
        assert refused.status_code == 422
        assert [e["pointer"] for e in refused.json()["errors"]] == ["/budgets/max_cost"]
    assert model.requests == []


async def test_usage_needs_runs_read_and_shows_a_key_its_own(
    sqlite_url: str, tmp_path: Path, model: FakeLLM, model_url: str
) -> None:
    keys = tmp_path / "keys.yml"
    alice = create_key(keys, "alice", ["router:run", "runs:read"])
    bob = create_key(keys, "bob", ["router:run", "runs:read"])
    operator = create_key(keys, "operator", ["runs:read:all"])
    metrics_only = create_key(keys, "scraper", ["metrics:read"])
    settings = usage_settings(sqlite_url, tmp_path, model_url, api_keys=keys)

    async with running(settings) as (_, client):
        for key in (alice, bob):
            model.script(openai_text("enough"), openai_text("answer"))
            started = await client.post(
                "/router/runs", json=run_body(), headers={"authorization": f"Bearer {key}"}
            )
            assert started.status_code == 200, started.text

        def read(key: str, **params: str) -> Any:
            return client.get("/usage", params=params, headers={"authorization": f"Bearer {key}"})

        anonymous = await client.get("/usage")
        scraper = await read(metrics_only)
        by_alice = await read(alice)
        alice_asks_for_bob = await read(alice, caller="bob")
        by_operator = await read(operator)

    assert anonymous.status_code == 401
    assert scraper.status_code == 403
    assert {i["caller"] for i in by_alice.json()["items"]} == {"alice"}
    assert alice_asks_for_bob.json()["items"] == []
    assert {i["caller"] for i in by_operator.json()["items"]} == {"alice", "bob"}


async def test_the_client_reads_usage_page_by_page_with_exact_costs(
    app: FastAPI, model: FakeLLM
) -> None:
    _priced_run(model)
    transport = httpx.ASGITransport(app=app)
    async with AsyncClient("http://127.0.0.1", transport=transport) as client:
        await client.run_router(run_body(**PRICED))
        rows = [row async for row in client.usage(bucket="hour", limit=1)]

    assert [(row.profile, row.requests, row.cost) for row in rows] == [
        ("final-priced", 1, Decimal("0.0000004")),
        ("router-priced", 2, Decimal("0.00000075")),
    ]
    assert all(row.bucket == "hour" and row.caller is None for row in rows)
