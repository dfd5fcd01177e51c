from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from app.contract import Contract, load_contract
from app.engine.plan import Lane, ParallelPlan, PlanLimits, PlannedCall, SequentialPlan
from app.engine.preflight import (
    PlanProblem,
    PreflightResult,
    preflight_parallel,
    preflight_sequential,
)

REGISTRY = """
subagents:
  worker-a:
    tools:
      transform:
        callable: tests.engine.preflight_tools:transform
        description: Transform one text.
        input_schema:
          type: object
          properties:
            text: {type: string}
            "a/b~c": {type: integer}
          required: [text]
          additionalProperties: false
        output_schema: {}
      echo:
        callable: tests.engine.preflight_tools:echo
        description: Echo anything.
        input_schema: {}
        output_schema: {}
      hidden:
        callable: tests.engine.preflight_tools:echo
        description: Registered but not allowed.
        input_schema: {type: object, required: [x]}
        output_schema: {}
    runner_defaults:
      allowed_tools: [transform, echo]
      max_calls: 4
      tool_timeout_s: 10
  worker-b:
    tools:
      foreign:
        callable: tests.engine.preflight_tools:echo
        description: Belongs to worker-b.
        input_schema: {type: object, required: [y]}
        output_schema: {}
    runner_defaults:
      allowed_tools: [foreign]
      max_calls: 4
      tool_timeout_s: 10
"""

LIMITS = PlanLimits()


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> Contract:
    path: Path = tmp_path_factory.mktemp("registry") / "registry.yaml"
    path.write_text(REGISTRY, encoding="utf-8")
    return load_contract([path], ["tests.engine.preflight_tools"])


def call(
    key: str,
    tool: str = "transform",
    args: dict[str, Any] | None = None,
    payload: dict[str, Any] | None = None,
) -> PlannedCall:
    if args is None and payload is None:
        args = {"text": key}
    return PlannedCall(call_key=key, tool=tool, args=args, payload=payload)


def sequential(
    contract: Contract,
    *calls: PlannedCall,
    owner: str = "worker-a",
    deadline_s: float | None = None,
    limits: PlanLimits = LIMITS,
) -> PreflightResult[Any]:
    plan = SequentialPlan(owner=owner, calls=calls, deadline_s=deadline_s)
    return preflight_sequential(plan, contract, limits)


def parallel(
    contract: Contract,
    *lanes: Lane,
    max_concurrency: int = 4,
    limits: PlanLimits = LIMITS,
) -> PreflightResult[Any]:
    plan = ParallelPlan(owner="worker-a", max_concurrency=max_concurrency, lanes=lanes)
    return preflight_parallel(plan, contract, limits)


def pointers(result: PreflightResult[Any]) -> list[str]:
    return [problem.pointer for problem in result.problems]


def only_problem(result: PreflightResult[Any]) -> PlanProblem:
    assert len(result.problems) == 1, result.problems
    return result.problems[0]


def test_valid_sequential_plan_admits_the_exact_arguments(contract: Contract) -> None:
    args = {"text": "x", "a/b~c": 1}
    result = sequential(contract, call("1", args=args), call("2", "echo", args={"any": [1]}))
    assert result.ok
    assert result.problems == []
    assert result.admitted == ({"text": "x", "a/b~c": 1}, {"any": [1]})
    assert result.admitted[0] is not args


def test_payload_is_projected_before_validation(contract: Contract) -> None:
    payload = {"text": "x", "trace_id": "t-1", "graph": {"big": True}}
    result = sequential(
        contract, call("1", payload=payload), call("2", "echo", payload={"whole": 1, "more": 2})
    )
    assert result.ok
    assert result.admitted == ({"text": "x"}, {"whole": 1, "more": 2})
    assert payload == {"text": "x", "trace_id": "t-1", "graph": {"big": True}}


def test_projected_payload_problems_point_into_the_payload(contract: Contract) -> None:
    result = sequential(contract, call("1", payload={"other": 1}), call("2", payload={"text": 3}))
    assert pointers(result) == ["/calls/0/payload", "/calls/1/payload/text"]
    assert "text" in result.problems[0].message
    assert result.admitted == ()


def test_unknown_owner(contract: Contract) -> None:
    problem = only_problem(sequential(contract, call("1"), owner="nobody"))
    assert problem == PlanProblem("/owner", "unknown owner 'nobody'")


