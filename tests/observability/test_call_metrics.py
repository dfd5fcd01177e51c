"""Call metrics follow what the engine did: statuses, errors, retries, timeouts, cache."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.observability import obs_tools
from tests.observability.conftest import EXAMPLE_REGISTRY, serving
from tests.observability.metrics_reading import value
from tests.observability.registry import OWNER


def _call(tool: str, key: str = "1", **args: Any) -> dict[str, Any]:
    return {"call_key": key, "tool": tool, "args": args}


async def _sequential(
    client: httpx.AsyncClient, *calls: dict[str, Any], owner: str = OWNER
) -> dict[str, Any]:
    response = await client.post("/plans/sequential", json={"owner": owner, "calls": list(calls)})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_calls_are_counted_by_tool_owner_and_status(client: httpx.AsyncClient) -> None:
    ok = value("toolloop_calls_total", tool="echo", owner=OWNER, status="succeeded")
    failed = value("toolloop_calls_total", tool="leak", owner=OWNER, status="failed")
    skipped = value("toolloop_calls_total", tool="echo", owner=OWNER, status="skipped")
    errors = value("toolloop_call_errors_total", tool="leak", kind="exception")
    durations = value("toolloop_call_duration_seconds_count", tool="echo")

    body = await _sequential(
        client,
        _call("echo", "a", text="x"),
        _call("leak", "b", text="y"),
        _call("echo", "c", text="z"),
    )

    assert [r["status"] for r in body["receipts"]] == ["succeeded", "failed", "skipped"]
    assert value("toolloop_calls_total", tool="echo", owner=OWNER, status="succeeded") == ok + 1
    assert value("toolloop_calls_total", tool="leak", owner=OWNER, status="failed") == failed + 1
    assert value("toolloop_calls_total", tool="echo", owner=OWNER, status="skipped") == skipped + 1
    assert value("toolloop_call_errors_total", tool="leak", kind="exception") == errors + 1
    # Skipped calls do not feed the duration histogram.
    assert value("toolloop_call_duration_seconds_count", tool="echo") == durations + 1


async def test_retries_are_counted_per_tool(client: httpx.AsyncClient) -> None:
    retries = value("toolloop_call_retries_total", tool="flaky")

    body = await _sequential(client, _call("flaky", token=uuid.uuid4().hex, failures=2))

    assert body["receipts"][0]["attempts"] == 3
    assert value("toolloop_call_retries_total", tool="flaky") == retries + 2


async def test_timeouts_are_counted_per_tool(client: httpx.AsyncClient) -> None:
    timeouts = value("toolloop_call_timeouts_total", tool="hang")
    timed_out = value("toolloop_calls_total", tool="hang", owner=OWNER, status="timed_out")

    body = await _sequential(client, _call("hang", text="x"))

    assert body["receipts"][0]["status"] == "timed_out"
    assert value("toolloop_call_timeouts_total", tool="hang") == timeouts + 1
    assert value("toolloop_calls_total", tool="hang", owner=OWNER, status="timed_out") == (
        timed_out + 1
    )


async def test_in_flight_rises_while_a_call_runs_and_falls_after(
    client: httpx.AsyncClient,
) -> None:
    obs_tools.entered, obs_tools.release = asyncio.Event(), asyncio.Event()
    before = value("toolloop_calls_in_flight", tool="hold")
    waits = value("toolloop_call_admission_wait_seconds_count", tool="hold")

    plan = asyncio.create_task(_sequential(client, _call("hold", text="x")))
    entered = asyncio.create_task(obs_tools.entered.wait())
    await asyncio.wait((plan, entered), return_when=asyncio.FIRST_COMPLETED)
    assert not plan.done(), plan.result()
    during = value("toolloop_calls_in_flight", tool="hold")
    scraped = (await client.get("/metrics")).text
    obs_tools.release.set()
    await plan

    assert during == before + 1
    assert f'toolloop_calls_in_flight{{tool="hold"}} {during}' in scraped
    assert value("toolloop_calls_in_flight", tool="hold") == before
    assert value("toolloop_call_admission_wait_seconds_count", tool="hold") == waits + 1


@pytest.fixture
async def example_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        registries=[EXAMPLE_REGISTRY], database_url=f"sqlite+aiosqlite:///{tmp_path / 'ex.db'}"
    )
    async with serving(settings) as client:
        yield client


async def test_cache_hits_and_misses_of_the_example_normalize_text(
    example_client: httpx.AsyncClient,
) -> None:
    hits = value("toolloop_cache_hits_total", tool="normalize_text")
    misses = value("toolloop_cache_misses_total", tool="normalize_text")
    text = f"  Cache   {uuid.uuid4().hex} "
    call = _call("normalize_text", text=text)

    first = await _sequential(example_client, call, owner="text-worker")
    second = await _sequential(example_client, call, owner="text-worker")

    assert [first["receipts"][0]["cache_hit"], second["receipts"][0]["cache_hit"]] == [False, True]
    assert value("toolloop_cache_misses_total", tool="normalize_text") == misses + 1
    assert value("toolloop_cache_hits_total", tool="normalize_text") == hits + 1


async def test_receipt_commits_are_timed(client: httpx.AsyncClient) -> None:
    commits = value("toolloop_receipt_write_seconds_count")
    receipts = value("toolloop_receipt_write_batch_size_sum")

    await _sequential(client, _call("echo", "a", text="x"), _call("echo", "b", text="y"))

    assert value("toolloop_receipt_write_seconds_count") > commits
    assert value("toolloop_receipt_write_batch_size_sum") == receipts + 2
