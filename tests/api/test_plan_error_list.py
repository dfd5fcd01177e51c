"""A plan body of the wrong shape: one 422 with the shape's errors and preflight's, each once."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import update

from app.store.models import Run

SUMMARIZE_FIRST = (
    "tool 'summarize' may not run here: it requires a successful 'normalize_text' call "
    "before it in the sequence"
)


def errors(response: httpx.Response) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return [(e["pointer"], e["message"]) for e in response.json()["errors"]]


async def test_shape_errors_and_preflight_problems_come_in_one_list(
    client: httpx.AsyncClient,
) -> None:
    body: dict[str, Any] = {
        "owner": "text-worker",
        "calls": [
            {"call_key": "a", "tool": "summarize", "args": {"text": 5}, "extra": 1},
            {"tool": "nope", "args": {}},
            7,
            {"call_key": "a", "tool": "draft_note", "args": {"text": "x"}},
        ],
    }

    response = await client.post("/plans/sequential", json=body)

    found = errors(response)
    assert response.json()["type"] == "urn:toolloop:problem:invalid-request"
    assert found[:3] == [
        ("/calls/0/extra", "Extra inputs are not permitted"),
        ("/calls/1/call_key", "Field required"),
        ("/calls/2", "Input should be a valid dictionary or instance of CallIn"),
    ]
    assert set(found[3:]) == {
        ("/calls/0/args/text", "expected string, got integer"),
        ("/calls/1/tool", "unknown tool 'nope'"),
        ("/calls/3/call_key", "duplicate call_key 'a': at indices 0 and 3"),
        ("/calls/3/tool", "tool 'draft_note' belongs to owner 'publisher', not 'text-worker'"),
        ("/calls/0/tool", SUMMARIZE_FIRST),
    }
    assert len(found) == len(set(found)) == 8


async def test_a_parallel_body_reports_what_its_readable_lanes_show(
    client: httpx.AsyncClient,
) -> None:
    body = {
        "owner": 5,
        "max_concurrency": 0,
        "lanes": [
            {"item_key": "a", "calls": [{"call_key": "1", "tool": "summarize", "args": []}]},
            {"item_key": "a", "calls": "none"},
            3,
            {
                "item_key": "b",
                "calls": [
                    {"call_key": "1", "tool": "word_count", "args": {}},
                    {"call_key": "2", "tool": "summarize", "args": {"text": "x"}},
                ],
            },
        ],
    }

    found = errors(await client.post("/plans/parallel", json=body))

    assert set(found) == {
        ("/owner", "Input should be a valid string"),
        ("/lanes/0/calls/0/args", "Input should be a valid dictionary"),
        ("/lanes/1/calls", "Input should be a valid list"),
        ("/lanes/2", "Input should be a valid dictionary or instance of LaneIn"),
        ("/max_concurrency", "max_concurrency must be between 1 and 1000"),
        ("/lanes/1/item_key", "duplicate item_key 'a': at indices 0 and 1"),
        ("/lanes/3/calls/0/args", "missing required property 'text'"),
        (
            "/lanes/0/calls/0/tool",
            "tool 'summarize' may not run here: it requires a successful 'normalize_text' "
            "call before it in its lane",
        ),
        (
            "/lanes/3/calls/1/tool",
            "tool 'summarize' may not run here: it requires a successful 'normalize_text' "
            "call before it in its lane",
        ),
    }
    assert len(found) == len(set(found))


async def test_a_body_that_is_not_an_object_reports_its_shape_alone(
    client: httpx.AsyncClient,
) -> None:
    found = errors(await client.post("/plans/sequential", json=[{"tool": "nope"}]))

    assert found == [("", "Input should be a valid dictionary or instance of SequentialPlanIn")]


async def test_a_body_of_the_right_shape_is_still_answered_by_preflight_alone(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/plans/sequential",
        json={"owner": "text-worker", "calls": [{"call_key": "a", "tool": "nope", "args": {}}]},
    )

    assert response.json()["type"] == "urn:toolloop:problem:plan-rejected"
    assert errors(response) == [("/calls/0/tool", "unknown tool 'nope'")]


async def test_a_resume_body_of_the_wrong_shape_reports_preflight_problems_too(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = {"owner": "text-worker", "calls": [{"call_key": "a", "tool": "word_count", "args": {}}]}
    plan["calls"][0]["args"] = {"text": "x"}
    run_id = (await client.post("/plans/sequential", json=plan)).json()["plan_id"]
    async with app.state.runtime.sessions.begin() as session:  # as a crash leaves it
        await session.execute(update(Run).where(Run.id == run_id).values(status="interrupted"))
    misshapen = {
        "owner": "text-worker",
        "calls": [{"call_key": "a", "tool": "nope", "args": {}, "extra": 1}],
    }

    found = errors(await client.post(f"/runs/{run_id}/resume", json=misshapen))

    assert ("/calls/0/extra", "Extra inputs are not permitted") in found
    assert ("/calls/0/tool", "unknown tool 'nope'") in found
