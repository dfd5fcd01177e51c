from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from app.engine.run import RunIdentity
from app.router.loop import RouterRun
from app.router.outcome import RunStatus
from app.router.verifiers import Completion, Verdict
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text


async def test_a_failed_check_reprompts_with_the_reason_until_it_passes(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_text("done already"),
        openai_text("first answer"),
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_text("now done"),
        openai_text("second answer"),
    )

    result = await harness.start(request(completion={"verify": "lookup_found", "max_attempts": 3}))

    outcome = result.outcome
    assert (outcome.status, outcome.attempts) == (RunStatus.DONE, 2)
    assert outcome.text == "second answer"
    retry = harness.model.body(2)["messages"][-1]
    assert retry["role"] == "user"
    assert "no lookup yet" in retry["content"]
    assert "1 of 3" in retry["content"]
    checks = harness.decisions.of("router.completion_checked")
    assert [(c["ok"], c["reason"]) for c in checks] == [
        (False, "no lookup yet"),
        (True, "a lookup succeeded"),
    ]


async def test_an_exhausted_gate_is_incomplete_and_names_the_reason(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_text("done"), openai_text("a1"), openai_text("done"), openai_text("a2")
    )

    result = await harness.start(request(completion={"verify": "never_done", "max_attempts": 2}))

    outcome = result.outcome
    assert outcome.status is RunStatus.INCOMPLETE
    assert outcome.stopped_by == "completion: always red"
    assert outcome.attempts == 2
    assert (outcome.text, outcome.final) == ("", None)


async def test_the_builtin_verifier_counts_succeeded_tools(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "explode", {"text": "x"})),
        openai_text("done"),
        openai_text("a1"),
        openai_calls(("c2", "echo", {"text": "x"})),
        openai_text("done"),
        openai_text("a2"),
    )
    completion = {
        "verify": "builtin:tools_succeeded",
        "max_attempts": 2,
        "params": {"tools": ["echo"]},
    }

    result = await harness.start(request(completion=completion))

    assert result.outcome.status is RunStatus.DONE
    assert result.outcome.attempts == 2
    checks = harness.decisions.of("router.completion_checked")
    assert checks[0]["reason"] == "no successful call yet of echo"
    assert checks[0]["verifier"] == "builtin:tools_succeeded"


async def test_a_verifier_answering_the_wrong_shape_fails_closed(harness: RouterHarness) -> None:
    harness.model.script(openai_text("done"), openai_text("a1"))

    result = await harness.start(request(completion={"verify": "wrong_shape", "max_attempts": 1}))

    assert result.outcome.status is RunStatus.INCOMPLETE
    assert result.outcome.stopped_by.startswith("completion: verifier 'wrong_shape' answered int")


async def test_the_verifier_sees_the_redacted_receipts_text_and_final(
    harness: RouterHarness,
) -> None:
    seen: list[Mapping[str, Any]] = []

    class Spy:
        name = "spy"

        async def judge(self, run: Mapping[str, Any], timeout_s: float) -> Verdict:
            seen.append(run)
            return Verdict(True, "fine")

    harness.model.script(
        openai_calls(("c1", "echo", {"text": "Bearer abcdefghijklmnop"})),
        openai_text("done"),
        openai_text('{"a": 1}'),
    )
    plan_request = request(
        completion={"verify": "lookup_found", "max_attempts": 1},
        final_schema={"type": "object"},
    )
    plan = replace(harness.plan(plan_request), completion=Completion(Spy(), 1))
    identity = RunIdentity("r-1", "agent", None, {}, harness.contract.hash)
    result = await RouterRun.new(harness.kit, plan, identity, harness.decisions).start()

    assert result.outcome.status is RunStatus.DONE
    (run,) = seen
    assert run["final"] == {"a": 1}
    assert run["text"] == '{"a": 1}'
    (receipt,) = run["receipts"]
    assert receipt["output"] == {"text": "Bearer [REDACTED]"}
