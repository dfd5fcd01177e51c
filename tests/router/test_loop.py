from __future__ import annotations

import asyncio
import json

import pytest

from app.router.loop import Finished
from app.router.outcome import RunStatus
from tests.router import router_tools
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text
from tests.support.waiting import wait_for


async def test_a_tool_call_then_an_answer_is_done(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_text("I have what I need."),
        openai_text("ToolLoop is a governed execution service."),
    )

    result = await harness.start(request())

    assert isinstance(result, Finished)
    outcome = result.outcome
    assert outcome.status is RunStatus.DONE
    assert outcome.stopped_by == ""
    assert outcome.text == "ToolLoop is a governed execution service."
    assert outcome.final is None
    assert (outcome.attempts, outcome.turns) == (1, 2)
    assert router_tools.CALLS == [("lookup", {"term": "toolloop"})]
    (receipt,) = outcome.receipts
    assert (receipt["tool"], receipt["status"], receipt["call_key"]) == (
        "lookup",
        "succeeded",
        "t1c0",
    )
    assert receipt["output"] == {"term": "toolloop", "found": True}
    state = outcome.state
    assert state["status"] == "final"
    assert state["calls"] == 1
    assert state["tools"]["lookup"] == {"calls": 1, "results": {"succeeded": 1}}
    assert state["tokens"] == {"input": 30, "output": 15, "total": 45}
    assert state["model_calls"] == 3
    assert len(state["fingerprints"]) == 1
    assert state["same_tool_streak"] == {"tool": "lookup", "count": 1}
    # The observation went back to the model under the call's id.
    observation = harness.model.tool_results(1)["c1"]
    assert json.loads(observation) == {
        "status": "succeeded",
        "output": {"term": "toolloop", "found": True},
    }
    # The final writer got the goal and the observations, and no tools.
    final = harness.model.body(2)
    assert final["model"] == "final-model"
    assert "tools" not in final
    task = final["messages"][1]["content"]
    assert "Find out what toolloop is." in task
    assert "[t1c0] lookup (succeeded)" in task
    # The stored copy is the same run, redacted, with every receipt.
    assert result.stored["receipts"][0]["receipt_id"] == receipt["receipt_id"]


async def test_the_router_prompt_carries_the_goal_context_tools_and_budgets(
    harness: RouterHarness,
) -> None:
    harness.model.script(openai_text("nothing to do"), openai_text("answer"))

    await harness.start(request(allowed_tools=["lookup", "echo"], budgets={"max_calls": 3}))

    first = harness.model.body(0)
    assert first["model"] == "router-model"
    system, task = first["messages"][0], first["messages"][1]
    assert system["role"] == "system"
    assert '"calls_left": 3' in system["content"]
    assert '"turns_left": 16' in system["content"]
    assert "agent" in system["content"]
    assert task["role"] == "user"
    assert "Find out what toolloop is." in task["content"]
    assert '"trace_id": "t-1"' in task["content"]
    assert harness.model.tool_names(0) == ["lookup", "echo"]
    tool = first["tools"][0]["function"]
    assert tool["description"] == "Look a term up."
    assert tool["parameters"]["required"] == ["term"]


async def test_deterministic_steps_run_first_and_are_the_first_observations(
    harness: RouterHarness,
) -> None:
    harness.model.script(openai_text("enough"), openai_text("answer"))

    result = await harness.start(
        request(steps=[{"call_key": "s1", "tool": "lookup", "args": {"term": "receipt"}}])
    )

    assert router_tools.CALLS == [("lookup", {"term": "receipt"})]
    assert result.outcome.receipts[0]["call_key"] == "s1"
    task = harness.model.body(0)["messages"][1]["content"]
    assert '[s1] lookup (succeeded): {"status":"succeeded","output":{"term":"receipt"' in task
    assert result.outcome.state["calls"] == 1


async def test_several_calls_in_one_turn_run_concurrently_and_match_by_call_id(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(
            ("call-b", "rendezvous", {"group": "g", "label": "b"}),
            ("call-a", "rendezvous", {"group": "g", "label": "a"}),
        ),
        openai_text("both done"),
        openai_text("answer"),
    )

    result = await harness.start(request())

    assert result.outcome.status is RunStatus.DONE
    results = harness.model.tool_results(1)
    assert json.loads(results["call-a"])["output"] == {"label": "a"}
    assert json.loads(results["call-b"])["output"] == {"label": "b"}
    assert [r["call_key"] for r in result.outcome.receipts] == ["t1c0", "t1c1"]


async def test_a_failed_call_is_an_observation_not_a_stop(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "explode", {"text": "x"})),
        openai_text("it failed"),
        openai_text("The tool failed."),
    )

    result = await harness.start(request())

    assert result.outcome.status is RunStatus.DONE
    assert result.outcome.receipts[0]["status"] == "failed"
    assert result.outcome.state["counts"]["execution_errors"] == 1
    observation = json.loads(harness.model.tool_results(1)["c1"])
    assert observation["error"]["kind"] == "exception"


async def test_decisions_are_recorded(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"}), ("c2", "nope", {})),
        openai_text("done"),
        openai_text("answer"),
    )

    await harness.start(request())

    kinds = harness.decisions.kinds()
    assert kinds[0] == "router.run_started"
    assert kinds[-1] == "router.run_finished"
    assert "router.call_admitted" in kinds
    assert "router.call_rejected" in kinds
    assert kinds.count("router.model_turn") == 3
    (rejected,) = harness.decisions.of("router.call_rejected")
    assert rejected["kind"] == "unknown_tool"
    started = harness.decisions.of("router.run_started")[0]
    assert started["router_profile"] == "router"
    assert set(started["prompts"]) >= {"router.system", "final.task"}


async def test_a_cancelled_turn_leaves_a_receipt_for_every_admitted_call(
    harness: RouterHarness,
) -> None:
    harness.limit(max_parallel_calls=1)
    harness.model.script(
        openai_calls(
            ("c1", "hold", {"gate": "first"}),
            ("c2", "hold", {"gate": "second"}),
            ("c3", "hold", {"gate": "third"}),
        ),
        openai_text("never reached"),
    )
    run = asyncio.create_task(harness.start(request(owner="waiter")))
    await wait_for(lambda: router_tools.CALLS, "the first call started")
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    receipts = sorted(harness.receipts.receipts, key=lambda receipt: receipt.seq)
    assert [(r.call_key, r.status.value) for r in receipts] == [
        ("t1c0", "failed"),
        ("t1c1", "skipped"),
        ("t1c2", "skipped"),
    ]
    assert all(r.error is not None and r.error.kind.value == "cancelled" for r in receipts)
    assert router_tools.CANCELLED == ["first"]
