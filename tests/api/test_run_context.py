"""A plan's `context` is stored with its run, redacted, and shown by `GET /runs/{id}`
and by the run's audit (`plan.accepted`)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.foundation.redaction import REDACTED
from app.settings import Settings
from tests.support.app import AppFactory, stored_run

REGISTRY = """\
subagents:
  runner:
    tools:
      echo:
        callable: tests.api.run_tools:echo
        description: Return the text.
        input_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]
          additionalProperties: false
        output_schema: {type: object}
        redact: [password]
    runner_defaults:
      allowed_tools: [echo]
      max_calls: 8
      tool_timeout_s: 60
"""

SECRET_KEY = "sk-" + "A" * 32
CONTEXT = {
    "trace_id": "t-1",
    "password": "hunter2",
    "note": f"key {SECRET_KEY}",
    "nested": {"Password": "again", "tags": ["a", "b"]},
}
REDACTED_CONTEXT = {
    "trace_id": "t-1",
    "password": REDACTED,
    "note": f"key {REDACTED}",
    "nested": {"Password": REDACTED, "tags": ["a", "b"]},
}


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


def _plan(context: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "owner": "runner",
        "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "x"}}],
    }
    if context is not None:
        body["context"] = context
    return body


async def test_the_context_is_stored_redacted_and_shown_by_the_run(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    done = await client.post("/plans/sequential", json=_plan(CONTEXT))
    assert done.status_code == 200, done.text
    run_id = done.json()["plan_id"]

    run = (await client.get(f"/runs/{run_id}")).json()
    stored = await stored_run(app, run_id)

    assert run["context"] == REDACTED_CONTEXT
    assert stored.context == REDACTED_CONTEXT


async def test_the_context_is_in_the_runs_audit(app: FastAPI, client: httpx.AsyncClient) -> None:
    body = {
        "owner": "runner",
        "max_concurrency": 1,
        "lanes": [
            {"item_key": "a", "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "x"}}]}
        ],
        "context": CONTEXT,
    }
    started = await client.post("/plans/parallel", json=body, headers={"Prefer": "respond-async"})
    run_id = started.json()["run_id"]
    handle = app.state.runtime.runs.get(run_id)
    if handle is not None:
        await handle.wait()
    await app.state.runtime.writer.flush()

    audit = (await client.get(f"/runs/{run_id}/audit")).json()["items"]

    (accepted,) = [event for event in audit if event["kind"] == "plan.accepted"]
    assert accepted["detail"]["context"] == REDACTED_CONTEXT
    assert "hunter2" not in str(audit)
    assert SECRET_KEY not in str(audit)


async def test_a_plan_without_a_context_shows_an_empty_one(client: httpx.AsyncClient) -> None:
    done = await client.post("/plans/sequential", json=_plan(None))
    run = (await client.get(f"/runs/{done.json()['plan_id']}")).json()
    assert run["context"] == {}