def test_unknown_owner_still_checks_every_call(contract: Contract) -> None:
    result = sequential(contract, call("1", "missing"), call("2", args={}), owner="nobody")
    assert pointers(result) == ["/owner", "/calls/0/tool", "/calls/1/args"]


def test_unknown_tool_skips_its_schema_check_but_not_the_others(contract: Contract) -> None:
    result = sequential(
        contract,
        call("1", "missing", args={"not": "checked"}),
        call("2", args={"text": 5}),
        call("3", "missing", payload={"not": "checked"}),
    )
    assert result.problems == [
        PlanProblem("/calls/0/tool", "unknown tool 'missing'"),
        result.problems[1],
        PlanProblem("/calls/2/tool", "unknown tool 'missing'"),
    ]
    assert result.problems[1].pointer == "/calls/1/args/text"


def test_tool_of_another_owner_is_refused(contract: Contract) -> None:
    problem = only_problem(sequential(contract, call("1", "foreign", args={"y": 1})))
    assert problem == PlanProblem(
        "/calls/0/tool", "tool 'foreign' belongs to owner 'worker-b', not 'worker-a'"
    )


def test_tool_outside_allowed_tools_is_refused(contract: Contract) -> None:
    problem = only_problem(sequential(contract, call("1", "hidden", args={"x": 1})))
    assert problem == PlanProblem(
        "/calls/0/tool", "tool 'hidden' is not in the allowed_tools of 'worker-a'"
    )


def test_refused_registered_tool_still_has_its_arguments_checked(contract: Contract) -> None:
    result = sequential(contract, call("1", "hidden", args={}))
    assert pointers(result) == ["/calls/0/tool", "/calls/0/args"]


@pytest.mark.parametrize(
    "planned",
    [
        PlannedCall(call_key="1", tool="transform"),
        PlannedCall(call_key="1", tool="transform", args={"text": "x"}, payload={"text": "x"}),
    ],
)
def test_exactly_one_of_args_or_payload(contract: Contract, planned: PlannedCall) -> None:
    problem = only_problem(sequential(contract, planned))
    assert problem == PlanProblem("/calls/0", "exactly one of args or payload is required")


@pytest.mark.parametrize(
    ("args", "pointer"),
    [
        ({}, "/calls/0/args"),
        ({"text": 1}, "/calls/0/args/text"),
        ({"text": "x", "extra": 1}, "/calls/0/args"),
        ({"text": "x", "a/b~c": "not an integer"}, "/calls/0/args/a~1b~0c"),
    ],
)
def test_argument_problems_carry_schema_pointers(
    contract: Contract, args: dict[str, Any], pointer: str
) -> None:
    problem = only_problem(sequential(contract, call("1", args=args)))
    assert problem.pointer == pointer
    assert problem.message


def test_every_argument_problem_is_listed(contract: Contract) -> None:
    result = sequential(contract, call("1", args={"text": 1, "a/b~c": "x"}))
    assert sorted(pointers(result)) == ["/calls/0/args/a~1b~0c", "/calls/0/args/text"]


def test_duplicate_call_keys_name_both_indices(contract: Contract) -> None:
    result = sequential(contract, call("k"), call("other"), call("k"), call("k"))
    assert result.problems == [
        PlanProblem("/calls/2/call_key", "duplicate call_key 'k': at indices 0 and 2"),
        PlanProblem("/calls/3/call_key", "duplicate call_key 'k': at indices 0 and 3"),
    ]


def test_keys_are_opaque_strings(contract: Contract) -> None:
    result = sequential(contract, call("1"), call("01"), call(" 1"), call("/~0"), call("é"))
    assert result.ok


def test_empty_sequential_plan(contract: Contract) -> None:
    problem = only_problem(sequential(contract))
    assert problem == PlanProblem("/calls", "at least one call is required")


def test_sequential_call_limit(contract: Contract) -> None:
    limits = PlanLimits(max_sequential_calls=2)
    assert sequential(contract, call("1"), call("2"), limits=limits).ok
    problem = only_problem(sequential(contract, call("1"), call("2"), call("3"), limits=limits))
    assert problem == PlanProblem("/calls", "3 calls exceed the limit of 2")


@pytest.mark.parametrize("deadline_s", [0.0, -1.0, math.nan, math.inf])
def test_deadline_must_be_positive(contract: Contract, deadline_s: float) -> None:
    problem = only_problem(sequential(contract, call("1"), deadline_s=deadline_s))
    assert problem == PlanProblem("/deadline_s", "deadline_s must be a positive number of seconds")


