"""`requires` over HTTP: rejected in preflight (422, a pointer at each call), held at dispatch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.engine import requires_tools
from tests.support.app import AppFactory

MODULE = "tests.engine.requires_tools"
AFTER_FETCH = "it requires a successful 'fetch' call"
ONCE = "it may run at most 1 time(s) per run"


def _tool(function: str, **options: Any) -> dict[str, Any]:
    return {
        "callable": f"{MODULE}:{function}",
        "description": f"{function}, for the requires tests.",
        "input_schema": {},
        "output_schema": {},
        **options,
    }


TOOLS = {
    "fetch": _tool("fetch"),
    "publish": _tool("publish", requires={"after": ["fetch"]}),
    "once": _tool("publish", requires={"max_per_run": 1}),
    "router": _tool("dispatch_each"),
}


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    runner = {"allowed_tools": list(TOOLS), "max_calls": 16, "tool_timeout_s": 10}
    return make_app.settings({"subagents": {"app": {"tools": TOOLS, "runner_defaults": runner}}})


@pytest.fixture(autouse=True)
def _fresh_runs() -> Iterator[None]:
    requires_tools.RAN.clear()
    yield
    requires_tools.RAN.clear()


def calls(*tools: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"call_key": f"c{index}", "tool": name, "args": args}
        for index, (name, args) in enumerate(tools)
    ]


def route(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"calls": [{"tool": name, "args": args} for name, args in calls]}


def errors(response: httpx.Response) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return [(e["pointer"], e["message"]) for e in response.json()["errors"]]


async def test_a_sequential_call_before_its_requirement_is_rejected(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/plans/sequential",
        json={"owner": "app", "calls": calls(("publish", {}), ("fetch", {}), ("publish", {}))},
    )

    assert errors(response) == [
        (
            "/calls/0/tool",
            f"tool 'publish' may not run here: {AFTER_FETCH} before it in the sequence",
        )
    ]
    assert response.json()["type"] == "urn:toolloop:problem:plan-rejected"
    assert requires_tools.RAN == []


async def test_a_lane_needs_its_requirement_in_the_same_lane(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/plans/parallel",
        json={
            "owner": "app",
            "max_concurrency": 2,
            "lanes": [
                {"item_key": "a", "calls": calls(("fetch", {}), ("publish", {}))},
                {"item_key": "b", "calls": calls(("publish", {}))},
            ],
        },
    )

    assert errors(response) == [
        (
            "/lanes/1/calls/0/tool",
            f"tool 'publish' may not run here: {AFTER_FETCH} before it in its lane",
        )
    ]
    assert requires_tools.RAN == []


async def test_max_per_run_counts_the_calls_of_every_lane(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/plans/parallel",
        json={
            "owner": "app",
            "max_concurrency": 2,
            "lanes": [
                {"item_key": "a", "calls": calls(("once", {}))},
                {"item_key": "b", "calls": calls(("fetch", {}), ("once", {}))},
                {"item_key": "c", "calls": calls(("once", {}))},
            ],
        },
    )

    assert errors(response) == [
        ("/lanes/1/calls/1/tool", f"tool 'once' may not run here: {ONCE}"),
        ("/lanes/2/calls/0/tool", f"tool 'once' may not run here: {ONCE}"),
    ]


async def test_a_dispatch_after_a_failed_required_call_is_refused(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/plans/sequential",
        json={
            "owner": "app",
            "calls": calls(("router", route(("fetch", {"ok": False}), ("publish", {})))),
        },
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["receipts"][0]["output"]["results"] == [
        "failed",
        f"rejected: dispatch to 'publish' rejected: {AFTER_FETCH} earlier in this run",
    ]
    assert [child["tool"] for child in body["dispatched"]] == ["fetch"]
    assert requires_tools.RAN == ["fetch"]


async def test_a_lanes_dispatch_sees_only_its_own_lanes_successes(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/plans/parallel",
        json={
            "owner": "app",
            "max_concurrency": 1,
            "lanes": [
                {"item_key": "a", "calls": calls(("fetch", {}))},
                {"item_key": "b", "calls": calls(("router", route(("publish", {}))))},
                {
                    "item_key": "c",
                    "calls": calls(("fetch", {}), ("router", route(("publish", {})))),
                },
            ],
        },
    )

    assert response.status_code == 200, response.text
    lanes = response.json()["lanes"]
    assert lanes[1]["receipts"][0]["output"]["results"] == [
        f"rejected: dispatch to 'publish' rejected: {AFTER_FETCH} earlier in its lane"
    ]
    assert lanes[2]["receipts"][1]["output"]["results"] == ["succeeded"]


async def test_a_plan_call_past_max_per_run_at_dispatch_is_skipped_and_stored(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/plans/sequential",
        json={"owner": "app", "calls": calls(("router", route(("once", {}))), ("once", {}))},
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "failed"
    skipped = body["receipts"][1]
    assert skipped["status"] == "skipped"
    assert skipped["error"]["kind"] == "requires"
    assert skipped["error"]["message"] == f"not started: {ONCE}"
    stored = await client.get(f"/runs/{body['plan_id']}/receipts")
    assert stored.status_code == 200, stored.text
    by_key = {item["call_key"]: item for item in stored.json()["items"]}
    assert by_key["c1"]["status"] == "skipped"
    assert by_key["c1"]["error"]["kind"] == "requires"
    assert requires_tools.RAN == ["publish"]
