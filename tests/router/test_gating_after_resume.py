"""`requires` across a pause: the engine's check agrees with the router's after a resume."""

from __future__ import annotations

from app.router.loop import Finished, Paused
from tests.router import router_tools
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text


async def test_a_requirement_met_before_the_pause_still_holds_after_it(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(
            ("c1", "publish", {"title": "t"}),
            ("c2", "lookup", {"term": "toolloop"}),
        )
    )
    paused = await harness.start(request())
    assert isinstance(paused, Paused)
    harness.model.script(
        openai_calls(("c3", "summarize", {"text": "abc"})),
        openai_calls(("c4", "summarize", {"text": "def"})),
        openai_text("ok"),
        openai_text("answer"),
    )

    result = await harness.resume(paused, (0, True, "fine"))

    assert isinstance(result, Finished)
    # lookup succeeded before the pause: summarize runs once (max_per_run 1), then no more.
    assert [name for name, _ in router_tools.CALLS] == ["lookup", "publish", "summarize"]
    summarized = [r for r in result.stored["receipts"] if r["tool"] == "summarize"]
    assert [r["status"] for r in summarized] == ["succeeded"]
    assert "at most 1 time(s) per run" in harness.model.tool_results(3)["c4"]