def test_positive_deadline_is_accepted(contract: Contract) -> None:
    assert sequential(contract, call("1"), deadline_s=0.5).ok


def test_all_problems_are_collected_at_once(contract: Contract) -> None:
    result = sequential(
        contract,
        call("a", "missing"),
        call("b", args={}),
        PlannedCall(call_key="a", tool="echo"),
        call("d", "foreign", args={"y": 1}),
        owner="worker-a",
        deadline_s=-1,
    )
    assert pointers(result) == [
        "/calls/2/call_key",
        "/calls/0/tool",
        "/calls/1/args",
        "/calls/2",
        "/calls/3/tool",
        "/deadline_s",
    ]
    assert result.admitted == ()


def lane(item_key: str, *calls: PlannedCall) -> Lane:
    return Lane(item_key=item_key, calls=calls or (call("1"),))


def test_valid_parallel_plan_admits_per_lane(contract: Contract) -> None:
    result = parallel(
        contract,
        lane("a", call("1", args={"text": "x"}), call("2", "echo", payload={"p": 1})),
        lane("b", call("1", payload={"text": "y", "drop": True})),
    )
    assert result.ok
    assert result.admitted == (({"text": "x"}, {"p": 1}), ({"text": "y"},))


@pytest.mark.parametrize("max_concurrency", [0, -1, 1001])
def test_max_concurrency_bounds(contract: Contract, max_concurrency: int) -> None:
    problem = only_problem(parallel(contract, lane("a"), max_concurrency=max_concurrency))
    assert problem == PlanProblem("/max_concurrency", "max_concurrency must be between 1 and 1000")


@pytest.mark.parametrize("max_concurrency", [1, 1000])
def test_max_concurrency_edges_are_accepted(contract: Contract, max_concurrency: int) -> None:
    assert parallel(contract, lane("a"), max_concurrency=max_concurrency).ok


def test_empty_parallel_plan(contract: Contract) -> None:
    problem = only_problem(parallel(contract))
    assert problem == PlanProblem("/lanes", "at least one lane is required")


def test_lane_limit(contract: Contract) -> None:
    limits = PlanLimits(max_lanes=1)
    problem = only_problem(parallel(contract, lane("a"), lane("b"), limits=limits))
    assert problem == PlanProblem("/lanes", "2 lanes exceed the limit of 1")


def test_calls_per_lane_limit_and_empty_lane(contract: Contract) -> None:
    limits = PlanLimits(max_calls_per_lane=1)
    result = parallel(
        contract,
        lane("a", call("1"), call("2")),
        Lane(item_key="b", calls=()),
        limits=limits,
    )
    assert result.problems == [
        PlanProblem("/lanes/0/calls", "2 calls exceed the limit of 1"),
        PlanProblem("/lanes/1/calls", "at least one call is required"),
    ]


def test_duplicate_item_keys_name_both_indices(contract: Contract) -> None:
    problem = only_problem(parallel(contract, lane("x"), lane("y"), lane("x")))
    assert problem == PlanProblem("/lanes/2/item_key", "duplicate item_key 'x': at indices 0 and 2")


def test_call_keys_are_unique_within_a_lane_only(contract: Contract) -> None:
    result = parallel(contract, lane("a", call("1"), call("1")), lane("b", call("1")))
    assert result.problems == [
        PlanProblem("/lanes/0/calls/1/call_key", "duplicate call_key '1': at indices 0 and 1")
    ]


def test_call_problems_point_into_their_lane(contract: Contract) -> None:
    result = parallel(
        contract,
        lane("a"),
        lane("b", call("1"), call("2", "missing")),
        lane("c", call("1", args={"text": 2})),
    )
    assert pointers(result) == ["/lanes/1/calls/1/tool", "/lanes/2/calls/0/args/text"]
    assert result.admitted == ()


def test_parallel_problems_are_all_collected(contract: Contract) -> None:
    plan = ParallelPlan(
        owner="nobody",
        max_concurrency=0,
        lanes=(lane("a"), lane("a", call("1", "missing"))),
        deadline_s=0,
    )
    result = preflight_parallel(plan, contract, LIMITS)
    assert pointers(result) == [
        "/owner",
        "/max_concurrency",
        "/lanes/1/item_key",
        "/lanes/1/calls/0/tool",
        "/deadline_s",
    ]
