from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.settings import Settings
from app.store.journal.writer import GroupCommitWriter
from app.store.repositories.audit import AuditRepository
from app.store.repositories.runs import RunRepository
from tests.api import plan_tools
from tests.api.plan_registry import REGISTRY
from tests.support.app import AppFactory, stored_receipts

# Every run these tests make leaves its hash chain intact (`tests.support.chain_check`).
pytestmark = pytest.mark.usefixtures("chains_intact")


@pytest.fixture(autouse=True)
def _fresh_tool_counters() -> Iterator[None]:
    plan_tools.reset()
    yield
    plan_tools.reset()


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(
        REGISTRY,
        max_body_bytes=64 * 1024,
        max_lanes=50,
        max_calls_per_lane=5,
        max_sequential_calls=10,
        max_concurrency_cap=20,
    )


def probe(call_key: str, group: str, delay_s: float, tool: str = "probe") -> dict[str, Any]:
    return {
        "call_key": call_key,
        "tool": tool,
        "args": {"group": group, "label": call_key, "delay_s": delay_s},
    }


async def test_sequential_plan_runs_in_order_and_stores_every_receipt(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    response = await client.post(
        "/plans/sequential",
        json={
            "owner": "tester",
            "calls": [
                {"call_key": "b", "tool": "echo", "args": {"text": "one"}},
                {"call_key": "a", "tool": "echo", "args": {"text": "two"}},
            ],
            "context": {"trace_id": "t-1"},
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert body["kind"] == "sequential"
    assert body["status"] == "succeeded"
    assert body["contract_hash"] == app.state.runtime.contract.hash
    assert [r["call_key"] for r in body["receipts"]] == ["b", "a"]
    assert [r["output"] for r in body["receipts"]] == [{"text": "one"}, {"text": "two"}]
    assert all(r["plan_id"] == body["plan_id"] for r in body["receipts"])

    stored = await stored_receipts(app, body["plan_id"])
    assert [(r.seq, r.call_key, r.status) for r in stored] == [
        (0, "b", "succeeded"),
        (1, "a", "succeeded"),
    ]
    assert [r.id for r in stored] == [r["receipt_id"] for r in body["receipts"]]
    async with app.state.runtime.sessions() as session:
        run = await RunRepository(session).get(body["plan_id"])
    assert run is not None
    assert (run.kind, run.status, run.owner, run.call_count) == (
        "sequential",
        "succeeded",
        "tester",
        2,
    )
    assert run.finished_at is not None


async def test_a_failed_call_skips_the_rest_of_a_sequential_plan(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    response = await client.post(
        "/plans/sequential",
        json={
            "owner": "tester",
            "calls": [
                {"call_key": "1", "tool": "echo", "args": {"text": "x"}},
                {"call_key": "2", "tool": "explode", "args": {"text": "boom"}},
                {"call_key": "3", "tool": "echo", "args": {"text": "never"}},
            ],
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "failed"
    assert [r["status"] for r in body["receipts"]] == ["succeeded", "failed", "skipped"]
    assert body["receipts"][1]["error"]["kind"] == "exception"
    assert plan_tools.calls["echo"] == 1
    stored = await stored_receipts(app, body["plan_id"])
    assert [r.status for r in stored] == ["succeeded", "failed", "skipped"]


PREFLIGHT_CASES = [
    pytest.param(
        {"owner": "nobody", "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "x"}}]},
        {"/owner"},
        id="unknown-owner",
    ),
    pytest.param(
        {"owner": "tester", "calls": [{"call_key": "1", "tool": "ghost", "args": {}}]},
        {"/calls/0/tool"},
        id="unknown-tool",
    ),
    pytest.param(
        {"owner": "tester", "calls": [{"call_key": "1", "tool": "not_allowed", "args": {}}]},
        {"/calls/0/tool"},
        id="tool-not-allowed",
    ),
    pytest.param(
        {
            "owner": "tester",
            "calls": [
                {"call_key": "1", "tool": "echo", "args": {"text": "ok"}},
                {"call_key": "2", "tool": "echo", "args": {"text": 7}},
            ],
        },
        {"/calls/1/args/text"},
        id="argument-type",
    ),
    pytest.param(
        {"owner": "tester", "calls": [{"call_key": "1", "tool": "echo", "args": {}}]},
        {"/calls/0/args"},
        id="missing-argument",
    ),
    pytest.param(
        {
            "owner": "tester",
            "calls": [
                {"call_key": "same", "tool": "echo", "args": {"text": "a"}},
                {"call_key": "same", "tool": "echo", "args": {"text": "b"}},
            ],
        },
        {"/calls/1/call_key"},
        id="duplicate-call-key",
    ),
    pytest.param(
        {
            "owner": "tester",
            "calls": [
                {"call_key": str(i), "tool": "echo", "args": {"text": "a"}} for i in range(11)
            ],
        },
        {"/calls"},
        id="too-many-calls",
    ),
    pytest.param({"owner": "tester", "calls": []}, {"/calls"}, id="no-calls"),
    pytest.param(
        {"owner": "tester", "calls": [{"call_key": "1", "tool": "echo"}]},
        {"/calls/0"},
        id="neither-args-nor-payload",
    ),
    pytest.param(
        {
            "owner": "nobody",
            "calls": [
                {"call_key": "1", "tool": "ghost", "args": {}},
                {"call_key": "1", "tool": "echo", "args": {"text": 1}},
            ],
            "deadline_s": -1,
        },
        {"/owner", "/calls/0/tool", "/calls/1/call_key", "/calls/1/args/text", "/deadline_s"},
        id="every-problem-at-once",
    ),
]


@pytest.mark.parametrize(("plan", "pointers"), PREFLIGHT_CASES)
async def test_preflight_rejects_the_whole_sequential_plan(
    app: FastAPI, client: httpx.AsyncClient, plan: dict[str, Any], pointers: set[str]
) -> None:
    response = await client.post("/plans/sequential", json=plan)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert {error["pointer"] for error in body["errors"]} >= pointers
    assert all(error["message"] for error in body["errors"])
    assert sum(plan_tools.calls.values()) == 0
    await app.state.runtime.writer.flush()
    async with app.state.runtime.sessions() as session:
        rejected = await AuditRepository(session).list_for_run(None)
    assert [event.kind for event in rejected] == ["plan.rejected"]


PARALLEL_PREFLIGHT_CASES = [
    pytest.param({"max_concurrency": 0}, {"/max_concurrency"}, id="zero-concurrency"),
    pytest.param({"max_concurrency": 21}, {"/max_concurrency"}, id="above-cap"),
    pytest.param(
        {"lanes": [{"item_key": "a", "calls": [probe("1", "g", 0)]}] * 2},
        {"/lanes/1/item_key"},
        id="duplicate-item-key",
    ),
    pytest.param(
        {"lanes": [{"item_key": "a", "calls": [probe("1", "g", 0), probe("1", "g", 0)]}]},
        {"/lanes/0/calls/1/call_key"},
        id="duplicate-call-key-in-lane",
    ),
    pytest.param(
        {"lanes": [{"item_key": str(i), "calls": [probe("1", "g", 0)]} for i in range(51)]},
        {"/lanes"},
        id="too-many-lanes",
    ),
    pytest.param(
        {"lanes": [{"item_key": "a", "calls": [probe(str(i), "g", 0) for i in range(6)]}]},
        {"/lanes/0/calls"},
        id="too-many-calls-in-lane",
    ),
    pytest.param(
        {
            "lanes": [
                {"item_key": "a", "calls": [probe("1", "g", 0)]},
                {"item_key": "b", "calls": [{"call_key": "1", "tool": "ghost", "args": {}}]},
                {"item_key": "c", "calls": [probe("1", "g", 99)]},
            ]
        },
        {"/lanes/1/calls/0/tool", "/lanes/2/calls/0/args/delay_s"},
        id="bad-lanes-reject-good-ones",
    ),
]


@pytest.mark.parametrize(("change", "pointers"), PARALLEL_PREFLIGHT_CASES)
async def test_preflight_rejects_the_whole_parallel_plan_before_fan_out(
    client: httpx.AsyncClient, change: dict[str, Any], pointers: set[str]
) -> None:
    plan = {
        "owner": "tester",
        "max_concurrency": 4,
        "lanes": [{"item_key": "ok", "calls": [probe("1", "g", 0)]}],
        **change,
    }
    response = await client.post("/plans/parallel", json=plan)
    assert response.status_code == 422
    assert {error["pointer"] for error in response.json()["errors"]} >= pointers
    assert sum(plan_tools.calls.values()) == 0


async def test_parallel_results_keep_input_order_whatever_finishes_first(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    rng = random.Random(7)
    lanes = [
        {
            "item_key": f"item-{i}",
            "calls": [probe(f"{i}.{j}", "order", rng.uniform(0, 0.03)) for j in range(2)],
        }
        for i in range(12)
    ]
    response = await client.post(
        "/plans/parallel", json={"owner": "tester", "max_concurrency": 12, "lanes": lanes}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "succeeded"
    expected = [(lane["item_key"], [c["call_key"] for c in lane["calls"]]) for lane in lanes]
    assert [
        (lane["item_key"], [r["call_key"] for r in lane["receipts"]]) for lane in body["lanes"]
    ] == expected
    finished = list(plan_tools.finish_order)
    assert finished != sorted(finished, key=lambda label: [int(p) for p in label.split(".")])
    for lane in body["lanes"]:
        for receipt in lane["receipts"]:
            assert receipt["parallel_batch_id"] == body["parallel_batch_id"]
            assert receipt["item_key"] == lane["item_key"]
    stored = await stored_receipts(app, body["plan_id"])
    assert [(r.item_key, r.call_key) for r in stored] == [
        (item, key) for item, keys in expected for key in keys
    ]
    assert [r.seq for r in stored] == list(range(len(stored)))


async def test_calls_inside_a_lane_stay_serial_and_a_failure_skips_only_its_lane(
    client: httpx.AsyncClient,
) -> None:
    lanes = [
        {
            "item_key": "bad",
            "calls": [
                {"call_key": "1", "tool": "explode", "args": {"text": "x"}},
                {"call_key": "2", "tool": "echo", "args": {"text": "never"}},
            ],
        },
        {"item_key": "good", "calls": [probe("1", "lane", 0.01), probe("2", "lane", 0.01)]},
    ]
    response = await client.post(
        "/plans/parallel", json={"owner": "tester", "max_concurrency": 2, "lanes": lanes}
    )
    body = response.json()
    assert body["status"] == "failed"
    assert [lane["status"] for lane in body["lanes"]] == ["failed", "succeeded"]
    assert [r["status"] for r in body["lanes"][0]["receipts"]] == ["failed", "skipped"]
    assert [r["status"] for r in body["lanes"][1]["receipts"]] == ["succeeded", "succeeded"]
    assert plan_tools.peak["lane"] == 1
    assert plan_tools.calls["echo"] == 0


async def test_plan_max_concurrency_bounds_the_lanes_in_flight(client: httpx.AsyncClient) -> None:
    lanes = [{"item_key": str(i), "calls": [probe("1", "plan", 0.02)]} for i in range(20)]
    response = await client.post(
        "/plans/parallel", json={"owner": "tester", "max_concurrency": 3, "lanes": lanes}
    )
    assert response.status_code == 200
    assert plan_tools.calls["plan"] == 20
    assert plan_tools.peak["plan"] == 3


async def test_tool_max_concurrency_holds_across_concurrent_plans(
    client: httpx.AsyncClient,
) -> None:
    def plan(prefix: str) -> dict[str, Any]:
        return {
            "owner": "tester",
            "max_concurrency": 10,
            "lanes": [
                {"item_key": f"{prefix}{i}", "calls": [probe("1", "tool", 0.02, "limited_probe")]}
                for i in range(10)
            ],
        }

    responses = await asyncio.gather(
        client.post("/plans/parallel", json=plan("a")),
        client.post("/plans/parallel", json=plan("b")),
    )
    assert [r.status_code for r in responses] == [200, 200]
    assert plan_tools.calls["tool"] == 20
    assert plan_tools.peak["tool"] == 2


async def test_stored_receipts_are_redacted_while_the_caller_gets_the_real_output(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    secret = "Bearer abcdefghijklmnopqrstuvwxyz0123456789"
    response = await client.post(
        "/plans/sequential",
        json={
            "owner": "tester",
            "calls": [{"call_key": "1", "tool": "echo", "args": {"text": secret}}],
        },
    )
    body = response.json()
    assert body["receipts"][0]["output"] == {"text": secret}
    stored = await stored_receipts(app, body["plan_id"])
    assert "abcdefghijklmnopqrstuvwxyz0123456789" not in str(stored[0].output)
    assert "[REDACTED]" in stored[0].output["text"]


async def test_the_body_size_limit_is_413(client: httpx.AsyncClient) -> None:
    huge = {
        "owner": "tester",
        "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "x" * 70_000}}],
    }
    response = await client.post("/plans/sequential", json=huge)
    assert response.status_code == 413
    assert response.json()["status"] == 413
    assert sum(plan_tools.calls.values()) == 0


async def test_nesting_deeper_than_the_limit_is_422(client: httpx.AsyncClient) -> None:
    nested: Any = "leaf"
    for _ in range(70):
        nested = {"n": nested}
    plan = {"owner": "tester", "calls": [{"call_key": "1", "tool": "echo", "args": nested}]}
    response = await client.post("/plans/sequential", json=plan)
    assert response.status_code == 422
    assert "nest" in response.json()["detail"]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"{not json", id="syntax"),
        pytest.param(b'{"owner": "tester", "calls": [], "surprise": 1}', id="unknown-field"),
        pytest.param(b'{"owner": "\\ud800", "calls": []}', id="lone-surrogate"),
        pytest.param(b"[]", id="not-an-object"),
        pytest.param(b"", id="empty"),
    ],
)
async def test_malformed_bodies_are_422_problems(client: httpx.AsyncClient, raw: bytes) -> None:
    response = await client.post(
        "/plans/sequential", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["errors"]


async def test_keys_are_opaque_strings(client: httpx.AsyncClient) -> None:
    keys = ["ünï/cødé ~0", "a" * 256, "🙂" * 256, "1", " "]
    plan = {
        "owner": "tester",
        "max_concurrency": 4,
        "lanes": [
            {"item_key": key, "calls": [{"call_key": key, "tool": "echo", "args": {"text": key}}]}
            for key in keys
        ],
    }
    response = await client.post("/plans/parallel", json=plan)
    assert response.status_code == 200
    assert [lane["item_key"] for lane in response.json()["lanes"]] == keys


async def test_numeric_keys_are_refused_not_coerced(client: httpx.AsyncClient) -> None:
    plan = {"owner": "tester", "calls": [{"call_key": 1, "tool": "echo", "args": {"text": "x"}}]}
    response = await client.post("/plans/sequential", json=plan)
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "/calls/0/call_key"


@pytest.mark.parametrize("kind", ["sequential", "parallel"])
async def test_a_plan_s_end_commits_in_the_transaction_of_its_receipts(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    end_run_with = GroupCommitWriter.end_run_with
    joined: list[tuple[tuple[asyncio.Future[None], ...], asyncio.Future[None] | None]] = []

    def spy(
        self: GroupCommitWriter,
        pending: Sequence[asyncio.Future[None]],
        values: dict[str, Any],
        answer: dict[str, Any] | None = None,
    ) -> asyncio.Future[None] | None:
        future = end_run_with(self, pending, values, answer)
        joined.append((tuple(pending), future))
        return future

    monkeypatch.setattr(GroupCommitWriter, "end_run_with", spy)
    call = {"call_key": "a", "tool": "echo", "args": {"text": "one"}}
    body: dict[str, Any] = (
        {"owner": "tester", "calls": [call]}
        if kind == "sequential"
        else {
            "owner": "tester",
            "max_concurrency": 2,
            "lanes": [{"item_key": "i", "calls": [call]}],
        }
    )

    response = await client.post(f"/plans/{kind}", json=body)

    assert response.status_code == 200
    [(pending, future)] = joined
    assert future is pending[-1]  # one transaction for the receipt and the end
    async with app.state.runtime.sessions() as session:
        run = await RunRepository(session).get(response.json()["plan_id"])
    assert run is not None
    assert (run.status, run.call_count) == ("succeeded", 1)
    assert run.finished_at is not None


async def test_a_plan_whose_end_cannot_join_its_receipts_is_ended_after_them(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(GroupCommitWriter, "end_run_with", lambda *_: None)

    response = await client.post(
        "/plans/sequential",
        json={
            "owner": "tester",
            "calls": [{"call_key": "a", "tool": "echo", "args": {"text": "x"}}],
        },
    )

    assert response.status_code == 200
    async with app.state.runtime.sessions() as session:
        run = await RunRepository(session).get(response.json()["plan_id"])
    assert run is not None
    assert (run.status, run.call_count) == ("succeeded", 1)
