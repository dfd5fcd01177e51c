from __future__ import annotations

from app.router.outcome import RunStatus
from tests.router import router_tools
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text


async def test_guardrails_run_in_order_and_the_first_deny_wins(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "hi"}), ("c2", "lookup", {"term": "toolloop"})),
        openai_text("ok"),
        openai_text("answer"),
    )

    result = await harness.start(request(guardrails=["allow_all", "no_echo", "no_echo_either"]))

    assert result.outcome.status is RunStatus.DONE
    # echo was denied by no_echo: no_echo_either never saw it; lookup passed all three.
    assert router_tools.GUARDRAIL_CALLS == [
        "allow_all",
        "no_echo",
        "allow_all",
        "no_echo",
        "no_echo_either",
    ]
    assert router_tools.CALLS == [("lookup", {"term": "toolloop"})]
    assert harness.model.tool_results(1)["c1"] == "denied: echo is not allowed here"
    denied = next(r for r in result.outcome.receipts if r["tool"] == "echo")
    assert denied["status"] == "denied"
    assert denied["error"]["kind"] == "guardrail"
    assert denied["error"]["message"] == "echo is not allowed here"
    assert denied["attempts"] == 0
    assert result.outcome.state["counts"]["guardrail_denials"] == 1
    assert result.outcome.state["calls"] == 1
    (decision,) = harness.decisions.of("router.call_denied")
    assert decision["guardrail"] == "no_echo"
    # The engine stored and audited the denied receipt like any other.
    stored = harness.stored(result.outcome.run_id)
    assert [r["status"] for r in stored] == ["denied", "succeeded"]
    finished = [e for e in harness.audit.events if e.tool == "echo"]
    assert [e.detail["status"] for e in finished] == ["denied"]


async def test_a_guardrail_that_fails_denies(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "x"})), openai_text("ok"), openai_text("answer")
    )

    await harness.start(request(guardrails=["broken_guardrail"]))

    assert router_tools.CALLS == []
    observation = harness.model.tool_results(1)["c1"]
    assert observation.startswith("denied: guardrail 'broken_guardrail' raised ValueError")


async def test_a_denied_call_repeated_is_a_duplicate(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "hi"})),
        openai_calls(("c2", "echo", {"text": "hi"})),
        openai_text("ok"),
        openai_text("answer"),
    )

    await harness.start(request(guardrails=["no_echo"]))

    assert harness.model.tool_results(2)["c2"].startswith("rejected: duplicate_call")


async def test_guardrails_apply_to_deterministic_steps(harness: RouterHarness) -> None:
    harness.model.script(openai_text("ok"), openai_text("answer"))

    result = await harness.start(
        request(
            guardrails=["no_echo"],
            steps=[{"call_key": "s1", "tool": "echo", "args": {"text": "x"}}],
        )
    )

    assert router_tools.CALLS == []
    assert result.outcome.receipts[0]["status"] == "denied"
    assert (
        "[s1] echo (denied): denied: echo is not allowed here"
        in (harness.model.body(0)["messages"][1]["content"])
    )
