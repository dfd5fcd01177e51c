"""Every stop reason: named, bounded, and never a fabricated answer."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.router.outcome import RunStatus
from tests.router import router_tools
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text


def assert_stopped(result: Any, stopped_by: str, status: RunStatus = RunStatus.INCOMPLETE) -> None:
    outcome = result.outcome
    assert (outcome.status, outcome.stopped_by) == (status, stopped_by)
    assert (outcome.text, outcome.final) == ("", None)
    assert result.stored["status"] == status.value
    assert result.stored["stopped_by"] == stopped_by


async def test_budget_max_calls_rejects_then_stops(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "1"}), ("c2", "echo", {"text": "2"})),
        openai_calls(("c3", "echo", {"text": "3"})),
    )

    result = await harness.start(request(budgets={"max_calls": 1}))

    assert_stopped(result, "budget:max_calls")
    assert router_tools.CALLS == [("echo", {"text": "1"})]
    assert harness.model.tool_results(1)["c2"].startswith("rejected: budget: ")
    assert result.outcome.state["counts"]["budget_breaches"] == 2


async def test_an_exhausted_call_budget_still_lets_the_model_answer(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "1"}), ("c2", "echo", {"text": "2"})),
        openai_text("out of calls"),
        openai_text("answer"),
    )

    result = await harness.start(request(budgets={"max_calls": 1}))

    assert result.outcome.status is RunStatus.DONE
    assert '"calls_left": 0' in harness.model.body(1)["messages"][0]["content"]


async def test_budget_max_turns(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "1"})),
        openai_calls(("c2", "echo", {"text": "2"})),
    )

    result = await harness.start(request(budgets={"max_turns": 2}))

    assert_stopped(result, "budget:max_turns")
    assert result.outcome.turns == 2
    assert len(harness.model.requests) == 2


async def test_budget_max_tokens(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "1"}), prompt_tokens=80, completion_tokens=30)
    )

    result = await harness.start(request(budgets={"max_tokens": 100}))

    assert_stopped(result, "budget:max_tokens")
    assert router_tools.CALLS == []
    assert result.outcome.state["tokens"]["total"] == 110


async def test_budget_deadline_during_a_model_call(harness: RouterHarness) -> None:
    async def hang(_: httpx.Request) -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    harness.model.script(hang)

    result = await harness.start(request(budgets={"deadline_s": 0.05}))

    assert_stopped(result, "budget:deadline")


async def test_budget_deadline_during_a_tool_call(harness: RouterHarness) -> None:
    harness.model.script(openai_calls(("c1", "nap", {"seconds": 5})))

    result = await harness.start(request(budgets={"deadline_s": 0.05}))

    assert_stopped(result, "budget:deadline")
    (receipt,) = result.outcome.receipts
    assert receipt["status"] == "timed_out"
    assert receipt["error"]["kind"] == "deadline"


async def test_duplicate_call_stop(harness: RouterHarness) -> None:
    harness.limit(max_duplicate_calls=0)
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "1"})),
        openai_calls(("c2", "echo", {"text": "1"})),
    )

    result = await harness.start(request())

    assert_stopped(result, "duplicate_call")
    assert len(router_tools.CALLS) == 1


async def test_same_tool_streak_stop(harness: RouterHarness) -> None:
    harness.limit(max_same_tool_streak=2)
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "1"}), ("c2", "echo", {"text": "2"})),
        openai_calls(("c3", "echo", {"text": "3"})),
    )

    result = await harness.start(request())

    assert_stopped(result, "same_tool_streak")
    assert [args["text"] for _, args in router_tools.CALLS] == ["1", "2"]
    assert result.outcome.state["same_tool_streak"] == {"tool": "echo", "count": 2}


async def test_llm_error_after_bounded_retries_honouring_retry_after(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        httpx.Response(429, headers={"Retry-After": "7"}),
        httpx.Response(503),
        httpx.Response(500),
    )

    result = await harness.start(request())

    assert_stopped(result, "llm_error", RunStatus.ERROR)
    assert harness.sleeps == [7.0, 2.0]
    assert "failed after 3 attempts" in result.outcome.state["error"]


async def test_a_transport_fault_that_recovers_is_not_an_error(harness: RouterHarness) -> None:
    harness.model.script(
        httpx.Response(503),
        openai_text("fine"),
        httpx.Response(502),
        openai_text("answer"),
    )

    result = await harness.start(request())

    assert result.outcome.status is RunStatus.DONE
    assert result.outcome.text == "answer"
    assert harness.sleeps == [1.0, 1.0]


async def test_a_missing_api_key_is_an_llm_error(harness: RouterHarness) -> None:
    harness.environ.clear()
    harness.model.script(openai_text("enough"))

    result = await harness.start(request(final_profile="final-anthropic"))

    assert_stopped(result, "llm_error", RunStatus.ERROR)
    assert "TEST_ANTHROPIC_KEY" in result.outcome.state["error"]
