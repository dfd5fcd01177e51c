"""Each model request's tokens and cost go to the ledger; `max_cost` stops a run."""

from __future__ import annotations

from app.router.loop import Paused
from app.router.ports import UsageEntry
from app.router.request import Budgets
from app.router.request_checks import admit
from tests.router import router_tools
from tests.router.harness import PROFILES, RouterHarness, request
from tests.router.test_stops import assert_stopped
from tests.support.fake_llm import openai_calls, openai_text

PRICED = {"router_profile": "router-priced", "final_profile": "final-priced"}


async def test_every_model_request_goes_to_the_ledger_with_its_cost(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "1"}), prompt_tokens=100, completion_tokens=20),
        openai_text("enough", prompt_tokens=150, completion_tokens=5),
        openai_text("answer", prompt_tokens=50, completion_tokens=30),
    )

    result = await harness.start(request(**PRICED))

    run_id = result.outcome.run_id
    assert harness.ledger.entries == [
        UsageEntry(run_id, "agent", "tester", "router-priced", "router", 100, 20, 400),
        UsageEntry(run_id, "agent", "tester", "router-priced", "router", 150, 5, 350),
        UsageEntry(run_id, "agent", "tester", "final-priced", "final", 50, 30, 400),
    ]
    assert result.outcome.state["cost"] == "0.000001150"
    turns = harness.decisions.of("router.model_turn")
    assert [turn["cost_nanos"] for turn in turns] == [400, 350, 400]


async def test_a_profile_without_prices_records_tokens_and_no_cost(
    harness: RouterHarness,
) -> None:
    harness.model.script(openai_text("enough"), openai_text("answer"))

    result = await harness.start(request())

    assert [(e.input_tokens, e.output_tokens, e.cost_nanos) for e in harness.ledger.entries] == [
        (10, 5, None),
        (10, 5, None),
    ]
    assert result.outcome.state["cost"] is None


async def test_budget_max_cost_stops_after_the_request_that_spent_it(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "1"}), prompt_tokens=100, completion_tokens=20)
    )

    result = await harness.start(request(**PRICED, budgets={"max_cost_nanos": 399}))

    assert_stopped(result, "budget:max_cost")
    assert router_tools.CALLS == []
    assert len(harness.ledger.entries) == 1


async def test_budget_max_cost_is_checked_before_the_next_request(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": "1"}), prompt_tokens=100, completion_tokens=20)
    )

    result = await harness.start(request(**PRICED, budgets={"max_cost_nanos": 400}))

    assert_stopped(result, "budget:max_cost")
    assert router_tools.CALLS == [("echo", {"text": "1"})]
    assert len(harness.model.requests) == 1


def test_max_cost_needs_prices_on_both_profiles(harness: RouterHarness) -> None:
    problems, plan = admit(
        request(final_profile="final-priced", budgets=Budgets(max_cost_nanos=1000)),
        harness.contract,
        PROFILES,
        harness.limits,
    )

    assert plan is None
    assert [(p.pointer, p.message) for p in problems] == [
        (
            "/budgets/max_cost",
            "profile 'router' declares no prices; a cost budget needs prices on the router "
            "and final profiles",
        )
    ]


async def test_a_resumed_run_keeps_its_cost_and_its_cost_budget(harness: RouterHarness) -> None:
    harness.model.script(
        openai_calls(("c1", "publish", {"title": "t"}), prompt_tokens=100, completion_tokens=20)
    )
    paused = await harness.start(request(**PRICED, budgets={"max_cost_nanos": 700}))
    assert isinstance(paused, Paused)
    assert paused.outcome.state["cost"] == "0.000000400"
    harness.model.script(
        openai_text("published", prompt_tokens=100, completion_tokens=20),
        openai_text("never asked"),
    )

    result = await harness.resume(paused, (0, True, "fine"))

    assert_stopped(result, "budget:max_cost")
    assert result.outcome.state["cost"] == "0.000000800"
    assert [entry.cost_nanos for entry in harness.ledger.entries] == [400, 400]
