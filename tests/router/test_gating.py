"""`requires` gating, checked when the tool list is built and again at dispatch."""

from __future__ import annotations

from dataclasses import replace

from app.contract.compiled import Requires
from app.router.gating import gate_problem
from app.router.state import RouterState
from tests.router import router_tools
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text


async def test_a_gated_tool_is_hidden_until_its_requirement_holds(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_calls(("c2", "summarize", {"text": "abc"})),
        openai_text("ok"),
        openai_text("answer"),
    )

    await harness.start(request(allowed_tools=["lookup", "summarize"]))

    assert harness.model.tool_names(0) == ["lookup"]
    assert harness.model.tool_names(1) == ["lookup", "summarize"]
    # max_per_run 1: once summarize ran, it is hidden again.
    assert harness.model.tool_names(2) == ["lookup"]
    assert [name for name, _ in router_tools.CALLS] == ["lookup", "summarize"]


async def test_a_gated_tool_is_blocked_at_dispatch(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_calls(("c2", "summarize", {"text": "a"}), ("c3", "summarize", {"text": "b"})),
        openai_text("ok"),
        openai_text("answer"),
    )

    result = await harness.start(request())

    # Both were offered; the second would exceed max_per_run when dispatched.
    assert "summarize" in harness.model.tool_names(1)
    assert [args for name, args in router_tools.CALLS if name == "summarize"] == [{"text": "a"}]
    blocked = harness.model.tool_results(2)["c3"]
    assert blocked.startswith("rejected: blocked: tool 'summarize' may not run now")
    assert "at most 1 time(s) per run" in blocked
    assert result.outcome.state["malformed"] == {"blocked": 1}


async def test_a_gated_step_is_blocked_not_run(harness: RouterHarness) -> None:
    harness.model.script(openai_text("ok"), openai_text("answer"))

    result = await harness.start(
        request(steps=[{"call_key": "s1", "tool": "summarize", "args": {"text": "x"}}])
    )

    assert router_tools.CALLS == []
    assert result.outcome.receipts == []
    assert result.outcome.state["observations"][0]["status"] == "rejected"


def test_a_condition_that_cannot_be_evaluated_hides_and_blocks(harness: RouterHarness) -> None:
    tool = harness.contract.tools["summarize"]
    orphan = replace(tool, requires=Requires(after=("ghost",), max_per_run=None))
    problem = gate_problem(orphan, RouterState(10.0), harness.contract.tools)
    assert problem is not None
    assert "cannot be evaluated" in problem


def test_a_condition_that_raises_fails_closed(harness: RouterHarness) -> None:
    class Broken(RouterState):
        def succeeded(self, tool: str) -> int:
            raise KeyError(tool)

    tool = harness.contract.tools["summarize"]
    problem = gate_problem(tool, Broken(10.0), harness.contract.tools)
    assert problem == "its requirements cannot be evaluated (KeyError)"
