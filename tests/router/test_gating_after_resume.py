"""`requires` across a pause: the engine's check agrees with the router's after a resume,
and a call a person rejected never ran, so it does not count against `max_per_run`."""

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


async def test_a_rejected_call_is_not_counted_against_max_per_run(
    harness: RouterHarness,
) -> None:
    harness.model.script(openai_calls(("c1", "publish_once", {"title": "first"})))
    paused = await harness.start(request(owner="capped"))
    assert isinstance(paused, Paused)
    # Rejected: it never ran, so the one call a run may make is still there.
    harness.model.script(openai_calls(("c2", "publish_once", {"title": "second"})))

    again = await harness.resume(paused, (0, False, "not this one"))

    assert isinstance(again, Paused), harness.model.tool_results(1)
    assert [call.args for call in again.calls] == [{"title": "second"}]
    assert again.outcome.state["tools"]["publish_once"] == {"calls": 0, "results": {"denied": 1}}
    # Approved, it runs and is counted: a third one is blocked.
    harness.model.script(
        openai_calls(("c3", "publish_once", {"title": "third"})),
        openai_text("done"),
        openai_text("answer"),
    )

    result = await harness.resume(again, (0, True, "fine"))

    assert isinstance(result, Finished)
    assert router_tools.CALLS == [("publish", {"title": "second"})]
    blocked = harness.model.tool_results(3)["c3"]
    assert "not available now: it may run at most 1 time(s) per run" in blocked
    statuses = [(r["tool"], r["status"]) for r in result.stored["receipts"]]
    assert statuses == [("publish_once", "denied"), ("publish_once", "succeeded")]
