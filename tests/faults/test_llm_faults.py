"""LLM endpoint faults, end to end through the fake model served on 127.0.0.1.

Each fault ends the run in its documented status and stop reason, within its
budget, and never as a 5xx of the service.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.router.http_support import router_settings, run_body
from tests.support.app import running
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text

pytestmark = pytest.mark.usefixtures("fresh_router_tools")


@pytest.fixture
def settings(sqlite_url: str, tmp_path: Path, model: FakeLLM, model_url: str) -> Settings:
    return router_settings(sqlite_url, tmp_path, model_url)


def _server_errors(model: FakeLLM) -> None:
    for _ in range(2):
        model.reply({"error": "boom"}, status=500)


def _rate_limited(model: FakeLLM) -> None:
    for _ in range(2):
        model.reply({"error": "slow down"}, status=429, headers={"Retry-After": "0"})


def _not_json(model: FakeLLM) -> None:
    for _ in range(6):
        model.reply(b"{this is not json")


def _empty_choices(model: FakeLLM) -> None:
    for _ in range(6):
        model.reply({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})


def _arguments_not_json(model: FakeLLM) -> None:
    for index in range(6):
        model.reply(openai_calls((f"c{index}", "lookup", "{not json")))


def _unknown_tools(model: FakeLLM) -> None:
    for index in range(6):
        model.reply(openai_calls((f"c{index}", f"ghost_{index}", {})))


def _endless_calls(model: FakeLLM) -> None:
    for index in range(12):
        model.reply(openai_calls((f"c{index}", "lookup", {"term": f"term {index}"})))


FAULTS = [
    pytest.param(_server_errors, {}, ("error", "llm_error"), id="500"),
    pytest.param(_rate_limited, {}, ("error", "llm_error"), id="429-retry-after"),
    pytest.param(_not_json, {}, ("incomplete", "malformed_output"), id="malformed-json"),
    pytest.param(_empty_choices, {}, ("incomplete", "malformed_output"), id="empty-choices"),
    pytest.param(
        _arguments_not_json, {}, ("incomplete", "malformed_output"), id="arguments-not-json"
    ),
    pytest.param(_unknown_tools, {}, ("incomplete", "malformed_output"), id="unknown-tools"),
    pytest.param(
        _endless_calls,
        {"budgets": {"max_calls": 3}},
        ("incomplete", "budget:max_calls"),
        id="endless-tool-calls",
    ),
]


@pytest.mark.parametrize(("script", "overrides", "expected"), FAULTS)
async def test_each_llm_fault_ends_in_its_documented_stop(
    client: httpx.AsyncClient,
    model: FakeLLM,
    script: Any,
    overrides: dict[str, Any],
    expected: tuple[str, str],
) -> None:
    script(model)

    response = await client.post("/router/runs", json=run_body(**overrides))

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["stopped_by"]) == expected
    assert (body["text"], body["final"]) == ("", None)
    assert len(model.requests) <= 12


async def test_a_refused_connection_is_an_llm_error(tmp_path: Path, sqlite_url: str) -> None:
    settings = router_settings(sqlite_url, tmp_path, "http://127.0.0.1:9")
    async with running(settings) as (_, client):
        response = await client.post("/router/runs", json=run_body())
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["stopped_by"]) == ("error", "llm_error")


async def test_a_good_reply_after_a_429_finishes_the_run(
    client: httpx.AsyncClient, model: FakeLLM
) -> None:
    model.reply({"error": "slow down"}, status=429, headers={"Retry-After": "0"})
    model.script(openai_text("nothing to call"), openai_text("The answer."))

    body = (await client.post("/router/runs", json=run_body())).json()

    assert (body["status"], body["text"]) == ("done", "The answer.")
