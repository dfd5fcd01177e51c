"""Untrusted model output: every malformed kind is rejected, fed back, counted, bounded."""

from __future__ import annotations

import httpx
import pytest

from app.router.outcome import RunStatus
from tests.router import router_tools
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text


@pytest.mark.parametrize(
    ("call", "kind", "says"),
    [
        (("c1", "no_such_tool", {}), "unknown_tool", "no tool named 'no_such_tool'"),
        (("c1", "unlisted", {}), "unknown_tool", "no tool named 'unlisted'"),
        (("c1", "foreign", {}), "unknown_tool", "no tool named 'foreign'"),
        (("c1", "summarize", {"text": "x"}), "hidden_tool", "requires a successful 'lookup'"),
        (("c1", "lookup", "{not json"), "invalid_json", "not valid JSON"),
        (("c1", "lookup", "[1, 2]"), "invalid_json", "must be one JSON object"),
        (("c1", "lookup", {"term": ""}), "invalid_arguments", "/term"),
        (("c1", "lookup", {"term": "x", "extra": 1}), "invalid_arguments", "extra"),
    ],
)
async def test_each_malformed_call_is_rejected_and_fed_back(
    harness: RouterHarness, call: tuple[str, str, object], kind: str, says: str
) -> None:
    harness.model.script(openai_calls(call), openai_text("ok"), openai_text("answer"))

    result = await harness.start(request())

    assert result.outcome.status is RunStatus.DONE
    assert router_tools.CALLS == []
    assert result.outcome.receipts == []
    fed_back = harness.model.tool_results(1)["c1"]
    assert fed_back.startswith(f"rejected: {kind}: ")
    assert says in fed_back
    state = result.outcome.state
    assert state["malformed"] == {kind: 1}
    assert state["counts"]["malformed_outputs"] == 1
    (decision,) = harness.decisions.of("router.call_rejected")
    assert decision["kind"] == kind


async def test_an_exact_repeat_is_a_duplicate(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_calls(("c2", "lookup", '{"term":   "toolloop"}')),
        openai_text("ok"),
        openai_text("answer"),
    )

    result = await harness.start(request())

    assert router_tools.CALLS == [("lookup", {"term": "toolloop"})]
    assert harness.model.tool_results(2)["c2"].startswith("rejected: duplicate_call: ")
    assert result.outcome.state["counts"]["duplicate_calls"] == 1
    assert result.outcome.status is RunStatus.DONE


async def test_a_repeat_inside_one_turn_is_a_duplicate_too(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "a"}), ("c2", "echo", {"text": "a"})),
        openai_text("ok"),
        openai_text("answer"),
    )

    await harness.start(request())

    assert router_tools.CALLS == [("echo", {"text": "a"})]
    assert harness.model.tool_results(1)["c2"].startswith("rejected: duplicate_call")


async def test_repeated_malformed_output_stops_the_run(harness: RouterHarness) -> None:
    harness.limit(max_malformed_outputs=2)
    harness.model.script(
        openai_calls(("c1", "nope", {})),
        openai_calls(("c2", "lookup", "{")),
        openai_calls(("c3", "lookup", {"term": 5})),
    )

    result = await harness.start(request())

    outcome = result.outcome
    assert (outcome.status, outcome.stopped_by) == (RunStatus.INCOMPLETE, "malformed_output")
    assert (outcome.text, outcome.final) == ("", None)
    assert outcome.state["malformed"] == {
        "invalid_arguments": 1,
        "invalid_json": 1,
        "unknown_tool": 1,
    }
    assert outcome.state["status"] == "abort"


async def test_a_reply_that_is_not_the_provider_format_is_malformed_and_retried(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        httpx.Response(200, content=b"<html>oops</html>"),
        httpx.Response(200, json={"choices": []}),
        openai_text("fine now"),
        openai_text("answer"),
    )

    result = await harness.start(request())

    assert result.outcome.status is RunStatus.DONE
    assert result.outcome.state["malformed"] == {"malformed_reply": 2}
    assert result.outcome.turns == 3


async def test_malformed_replies_are_bounded_too(harness: RouterHarness) -> None:
    harness.limit(max_malformed_outputs=0)
    harness.model.script(httpx.Response(200, content=b"not json"))

    result = await harness.start(request())

    assert result.outcome.stopped_by == "malformed_output"


async def test_duplicate_ids_in_one_turn_still_match_their_results(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(("same", "echo", {"text": "a"}), ("same", "echo", {"text": "b"})),
        openai_text("ok"),
        openai_text("answer"),
    )

    await harness.start(request())

    results = harness.model.tool_results(1)
    assert '"text":"a"' in results["same"]
    assert '"text":"b"' in results["same~1"]
