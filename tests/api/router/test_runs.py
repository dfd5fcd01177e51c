"""POST /router/runs end to end: a real HTTP model server on 127.0.0.1, a real database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.settings import Settings
from app.store.repositories.runs import RunRepository
from tests.router.http_support import OUTCOME_KEYS, router_settings, run_body
from tests.support.app import running, stored_audit, stored_receipts, stored_run
from tests.support.fake_llm import FakeLLM, anthropic_text, openai_calls, openai_text, serve

# Every run these tests make leaves its hash chain intact (`tests.support.chain_check`).
pytestmark = pytest.mark.usefixtures("chains_intact")

EXAMPLE = Path(__file__).resolve().parents[3] / "registries"


async def test_a_run_end_to_end_is_persisted_with_every_decision(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"}), ("c2", "ghost", {})),
        openai_text("enough"),
        openai_text("ToolLoop runs tools."),
    )

    response = await client.post("/router/runs", json=run_body())

    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == OUTCOME_KEYS
    assert (body["status"], body["stopped_by"], body["text"]) == (
        "done",
        "",
        "ToolLoop runs tools.",
    )
    assert (body["attempts"], body["turns"], body["pending"]) == (1, 2, [])
    assert [r["tool"] for r in body["receipts"]] == ["lookup"]
    assert body["state"]["malformed"] == {"unknown_tool": 1}
    assert [r.url.path for r in model.requests] == [
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/chat/completions",
    ]
    assert model.body(0)["model"] == "scripted-router"
    assert model.body(2)["model"] == "scripted-final"

    run = await stored_run(app, body["run_id"])
    assert (run.kind, run.status, run.owner, run.call_count) == ("router", "done", "agent", 1)
    assert run.request_digest is not None
    assert run.request_digest.startswith("sha256:")
    assert run.outcome is not None
    assert run.outcome["status"] == "done"
    assert run.outcome["receipts"][0]["receipt_id"] == body["receipts"][0]["receipt_id"]
    assert run.finished_at is not None
    receipts = await stored_receipts(app, body["run_id"])
    assert [(r.tool, r.status, r.call_key) for r in receipts] == [("lookup", "succeeded", "t1c0")]
    kinds = [event.kind for event in await stored_audit(app, body["run_id"])]
    assert kinds[0] == "router.run_started"
    assert kinds[-1] == "router.run_finished"
    for kind in ("router.model_turn", "router.call_admitted", "router.call_rejected"):
        assert kind in kinds
    assert "call.finished" in kinds


async def test_a_finished_run_answers_200_whatever_its_status(
    client: httpx.AsyncClient, model: FakeLLM
) -> None:
    model.reply({"error": "down"}, status=503)
    model.reply({"error": "down"}, status=503)

    response = await client.post("/router/runs", json=run_body())

    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["stopped_by"]) == ("error", "llm_error")
    assert (body["text"], body["final"]) == ("", None)


async def test_transport_faults_are_retried(client: httpx.AsyncClient, model: FakeLLM) -> None:
    model.reply({"error": "busy"}, status=429, headers={"Retry-After": "0"})
    model.script(openai_text("fine"), openai_text("answer"))

    response = await client.post("/router/runs", json=run_body())

    assert response.json()["status"] == "done"
    assert len(model.requests) == 3


async def test_the_anthropic_final_profile_over_http(
    client: httpx.AsyncClient, model: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLLOOP_TEST_ANTHROPIC_KEY", "sk-ant-e2e-0123456789")
    model.script(openai_text("enough"), anthropic_text('{"answer": "yes"}'))

    response = await client.post(
        "/router/runs",
        json=run_body(
            final_profile="final-large",
            final_schema={"type": "object", "required": ["answer"]},
        ),
    )

    body = response.json()
    assert (body["status"], body["final"]) == ("done", {"answer": "yes"})
    final = model.requests[1]
    assert final.url.path == "/v1/messages"
    assert final.headers["x-api-key"] == "sk-ant-e2e-0123456789"
    assert model.body(1)["model"] == "scripted-claude"


async def test_missing_and_unknown_profiles_are_422(client: httpx.AsyncClient) -> None:
    body = run_body()
    del body["router_profile"]
    body["final_profile"] = "gpt-x"

    missing = await client.post("/router/runs", json=body)

    assert missing.status_code == 422
    assert missing.headers["content-type"] == "application/problem+json"
    assert [e["pointer"] for e in missing.json()["errors"]] == ["/router_profile"]

    unknown = await client.post("/router/runs", json=run_body(final_profile="gpt-x"))

    assert unknown.status_code == 422
    (error,) = unknown.json()["errors"]
    assert error["pointer"] == "/final_profile"
    assert error["message"].startswith("unknown model profile 'gpt-x' (defined: final-large")


async def test_budgets_and_allowlist_only_narrow(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    response = await client.post(
        "/router/runs",
        json=run_body(
            budgets={"max_calls": 7},
            allowed_tools=["lookup", "foreign"],
            guardrails=["ghost"],
            completion={"verify": "ghost", "max_attempts": 1},
        ),
    )

    assert response.status_code == 422
    problem = response.json()
    assert problem["type"] == "urn:toolloop:problem:invalid-request"
    assert {e["pointer"]: e["message"] for e in problem["errors"]} == {
        "/allowed_tools/1": "tool 'foreign' is not in the allowed_tools of 'agent'; "
        "allowed_tools may only narrow the owner's allowlist",
        "/budgets/max_calls": "7 exceeds the owner's max_calls (6); budgets may only narrow",
        "/guardrails/0": "unknown guardrail 'ghost'",
        "/completion/verify": "unknown verifier 'ghost' "
        "(defined: builtin:tools_succeeded, lookup_found, never_done, wrong_shape)",
    }
    assert model.requests == []
    async with app.state.runtime.sessions() as session:
        page = await RunRepository(session).list_page(limit=10)
    assert page.items == []


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        ({"completion": {"verify": "never_done"}}, "/completion/max_attempts"),
        ({"budgets": {"max_calls": 0}}, "/budgets/max_calls"),
        ({"budgets": {"deadline_s": "soon"}}, "/budgets/deadline_s"),
        ({"goal": ""}, "/goal"),
        ({"steps": [{"call_key": 1, "tool": "lookup", "args": {}}]}, "/steps/0/call_key"),
        ({"surprise": True}, "/surprise"),
    ],
)
async def test_malformed_requests_are_422_with_pointers(
    client: httpx.AsyncClient, change: dict[str, Any], pointer: str
) -> None:
    response = await client.post("/router/runs", json=run_body(**change))

    assert response.status_code == 422
    assert pointer in [e["pointer"] for e in response.json()["errors"]]


async def test_the_example_registry_and_sample_profiles_run_a_complete_router_run(
    database_url: str, tmp_path: Path, model: FakeLLM, model_url: str
) -> None:
    sample = (EXAMPLE / "profiles.example.yml").read_text()
    profiles = tmp_path / "profiles.yml"
    profiles.write_text(
        sample.replace("http://127.0.0.1:11434/v1", f"{model_url}/v1").replace(
            "https://api.anthropic.com", model_url
        )
    )
    settings = Settings(
        registries=[EXAMPLE / "example.yml"],
        database_url=database_url,
        profiles=profiles,
        llm_backoff_s=0.0,
    )
    model.script(
        openai_calls(("a", "normalize_text", {"text": "  Tool   Loop "})),
        openai_calls(("b", "slow_lookup", {"term": "toolloop", "delay_s": 0})),
        openai_text("done"),
        openai_text("ToolLoop: A governed execution service for registered tools."),
    )

    async with running(settings) as (app, client):
        response = await client.post(
            "/router/runs",
            json={
                "owner": "text-worker",
                "goal": "Define ToolLoop from the glossary.",
                "router_profile": "router-small",
                "final_profile": "final-local",
                "budgets": {"max_calls": 4, "max_turns": 6, "deadline_s": 60},
                "allowed_tools": ["normalize_text", "slow_lookup"],
                "guardrails": ["no_huge_texts"],
                "completion": {"verify": "lookup_succeeded", "max_attempts": 2},
            },
        )
        body = response.json()
        run = await stored_run(app, body["run_id"])

    assert response.status_code == 200
    assert (body["status"], body["attempts"], body["turns"]) == ("done", 1, 3)
    assert [r["status"] for r in body["receipts"]] == ["succeeded", "succeeded"]
    assert run.status == "done"


STOPS: list[tuple[str, dict[str, Any], dict[str, Any], list[Any]]] = [
    (
        "budget:max_calls",
        {"budgets": {"max_calls": 1}},
        {},
        [
            openai_calls(("a", "echo", {"text": "1"}), ("b", "echo", {"text": "2"})),
            openai_calls(("c", "echo", {"text": "3"})),
        ],
    ),
    (
        "budget:max_turns",
        {"budgets": {"max_turns": 1}},
        {},
        [openai_calls(("a", "echo", {"text": "1"}))],
    ),
    (
        "budget:max_tokens",
        {"budgets": {"max_tokens": 20}},
        {},
        [openai_calls(("a", "echo", {"text": "1"}), prompt_tokens=30)],
    ),
    (
        "budget:deadline",
        {"budgets": {"deadline_s": 0.05}},
        {},
        [openai_calls(("a", "nap", {"seconds": 5}))],
    ),
    (
        "duplicate_call",
        {},
        {"router_max_duplicate_calls": 0},
        [
            openai_calls(("a", "echo", {"text": "1"})),
            openai_calls(("b", "echo", {"text": "1"})),
        ],
    ),
    (
        "same_tool_streak",
        {},
        {"router_max_same_tool_streak": 1},
        [openai_calls(("a", "echo", {"text": "1"}), ("b", "echo", {"text": "2"}))],
    ),
    (
        "malformed_output",
        {},
        {"router_max_malformed_outputs": 1},
        [openai_calls(("a", "ghost", {})), openai_calls(("b", "lookup", "{oops"))],
    ),
    (
        "completion: always red",
        {"completion": {"verify": "never_done", "max_attempts": 1}},
        {},
        [openai_text("done"), openai_text("answer")],
    ),
    (
        "final_schema",
        {"final_schema": {"type": "object"}},
        {"router_final_attempts": 1},
        [openai_text("done"), openai_text("not json")],
    ),
]


@pytest.mark.parametrize(
    ("stopped_by", "request_changes", "setting_changes", "script"),
    STOPS,
    ids=[stop[0] for stop in STOPS],
)
async def test_every_stop_reason_end_to_end(
    database_url: str,
    tmp_path: Path,
    model: FakeLLM,
    model_url: str,
    stopped_by: str,
    request_changes: dict[str, Any],
    setting_changes: dict[str, Any],
    script: list[Any],
) -> None:
    settings = router_settings(database_url, tmp_path, model_url, **setting_changes)
    model.script(*script)

    async with running(settings) as (app, client):
        response = await client.post("/router/runs", json=run_body(**request_changes))
        body = response.json()
        stored = await stored_run(app, body["run_id"])
        read = await client.get(f"/runs/{body['run_id']}")

    assert response.status_code == 200
    assert (body["status"], body["stopped_by"]) == ("incomplete", stopped_by)
    assert (body["text"], body["final"]) == ("", None)
    assert (stored.status, stored.outcome["stopped_by"] if stored.outcome else None) == (
        "incomplete",
        stopped_by,
    )
    assert read.status_code == 200
    assert model.remaining == 0
    assert not model.exhausted


async def test_a_refused_connection_is_retried_then_an_llm_error(
    database_url: str, tmp_path: Path
) -> None:
    with serve(FakeLLM()) as closed:
        pass
    settings = router_settings(database_url, tmp_path, closed)

    async with running(settings) as (_, client):
        response = await client.post("/router/runs", json=run_body())

    body = response.json()
    assert (body["status"], body["stopped_by"]) == ("error", "llm_error")
    assert "after 2 attempts" in body["state"]["error"]
    # Where the model server is, and what the connection said, are the log's.
    assert "127.0.0.1" not in response.text
    assert "onnect" not in response.text
