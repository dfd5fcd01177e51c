"""Guardrails declared `mode: shadow`: they run, their would-be denials are recorded,
nothing is denied; one that fails lets the call through and says so."""

from __future__ import annotations

import logging

import pytest

from app.router.outcome import RunStatus
from tests.observability.metrics_reading import value
from tests.router import router_tools
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text

_SHADOW = "toolloop_guardrail_shadow_total"


async def test_a_shadow_denial_is_recorded_and_the_call_runs(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "hi"})), openai_text("ok"), openai_text("answer")
    )
    before = value(_SHADOW, guardrail="shadow_no_echo", outcome="denied")

    result = await harness.start(request(guardrails=["shadow_no_echo"]))

    assert result.outcome.status is RunStatus.DONE
    assert router_tools.GUARDRAIL_CALLS == ["no_echo"]
    assert router_tools.CALLS == [("echo", {"text": "hi"})]
    assert [r["status"] for r in result.outcome.receipts] == ["succeeded"]
    assert result.outcome.state["counts"]["guardrail_denials"] == 0
    assert harness.decisions.of("router.call_denied") == []
    (shadow,) = harness.decisions.of("router.shadow_denied")
    assert shadow["guardrail"] == "shadow_no_echo"
    assert shadow["reason"] == "echo is not allowed here"
    assert shadow["call_id"] == "c1"
    assert value(_SHADOW, guardrail="shadow_no_echo", outcome="denied") == before + 1


async def test_a_shadow_guardrail_that_raises_fails_open_and_says_so(
    harness: RouterHarness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "x"})), openai_text("ok"), openai_text("answer")
    )
    before = value(_SHADOW, guardrail="shadow_broken", outcome="failed")

    with caplog.at_level(logging.WARNING, logger="toolloop.router"):
        result = await harness.start(request(guardrails=["shadow_broken"]))

    assert result.outcome.status is RunStatus.DONE
    assert router_tools.CALLS == [("lookup", {"term": "x"})]
    (failed,) = harness.decisions.of("router.shadow_failed")
    assert failed["guardrail"] == "shadow_broken"
    assert failed["reason"].startswith("guardrail 'shadow_broken' raised ValueError")
    assert value(_SHADOW, guardrail="shadow_broken", outcome="failed") == before + 1
    assert any("fail open in shadow mode only" in r.getMessage() for r in caplog.records)


async def test_an_enforcing_guardrail_after_a_shadow_one_still_denies(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "hi"})), openai_text("ok"), openai_text("answer")
    )

    result = await harness.start(request(guardrails=["shadow_broken", "broken_guardrail"]))

    assert router_tools.CALLS == []
    assert [r["status"] for r in result.outcome.receipts] == ["denied"]
    assert len(harness.decisions.of("router.shadow_failed")) == 1
    (denied,) = harness.decisions.of("router.call_denied")
    assert denied["guardrail"] == "broken_guardrail"
    assert denied["args"] == '{"text":"hi"}'


async def test_shadow_guardrails_watch_deterministic_steps(harness: RouterHarness) -> None:
    harness.model.script(openai_text("ok"), openai_text("answer"))

    await harness.start(
        request(
            guardrails=["shadow_no_echo"],
            steps=[{"call_key": "s1", "tool": "echo", "args": {"text": "x"}}],
        )
    )

    assert router_tools.CALLS == [("echo", {"text": "x"})]
    (shadow,) = harness.decisions.of("router.shadow_denied")
    assert shadow["call_id"] is None
    (admitted,) = harness.decisions.of("router.call_admitted")
    assert admitted["args"] == '{"text":"x"}'
