"""A plan body as its plan, or one 422 naming every problem the body shows.

The well-formed body takes the fast path (`sequential_plan`, `parallel_plan`),
then the models. A body the models reject is rejected, but not with the shape's
errors alone: what could still be read of it (the owner, the calls with a tool)
goes through preflight, and both lists come back as one, each problem once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from app.api.body import parse_model
from app.api.schemas.plans import (
    ParallelPlanIn,
    SequentialPlanIn,
    parallel_plan,
    sequential_plan,
)
from app.api.schemas.readable_plans import readable_parallel, readable_sequential
from app.engine import ParallelPlan, ReadablePlan, SequentialPlan
from app.service.errors import InvalidRequest, ProblemItem
from app.service.plans.service import PlanService

P = TypeVar("P", SequentialPlan, ParallelPlan)


def sequential_from_body(data: Any, plans: PlanService) -> SequentialPlan:
    return sequential_plan(data) or _modelled(
        lambda: parse_model(SequentialPlanIn, data).to_plan(), readable_sequential, data, plans
    )


def parallel_from_body(data: Any, plans: PlanService) -> ParallelPlan:
    return parallel_plan(data) or _modelled(
        lambda: parse_model(ParallelPlanIn, data).to_plan(), readable_parallel, data, plans
    )


def _modelled(
    parse: Callable[[], P],
    readable: Callable[[Any], ReadablePlan | None],
    data: Any,
    plans: PlanService,
) -> P:
    try:
        return parse()
    except InvalidRequest as shape:
        parts = readable(data)
        if parts is None:
            raise
        items: list[ProblemItem] = list(shape.errors)
        items.extend(ProblemItem(each.pointer, each.message) for each in plans.problems_in(parts))
        raise InvalidRequest(shape.detail, errors=_each_once(items)) from None


def _each_once(items: Sequence[ProblemItem]) -> list[ProblemItem]:
    return list(dict.fromkeys(items))
