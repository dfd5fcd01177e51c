"""`requires` in preflight: `after` within a sequence or lane, `max_per_run` across the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.contract import Contract, load_contract
from app.engine.plan import Lane, ParallelPlan, PlanLimits, PlannedCall, SequentialPlan
from app.engine.preflight import (
    PlanProblem,
    PreflightResult,
    ProblemCode,
    preflight_parallel,
    preflight_sequential,
)

REGISTRY = """
subagents:
  worker-a:
    tools:
      fetch:
        callable: tests.engine.preflight_tools:echo
        description: Fetch something.
        input_schema: {}
        output_schema: {}
      check:
        callable: tests.engine.preflight_tools:echo
        description: Check something.
        input_schema: {}
        output_schema: {}
      publish:
        callable: tests.engine.preflight_tools:echo
        description: Needs a fetch and a check before it; twice per run at most.
        input_schema: {}
        output_schema: {}
        requires: {after: [fetch, check], max_per_run: 2}
      once:
        callable: tests.engine.preflight_tools:echo
        description: Once per run.
        input_schema: {}
        output_schema: {}
        requires: {max_per_run: 1}
    runner_defaults:
      allowed_tools: [fetch, check, publish, once]
      max_calls: 4
      tool_timeout_s: 10
"""

AFTER_FETCH = "it requires a successful 'fetch' call"
AFTER_CHECK = "it requires a successful 'check' call"
ONCE = "tool 'once' may not run here: it may run at most 1 time(s) per run"


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> Contract:
    path: Path = tmp_path_factory.mktemp("registry") / "registry.yaml"
    path.write_text(REGISTRY, encoding="utf-8")
    return load_contract([path], ["tests.engine.preflight_tools"])


def calls(*tools: str) -> tuple[PlannedCall, ...]:
    return tuple(PlannedCall(f"c{index}", tool, {}) for index, tool in enumerate(tools))


def sequential(contract: Contract, *tools: str) -> PreflightResult[Any]:
    plan = SequentialPlan(owner="worker-a", calls=calls(*tools))
    return preflight_sequential(plan, contract, PlanLimits())


def parallel(contract: Contract, *lanes: tuple[str, ...]) -> PreflightResult[Any]:
    plan = ParallelPlan(
        owner="worker-a",
        max_concurrency=4,
        lanes=tuple(Lane(f"lane-{index}", calls(*tools)) for index, tools in enumerate(lanes)),
    )
    return preflight_parallel(plan, contract, PlanLimits())


def found(result: PreflightResult[Any]) -> list[tuple[str, str]]:
    return [(problem.pointer, problem.message) for problem in result.problems]


def test_requirements_met_by_calls_before_it_pass(contract: Contract) -> None:
    result = sequential(contract, "check", "fetch", "publish", "publish")
    assert result.ok
    assert len(result.admitted) == 4


def test_after_must_come_before_it_in_the_sequence(contract: Contract) -> None:
    result = sequential(contract, "fetch", "publish", "check")

    assert found(result) == [
        (
            "/calls/1/tool",
            f"tool 'publish' may not run here: {AFTER_CHECK} before it in the sequence",
        )
    ]
    assert result.problems[0].code is ProblemCode.REQUIRES
    assert result.admitted == ()


def test_every_unmet_requirement_of_every_call_is_named(contract: Contract) -> None:
    result = sequential(contract, "publish", "fetch", "publish")

    assert [pointer for pointer, _ in found(result)] == [
        "/calls/0/tool",
        "/calls/0/tool",
        "/calls/2/tool",
    ]
    messages = [message for _, message in found(result)]
    assert AFTER_FETCH in messages[0]
    assert AFTER_CHECK in messages[1]
    assert AFTER_CHECK in messages[2]


def test_after_counts_only_calls_of_the_same_lane(contract: Contract) -> None:
    result = parallel(contract, ("fetch", "check"), ("publish",), ("check", "fetch", "publish"))

    assert [pointer for pointer, _ in found(result)] == [
        "/lanes/1/calls/0/tool",
        "/lanes/1/calls/0/tool",
    ]
    assert found(result)[0][1] == (
        f"tool 'publish' may not run here: {AFTER_FETCH} before it in its lane"
    )


def test_max_per_run_counts_the_calls_of_a_sequence(contract: Contract) -> None:
    result = sequential(contract, "once", "fetch", "once", "once")

    assert found(result) == [
        ("/calls/2/tool", ONCE),
        ("/calls/3/tool", ONCE),
    ]


def test_max_per_run_counts_across_lanes_and_points_at_each_call_beyond(
    contract: Contract,
) -> None:
    result = parallel(
        contract,
        ("fetch", "check", "publish"),
        ("once",),
        ("fetch", "check", "publish"),
        ("once", "fetch", "check", "publish"),
    )

    assert found(result) == [
        ("/lanes/3/calls/0/tool", ONCE),
        (
            "/lanes/3/calls/3/tool",
            "tool 'publish' may not run here: it may run at most 2 time(s) per run",
        ),
    ]


def test_requires_problems_come_with_the_other_problems(contract: Contract) -> None:
    plan = SequentialPlan(
        owner="worker-a",
        calls=(PlannedCall("k", "publish", {}), PlannedCall("k", "missing", {})),
    )
    result = preflight_sequential(plan, contract, PlanLimits())

    assert [problem.pointer for problem in result.problems] == [
        "/calls/1/call_key",
        "/calls/1/tool",
        "/calls/0/tool",
        "/calls/0/tool",
    ]
    assert result.problems[1] == PlanProblem("/calls/1/tool", "unknown tool 'missing'")
