"""Replays over HTTP: `POST /router/runs` with a replay profile, on both databases.

A recorded run, or the shipped tour cassette, replayed against today's registry:
unchanged, it matches exactly; a changed guardrail or tool schema is a named
difference; a cassette short of a reply ends the run with a named stop; a
malformed cassette is a 422 naming its line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from app.settings import Settings
from app.store.repositories.router_recordings import RouterRecordingRepository
from tests.router.http_support import run_body
from tests.router.replay_support import (
    EXAMPLE,
    EXAMPLE_PROFILES,
    NARROWER_SCHEMA,
    STRICTER_GUARDRAIL,
    TOUR,
    TOUR_CASSETTE,
    TOUR_REPLIES,
    changed_example,
    differences_of,
    replay_profiles,
    tour_replay,
)
from tests.support.app import running, settled
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text, profiles_yaml


def example(database_url: str, profiles: Path, registry: Path = EXAMPLE) -> Settings:
    return Settings(registries=[registry], database_url=database_url, profiles=profiles)


def receipts_of(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(r["call_key"], r["tool"], r["status"]) for r in body["receipts"]]


async def test_a_recorded_run_replays_exactly_and_a_changed_guardrail_is_named(
    database_url: str, tmp_path: Path, model: FakeLLM, model_url: str
) -> None:
    scripted = tmp_path / "profiles.yml"
    scripted.write_text(profiles_yaml(model_url))
    model.script(*TOUR_REPLIES)
    async with running(example(database_url, scripted)) as (_, client):
        recorded = (await client.post("/router/runs", json=TOUR)).json()
    assert (recorded["status"], recorded["turns"]) == ("done", 2)

    profiles = replay_profiles(
        tmp_path / "replay.yml",
        profiles_yaml(model_url),
        recorded={"run_id": recorded["run_id"]},
    )
    async with running(example(database_url, profiles)) as (_, client):
        response = await client.post("/router/runs", json=tour_replay("recorded"))
        assert response.status_code == 200, response.text
        replayed = response.json()
        stored = (await client.get(f"/runs/{replayed['run_id']}")).json()

    assert len(model.requests) == 3  # the replay asked no model
    report = replayed["replay"]
    assert report == {
        "source": f"run {recorded['run_id']}",
        "recorded_run_id": recorded["run_id"],
        "same_request": True,
        "same_contract": True,
        "replies": {"recorded": 3, "asked": 3},
        "matches": True,
        "differences": [],
        "paused_at": [],
    }
    assert (replayed["status"], replayed["stopped_by"], replayed["text"]) == (
        "done",
        "",
        recorded["text"],
    )
    assert receipts_of(replayed) == receipts_of(recorded)
    assert replayed["run_id"] != recorded["run_id"]
    assert stored["outcome"]["replay"] == report

    stricter = changed_example(tmp_path, STRICTER_GUARDRAIL)
    async with running(example(database_url, profiles, stricter)) as (_, client):
        changed = (await client.post("/router/runs", json=tour_replay("recorded"))).json()

    report = changed["replay"]
    assert report["matches"] is False
    assert report["same_contract"] is False
    refused = [d for d in report["differences"] if d["kind"] == "call_refused"]
    assert [d["call_key"] for d in refused] == ["s1", "t1c0"]
    assert refused[1]["recorded"] == {"decision": "admitted", "why": None}
    assert refused[1]["replayed"] == {"decision": "denied", "why": "guardrail no_huge_texts"}
    assert ("check_changed", None) in differences_of(changed)


async def test_the_shipped_tour_cassette_replays_exactly(database_url: str) -> None:
    async with running(example(database_url, EXAMPLE_PROFILES)) as (_, client):
        response = await client.post("/router/runs", json=tour_replay("tour-replay"))

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["replay"]["source"]) == ("done", "cassette tour.cassette.jsonl")
    assert body["replay"]["differences"] == []
    assert body["replay"]["matches"] is True
    assert receipts_of(body) == [
        ("s1", "normalize_text", "succeeded"),
        ("t1c0", "slow_lookup", "succeeded"),
    ]


async def test_a_changed_tool_schema_is_a_named_difference(
    database_url: str, tmp_path: Path
) -> None:
    narrower = changed_example(tmp_path, NARROWER_SCHEMA)
    async with running(example(database_url, EXAMPLE_PROFILES, narrower)) as (_, client):
        response = await client.post("/router/runs", json=tour_replay("tour-replay"))

    assert response.status_code == 200, response.text
    body = response.json()
    (refused,) = [d for d in body["replay"]["differences"] if d["kind"] == "call_refused"]
    assert refused["call_key"] == "t1c0"
    assert refused["replayed"] == {"decision": "rejected", "why": "invalid_arguments"}
    assert "t1c0 (slow_lookup) is rejected (invalid_arguments)" in refused["message"]


async def test_a_cassette_short_of_a_reply_ends_with_a_named_stop(
    database_url: str, tmp_path: Path
) -> None:
    short = tmp_path / "short.jsonl"
    short.write_text("".join(TOUR_CASSETTE.read_text().splitlines(keepends=True)[:-1]))
    profiles = replay_profiles(tmp_path / "p.yml", "profiles:\n", short={"cassette": str(short)})
    async with running(example(database_url, profiles)) as (_, client):
        response = await client.post("/router/runs", json=tour_replay("short"))

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["stopped_by"], body["text"]) == ("error", "llm_error", "")
    assert "the recording has no reply 3: it holds 2" in body["state"]["error"]
    assert differences_of(body) == [
        ("reply_missing", None),
        ("check_changed", None),
        ("stop_changed", None),
        ("turns_changed", None),
    ]
    (missing, _, stop, _) = body["replay"]["differences"]
    assert missing["message"] == "the replay asked for reply 3 (final model); the recording holds 2"
    assert stop["replayed"] == {"status": "error", "stopped_by": "llm_error"}


async def test_a_malformed_cassette_is_a_422_naming_its_problems(
    database_url: str, tmp_path: Path
) -> None:
    header = TOUR_CASSETTE.read_text().splitlines()[0]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([header, '{"role": "router", "kind": "dream"}', "{oops"]) + "\n")
    profiles = replay_profiles(tmp_path / "p.yml", "profiles:\n", broken={"cassette": str(broken)})
    async with running(example(database_url, profiles)) as (_, client):
        response = await client.post("/router/runs", json=tour_replay("broken"))
        runs = (await client.get("/runs")).json()["items"]

    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    (problem,) = response.json()["errors"]
    assert problem["pointer"] == "/router_profile"
    assert problem["message"].startswith("model profile 'broken': cassette broken.jsonl: ")
    assert "line 3: not one JSON value" in problem["message"]
    assert str(tmp_path) not in response.text
    assert runs == []


async def test_a_replay_of_one_model_or_of_an_unknown_run_is_a_422(
    database_url: str, tmp_path: Path
) -> None:
    profiles = replay_profiles(
        tmp_path / "p.yml", profiles_yaml("http://127.0.0.1:9"), gone={"run_id": "no-such-run"}
    )
    async with running(example(database_url, profiles)) as (_, client):
        half = await client.post("/router/runs", json={**TOUR, "router_profile": "gone"})
        unknown = await client.post("/router/runs", json=tour_replay("gone"))

    assert half.status_code == 422, half.text
    assert [e["pointer"] for e in half.json()["errors"]] == ["/final_profile"]
    assert "a replay serves both models" in half.json()["errors"][0]["message"]
    assert unknown.status_code == 422, unknown.text
    assert unknown.json()["errors"] == [
        {
            "pointer": "/router_profile",
            "message": "model profile 'gone': no router run 'no-such-run'",
        }
    ]


SECRET = "sk-" + "Q" * 32


async def test_every_reply_is_recorded_redacted_failures_too_and_replays_exactly(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    model.script(openai_calls(("c1", "echo", {"text": "hi", "secret": "hunter2"})))
    model.reply(b"not a chat completion")
    model.script(openai_text(f"done; the key was {SECRET}"), openai_text("The answer."))
    recorded = (await client.post("/router/runs", json=run_body())).json()
    assert recorded["status"] == "done"

    async with app.state.runtime.sessions() as session:
        row = await RouterRecordingRepository(session).get(recorded["run_id"])
    assert row is not None
    kept = json.dumps([row.request, row.replies])
    assert "hunter2" not in kept
    assert SECRET not in kept
    assert [(r["role"], r["kind"]) for r in row.replies] == [
        ("router", "reply"),
        ("router", "malformed"),
        ("router", "reply"),
        ("final", "reply"),
    ]
    assert row.reply_count == 4

    runtime = app.state.runtime
    task = await runtime.router.open_replay(recorded["run_id"], None)
    replayed = (await runtime.runs.launch(task).wait()).response
    assert replayed["replay"]["differences"] == []
    assert replayed["state"]["malformed"] == recorded["state"]["malformed"]
    assert len(model.requests) == 4


async def test_a_replay_pauses_where_the_recording_did_and_reports_that_pause(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    model.script(openai_calls(("c1", "lookup", {"term": "x"}), ("c2", "publish", {"title": "t"})))
    paused = (await client.post("/router/runs", json=run_body())).json()
    assert (paused["status"], paused["stopped_by"]) == ("pending", "confirmation")
    model.script(openai_text("not published"), openai_text("The answer."))
    confirmation = paused["pending"][0]["confirmation_id"]
    decided = await client.post(
        f"/router/runs/{paused['run_id']}/confirmations/{confirmation}",
        json={"approve": False, "reason": "no"},
    )
    assert decided.status_code == 202
    await settled(app, paused["run_id"])

    runtime = app.state.runtime
    task = await runtime.router.open_replay(paused["run_id"], None)
    replayed = (await runtime.runs.launch(task).wait()).response

    assert (replayed["status"], replayed["stopped_by"]) == ("pending", "confirmation")
    assert [p["call_key"] for p in replayed["pending"]] == ["t1c1"]
    report = replayed["replay"]
    assert report["paused_at"] == ["t1c1"]
    assert report["differences"] == []
    assert report["matches"] is True
    assert report["replies"] == {"recorded": 3, "asked": 1}
    assert len(model.requests) == 3  # the replay asked no model
