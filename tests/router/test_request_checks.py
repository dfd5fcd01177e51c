"""Admission: every problem with its pointer; budgets and the allowlist only narrow."""

from __future__ import annotations

from typing import Any

import pytest

from app.router.limits import RouterLimits
from app.router.request_checks import admit
from tests.router.harness import PROFILES, RouterHarness, request


def problems(
    harness: RouterHarness, limits: RouterLimits | None = None, **changes: Any
) -> dict[str, str]:
    found, plan = admit(request(**changes), harness.contract, PROFILES, limits or RouterLimits())
    assert plan is None
    return {p.pointer: p.message for p in found}


def test_a_valid_request_is_admitted_with_its_budgets_filled_in(harness: RouterHarness) -> None:
    found, plan = admit(request(), harness.contract, PROFILES, RouterLimits(max_turns=9))
    assert found == []
    assert plan is not None
    assert (plan.budgets.max_calls, plan.budgets.max_turns) == (6, 9)
    assert plan.budgets.deadline_s == 600.0
    assert plan.budgets.max_tokens is None
    assert list(plan.tools) == [
        "lookup",
        "echo",
        "summarize",
        "explode",
        "publish",
        "big",
        "nap",
        "rendezvous",
    ]
    assert plan.request.budgets.max_calls == 6
    assert plan.request.allowed_tools == tuple(plan.tools)


def test_profiles_are_never_implied(harness: RouterHarness) -> None:
    found = problems(harness, router_profile="gpt-4", final_profile="")
    assert found["/router_profile"].startswith("unknown model profile 'gpt-4' (defined: ")
    assert found["/final_profile"].startswith("unknown model profile ''")


def test_budgets_may_only_narrow(harness: RouterHarness) -> None:
    limits = RouterLimits(max_turns=4, deadline_s=30.0, max_tokens=1000)
    found = problems(
        harness,
        limits,
        budgets={"max_calls": 7, "max_turns": 5, "deadline_s": 31.0, "max_tokens": 1001},
    )
    assert found == {
        "/budgets/max_calls": "7 exceeds the owner's max_calls (6); budgets may only narrow",
        "/budgets/max_turns": "5 exceeds the server's limit (4); budgets may only narrow",
        "/budgets/deadline_s": "31s exceeds the server's limit of 30s; budgets may only narrow",
        "/budgets/max_tokens": "1001 exceeds the server's limit (1000); budgets may only narrow",
    }


def test_the_allowlist_may_only_narrow(harness: RouterHarness) -> None:
    found = problems(harness, allowed_tools=["lookup", "unlisted", "foreign", "ghost", "lookup"])
    assert set(found) == {
        "/allowed_tools/1",
        "/allowed_tools/2",
        "/allowed_tools/3",
        "/allowed_tools/4",
    }
    assert "may only narrow" in found["/allowed_tools/1"]
    assert found["/allowed_tools/4"] == "tool 'lookup' is listed twice"
    assert problems(harness, allowed_tools=[]) == {
        "/allowed_tools": "at least one tool is required"
    }


def test_every_problem_is_listed_at_once(harness: RouterHarness) -> None:
    found = problems(
        harness,
        owner="agent",
        goal=" ",
        allowed_tools=["lookup", "echo"],
        steps=[
            {"call_key": "s", "tool": "lookup", "args": {"term": 1}},
            {"call_key": "s", "tool": "summarize", "args": {"text": "x"}},
            {"call_key": "p", "tool": "echo", "args": {}},
        ],
        guardrails=["allow_all", "ghost", "allow_all"],
        completion={"verify": "ghost", "max_attempts": 0},
        final_schema={"type": "nonsense"},
    )
    assert set(found) == {
        "/goal",
        "/steps/0/args/term",
        "/steps/1/call_key",
        "/steps/1/tool",
        "/steps/2/args",
        "/guardrails/1",
        "/guardrails/2",
        "/completion/max_attempts",
        "/completion/verify",
        "/final_schema",
    }
    assert found["/steps/1/tool"] == "tool 'summarize' is not allowed in this run"


def test_an_unknown_owner(harness: RouterHarness) -> None:
    assert problems(harness, owner="nobody") == {"/owner": "unknown owner 'nobody'"}


def test_steps_count_against_max_calls(harness: RouterHarness) -> None:
    steps = [{"call_key": str(i), "tool": "lookup", "args": {"term": str(i)}} for i in range(3)]
    found = problems(harness, steps=steps, budgets={"max_calls": 2})
    assert found == {"/steps": "3 steps exceed the limit of 2 (max_calls)"}


def test_a_tool_needing_confirmation_cannot_be_a_step(harness: RouterHarness) -> None:
    found = problems(harness, steps=[{"call_key": "s", "tool": "publish", "args": {"title": "t"}}])
    assert "requires confirmation" in found["/steps/0/tool"]


@pytest.mark.parametrize(
    ("params", "pointer", "message"),
    [
        ({}, "/completion/params/tools", "must be a non-empty list of tool ids"),
        ({"tools": []}, "/completion/params/tools", "must be a non-empty list of tool ids"),
        ({"tools": ["unlisted"]}, "/completion/params/tools/0", "is not allowed in this run"),
        ({"tools": ["echo", "echo"]}, "/completion/params/tools/1", "is listed twice"),
        ({"tools": ["echo"], "x": 1}, "/completion/params/x", "unknown parameter"),
    ],
)
def test_builtin_verifier_parameters(
    harness: RouterHarness, params: dict[str, Any], pointer: str, message: str
) -> None:
    completion = {"verify": "builtin:tools_succeeded", "max_attempts": 1, "params": params}
    assert message in problems(harness, completion=completion)[pointer]


def test_registered_verifiers_take_no_parameters(harness: RouterHarness) -> None:
    completion = {"verify": "never_done", "max_attempts": 1, "params": {"a": 1}}
    assert "/completion/params" in problems(harness, completion=completion)


def test_max_attempts_is_capped(harness: RouterHarness) -> None:
    completion = {"verify": "never_done", "max_attempts": 6}
    found = problems(harness, completion=completion)
    assert found == {"/completion/max_attempts": "max_attempts must be between 1 and 5"}
