"""Preflight of the parts of a plan that could be read from a body of the wrong shape.

A body that fails shape validation is rejected whatever else is wrong with it,
but the caller should learn every problem at once (DESIGN invariant 4): the
owner, tools, arguments, keys and `requires` of whatever parsed are checked as
in a whole preflight, each problem pointing where it would in the body. Only
that error path pays for this.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.contract.compiled import Contract
from app.engine.plan import PlanLimits, PlannedCall
from app.engine.preflight import PlanProblem, ProblemCode, _Checker


@dataclass(frozen=True, slots=True)
class ReadableCall:
    """A call whose `tool` could be read. `call` is None when its `args` or
    `payload` could not be (only its tool is checked then)."""

    index: int
    tool: str
    call_key: str | None
    call: PlannedCall | None


@dataclass(frozen=True, slots=True)
class ReadableChain:
    """A sequence or lane whose `calls` is a list of `length` items; `calls` holds
    the ones that could be read, in order."""

    pointer: str
    length: int
    calls: tuple[ReadableCall, ...]


@dataclass(frozen=True, slots=True)
class ReadablePlan:
    """What could be read; None (or nothing) where a part could not be.

    A parallel plan's chains are its lanes' calls; `lane_count` is the length of
    its `lanes` list and `item_keys` the readable ones, each with its lane's index."""

    owner: str | None
    chains: tuple[ReadableChain, ...]
    parallel: bool = False
    lane_count: int | None = None
    item_keys: tuple[tuple[int, str], ...] = ()
    max_concurrency: int | None = None
    deadline_s: float | None = None


def readable_problems(
    plan: ReadablePlan, contract: Contract, limits: PlanLimits
) -> list[PlanProblem]:
    """Every problem whole-plan preflight would report in the parts of `plan` it has."""
    check = _Checker(contract, plan.owner)
    parallel = plan.parallel
    call_limit = limits.max_calls_per_lane if parallel else limits.max_sequential_calls
    if plan.max_concurrency is not None and not (
        1 <= plan.max_concurrency <= limits.max_concurrency_cap
    ):
        check.add(
            "/max_concurrency",
            f"max_concurrency must be between 1 and {limits.max_concurrency_cap}",
            ProblemCode.LIMITS,
        )
    if plan.lane_count is not None:
        check.count("/lanes", "lane", plan.lane_count, limits.max_lanes)
    check.unique_at("/lanes", "item_key", plan.item_keys)
    for chain in plan.chains:
        check.count(chain.pointer, "call", chain.length, call_limit)
        check.unique_at(
            chain.pointer,
            "call_key",
            ((each.index, each.call_key) for each in chain.calls if each.call_key is not None),
        )
        for each in chain.calls:
            where = f"{chain.pointer}/{each.index}"
            if each.call is None:
                check.tool(f"{where}/tool", each.tool)
            else:
                check.call(where, each.call)
    check.requirements(
        (
            (chain.pointer, [(each.index, each.tool) for each in chain.calls])
            for chain in plan.chains
        ),
        "before it in its lane" if parallel else "before it in the sequence",
    )
    check.deadline(plan.deadline_s)
    return check.problems
