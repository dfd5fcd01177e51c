from __future__ import annotations

import json

from app.router.outcome import RunStatus
from tests.router.harness import ANTHROPIC_KEY, RouterHarness, request
from tests.support.fake_llm import anthropic_text, openai_calls, openai_text

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["answer"],
    "additionalProperties": False,
}


async def test_a_valid_final_is_parsed(harness: RouterHarness) -> None:
    harness.model.script(openai_text("enough"), openai_text('```json\n{"answer": "x"}\n```'))

    result = await harness.start(request(final_schema=SCHEMA))

    assert result.outcome.status is RunStatus.DONE
    assert result.outcome.final == {"answer": "x"}
    messages = harness.model.body(1)["messages"]
    assert messages[-1]["role"] == "user"
    assert '"additionalProperties": false' in messages[-1]["content"]


async def test_an_invalid_final_is_retried_with_the_problems(harness: RouterHarness) -> None:
    harness.model.script(
        openai_text("enough"),
        openai_text('{"answer": 1}'),
        openai_text('{"answer": "fixed"}'),
    )

    result = await harness.start(request(final_schema=SCHEMA))

    assert result.outcome.final == {"answer": "fixed"}
    retry = harness.model.body(2)["messages"]
    assert retry[-2] == {"role": "assistant", "content": '{"answer": 1}'}
    assert "/answer" in retry[-1]["content"]
    assert [c["ok"] for c in harness.decisions.of("router.final_checked")] == [False, True]


async def test_final_schema_stop_after_bounded_retries(harness: RouterHarness) -> None:
    harness.model.script(openai_text("enough"), openai_text("prose"), openai_text("[1]"))

    result = await harness.start(request(final_schema=SCHEMA))

    outcome = result.outcome
    assert (outcome.status, outcome.stopped_by) == (RunStatus.INCOMPLETE, "final_schema")
    assert (outcome.text, outcome.final) == ("", None)
    assert outcome.state["final_calls"] == 2


async def test_an_empty_final_answer_is_malformed(harness: RouterHarness) -> None:
    harness.model.script(openai_text("enough"), openai_text("  "), openai_text("answer"))

    result = await harness.start(request())

    assert result.outcome.text == "answer"
    assert result.outcome.state["malformed"] == {"empty_answer": 1}


async def test_the_anthropic_adapter_as_final_profile(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_text("done"),
        anthropic_text('{"answer": "a service"}', input_tokens=40, output_tokens=9),
    )

    result = await harness.start(request(final_profile="final-anthropic", final_schema=SCHEMA))

    assert result.outcome.status is RunStatus.DONE
    assert result.outcome.final == {"answer": "a service"}
    assert str(harness.model.requests[2].url) == "https://anthropic.test/v1/messages"
    headers = harness.model.requests[2].headers
    assert headers["x-api-key"] == ANTHROPIC_KEY
    assert headers["anthropic-version"] == "2023-06-01"
    body = harness.model.body(2)
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 300
    assert "tools" not in body
    assert "only the goal" in body["system"]
    (turn,) = body["messages"]  # the task and the schema, merged into one user turn
    assert turn["role"] == "user"
    texts = [block["text"] for block in turn["content"]]
    assert "Find out what toolloop is." in texts[0]
    assert json.loads(texts[1].split("JSON Schema:\n", 1)[1]) == SCHEMA
    assert result.outcome.state["tokens"]["input"] == 10 + 10 + 40
