"""The plan routes' one-pass reading of well-formed bodies agrees with the models."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.body import parse_model
from app.api.schemas.plans import (
    ParallelPlanIn,
    SequentialPlanIn,
    parallel_plan,
    sequential_plan,
)
from app.service.errors import InvalidRequest

CALL = {"call_key": "c1", "tool": "transform", "args": {"text": "x"}}

WELL_FORMED_SEQUENTIAL: list[dict[str, Any]] = [
    {"owner": "worker-a", "calls": [CALL]},
    {"owner": "", "calls": []},
    {
        "owner": "worker-a",
        "calls": [CALL, {"call_key": "c2", "tool": "t", "payload": {"a": [1, {"b": None}]}}],
        "context": {"trace_id": "t-1"},
        "deadline_s": 2.5,
    },
    {"owner": "w", "calls": [{"call_key": "c", "tool": "t", "args": None, "payload": None}]},
    {"owner": "w", "calls": [CALL], "deadline_s": None, "context": {}},
]

# Not taken by the one-pass reading: the models decide (and report every problem).
OTHER_SEQUENTIAL: list[Any] = [
    [],
    "plan",
    {"calls": [CALL]},
    {"owner": "w"},
    {"owner": "w", "calls": [CALL], "extra": 1},
    {"owner": 1, "calls": [CALL]},
    {"owner": "w", "calls": {"c1": CALL}},
    {"owner": "w", "calls": [CALL, "call"]},
    {"owner": "w", "calls": [{"tool": "t"}]},
    {"owner": "w", "calls": [{"call_key": 1, "tool": "t"}]},
    {"owner": "w", "calls": [{"call_key": "c", "tool": "t", "args": [1]}]},
    {"owner": "w", "calls": [{"call_key": "c", "tool": "t", "payload": "p"}]},
    {"owner": "w", "calls": [{**CALL, "extra": 1}]},
    {"owner": "w", "calls": [CALL], "context": []},
    {"owner": "w", "calls": [CALL], "deadline_s": 3},
    {"owner": "w", "calls": [CALL], "deadline_s": "3"},
    {"owner": "w", "calls": [CALL], "deadline_s": True},
]


@pytest.mark.parametrize("body", WELL_FORMED_SEQUENTIAL)
def test_a_well_formed_sequential_body_reads_as_the_model_reads_it(body: dict[str, Any]) -> None:
    assert sequential_plan(body) == parse_model(SequentialPlanIn, body).to_plan()


@pytest.mark.parametrize("body", OTHER_SEQUENTIAL)
def test_any_other_sequential_body_is_left_to_the_model(body: Any) -> None:
    assert sequential_plan(body) is None
    try:
        expected = parse_model(SequentialPlanIn, body).to_plan()
    except InvalidRequest:
        return
    # Accepted by the model after all (an int deadline): the route still gets its plan.
    assert expected.owner == "w"


LANE = {"item_key": "a", "calls": [CALL]}


@pytest.mark.parametrize(
    "body",
    [
        {"owner": "worker-a", "max_concurrency": 8, "lanes": [LANE]},
        {"owner": "w", "max_concurrency": 1, "lanes": [], "context": {"k": 1}, "deadline_s": 1.0},
        {"owner": "w", "max_concurrency": 2, "lanes": [LANE, {"item_key": "b", "calls": []}]},
    ],
)
def test_a_well_formed_parallel_body_reads_as_the_model_reads_it(body: dict[str, Any]) -> None:
    assert parallel_plan(body) == parse_model(ParallelPlanIn, body).to_plan()


@pytest.mark.parametrize(
    "body",
    [
        {"owner": "w", "lanes": [LANE]},
        {"owner": "w", "max_concurrency": 8.0, "lanes": [LANE]},
        {"owner": "w", "max_concurrency": True, "lanes": [LANE]},
        {"owner": "w", "max_concurrency": 8, "lanes": LANE},
        {"owner": "w", "max_concurrency": 8, "lanes": [{"calls": [CALL]}]},
        {"owner": "w", "max_concurrency": 8, "lanes": [{**LANE, "extra": 1}]},
        {"owner": "w", "max_concurrency": 8, "lanes": [{"item_key": "a", "calls": [{}]}]},
        {"owner": "w", "max_concurrency": 8, "lanes": [LANE], "calls": []},
    ],
)
def test_any_other_parallel_body_is_left_to_the_model(body: Any) -> None:
    assert parallel_plan(body) is None
