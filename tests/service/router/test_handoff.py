"""The service's router and engine share one contract, so a checked proposal's
fingerprint reaches the engine as checked (the engine does not validate again)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from app.engine.engine import Engine
from app.engine.receipt import Receipt
from app.engine.run import RunState
from app.foundation.canonical import fingerprint
from tests.router.http_support import router_settings, run_body
from tests.support.app import running
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text

pytestmark = pytest.mark.usefixtures("fresh_router_tools")


async def test_a_service_run_hands_the_engine_the_fingerprint_it_checked(
    database_url: str,
    tmp_path: Path,
    model: FakeLLM,
    model_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_text("enough"),
        openai_text("ToolLoop runs tools."),
    )
    handed: list[tuple[str, str | None]] = []

    async with running(router_settings(database_url, tmp_path, model_url)) as (app, client):
        engine: Engine = app.state.runtime.engine
        run_call = engine.run_call

        async def spy(
            state: RunState, tool_id: str, args: Mapping[str, Any], **options: Any
        ) -> Receipt:
            handed.append((tool_id, options.get("checked_fingerprint")))
            return await run_call(state, tool_id, args, **options)

        monkeypatch.setattr(engine, "run_call", spy)
        response = await client.post("/router/runs", json=run_body())

    assert response.status_code == 200, response.text
    expected = fingerprint("lookup", {"term": "toolloop"})
    assert handed == [("lookup", expected)]
    (receipt,) = response.json()["receipts"]
    assert (receipt["status"], receipt["fingerprint"]) == ("succeeded", expected)
