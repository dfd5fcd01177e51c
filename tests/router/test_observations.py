from __future__ import annotations

import json

from app.router.observations import TRUNCATION_MARKER, render, summarize, truncate
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text


def test_short_text_is_untouched() -> None:
    assert truncate("abc", 3) == ("abc", False)


def test_long_text_is_cut_with_a_visible_marker() -> None:
    text, cut = truncate("x" * 50, 10)
    assert cut
    assert text == "x" * 10 + TRUNCATION_MARKER.format(shown=10, total=50)
    assert "[truncated: showed 10 of 50 characters]" in text


def test_a_summary_holds_status_and_output_or_error() -> None:
    ok = {"status": "succeeded", "output": {"a": 1}, "error": None}
    failed = {"status": "failed", "output": None, "error": {"kind": "exception", "message": "m"}}
    assert json.loads(summarize(ok, 100)[0]) == {"status": "succeeded", "output": {"a": 1}}
    assert json.loads(summarize(failed, 100)[0]) == {
        "status": "failed",
        "error": {"kind": "exception", "message": "m"},
    }


def test_no_observations_render_as_none() -> None:
    assert render([]) == "(none)"


async def test_the_model_sees_a_cut_summary_and_the_receipt_keeps_everything(
    harness: RouterHarness,
) -> None:
    harness.limit(max_observation_chars=200)
    harness.model.script(
        openai_calls(("c1", "big", {"size": 5000})), openai_text("ok"), openai_text("answer")
    )

    result = await harness.start(request())

    seen = harness.model.tool_results(1)["c1"]
    assert seen.endswith("[truncated: showed 200 of 5043 characters]")
    assert len(seen) < 300
    assert result.outcome.receipts[0]["output"] == {"text": "x" * 5000}
    assert harness.stored(result.outcome.run_id)[0]["output"] == {"text": "x" * 5000}
    (observation,) = result.outcome.state["observations"]
    assert observation["truncated"] is True


async def test_the_model_sees_the_redacted_output(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "key sk-abcdefghijklmnopqrstuvwxyz"})),
        openai_text("ok"),
        openai_text("answer"),
    )

    result = await harness.start(request())

    assert "sk-abcdefghijklmnopqrstuvwxyz" not in harness.model.tool_results(1)["c1"]
    assert result.outcome.receipts[0]["output"]["text"].endswith("sk-abcdefghijklmnopqrstuvwxyz")
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in str(result.stored)
