"""The example App end to end: each engine feature its registry shows, over HTTP."""

from __future__ import annotations

import httpx


async def test_a_production_router_dispatches_to_registered_tools(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/plans/sequential",
        json={
            "owner": "text-worker",
            "calls": [{"call_key": "a", "tool": "analyze_text", "args": {"text": " Hi   there "}}],
        },
    )
    assert response.status_code == 200
    body = response.json()
    (parent,) = body["receipts"]
    assert parent["output"] == {"text": "Hi there", "words": 2}
    assert [(child["tool"], child["parent_receipt_id"]) for child in body["dispatched"]] == [
        ("normalize_text", parent["receipt_id"]),
        ("word_count", parent["receipt_id"]),
    ]


async def test_a_cacheable_tool_serves_the_second_identical_call_from_the_cache(
    client: httpx.AsyncClient,
) -> None:
    plan = {
        "owner": "text-worker",
        "calls": [{"call_key": "1", "tool": "word_count", "args": {"text": "one two"}}],
    }
    first = (await client.post("/plans/sequential", json=plan)).json()["receipts"][0]
    second = (await client.post("/plans/sequential", json=plan)).json()["receipts"][0]
    assert first["cache_hit"] is False
    assert second["cache_hit"] is True
    assert second["cache_source_receipt_id"] == first["receipt_id"]
    assert second["output"] == first["output"]


async def test_a_control_envelope_reports_the_producers_decision(
    client: httpx.AsyncClient,
) -> None:
    plan = {
        "owner": "text-worker",
        "calls": [
            {"call_key": "n", "tool": "normalize_text", "args": {"text": "x"}},
            {"call_key": "s", "tool": "summarize", "args": {"text": ""}},
        ],
    }
    body = (await client.post("/plans/sequential", json=plan)).json()
    summary = body["receipts"][1]
    assert summary["status"] == "succeeded"
    assert summary["control"]["decision"] == "stop"
    assert summary["control"]["business_status"] == "failed"


async def test_payload_is_projected_onto_a_closed_schema(client: httpx.AsyncClient) -> None:
    plan = {
        "owner": "text-worker",
        "calls": [
            {
                "call_key": "1",
                "tool": "word_count",
                "payload": {"text": "three small words", "graph_state": {"phase": 2}},
            }
        ],
    }
    response = await client.post("/plans/sequential", json=plan)
    assert response.status_code == 200
    assert response.json()["receipts"][0]["output"] == {"words": 3}
