"""Whole-plan preflight (DESIGN invariant 4).

Every check runs and every problem is collected, each with an RFC 6901
pointer into the request body, before any call may run. Keys are opaque
strings: compared, never parsed.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

from app.contract.compiled import Contract, Tool
from app.engine.plan import ParallelPlan, PlanLimits, PlannedCall, SequentialPlan
from app.engine.projection import project_payload
from app.engine.requirements import unmet_requirements

AdmittedArgs = dict[str, Any]
A = TypeVar("A")

MAX_KEY_LENGTH = 256
# C0, DEL and C1: the characters Unicode names "Control" (category Cc).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class ProblemCode(StrEnum):
    """What kind of problem: a closed vocabulary for counting rejections by reason."""

    UNKNOWN_OWNER = "unknown_owner"
    UNKNOWN_TOOL = "unknown_tool"
    NOT_ALLOWED = "not_allowed"
    INVALID_ARGS = "invalid_args"
    DUPLICATE_KEY = "duplicate_key"
    LIMITS = "limits"
    REQUIRES = "requires"
    INVALID_REQUEST = "invalid_request"


@dataclass(frozen=True, slots=True)
class PlanProblem:
    pointer: str
    message: str
    code: ProblemCode = field(default=ProblemCode.INVALID_REQUEST, compare=False)


@dataclass(frozen=True, slots=True)
class PreflightResult(Generic[A]):
    """`admitted` holds the exact arguments to run, and is empty unless `ok`."""

    problems: list[PlanProblem]
    admitted: A

    @property
    def ok(self) -> bool:
        return not self.problems


SequentialPreflight = PreflightResult[tuple[AdmittedArgs, ...]]
ParallelPreflight = PreflightResult[tuple[tuple[AdmittedArgs, ...], ...]]


def preflight_sequential(
    plan: SequentialPlan, contract: Contract, limits: PlanLimits
) -> SequentialPreflight:
    check = _Checker(contract, plan.owner)
    admitted = check.calls("/calls", plan.calls, limits.max_sequential_calls)
    check.requirements(
        (("/calls", enumerate(call.tool for call in plan.calls)),), "before it in the sequence"
    )
    check.deadline(plan.deadline_s)
    return PreflightResult(check.problems, () if check.problems else admitted)


def preflight_parallel(
    plan: ParallelPlan, contract: Contract, limits: PlanLimits
) -> ParallelPreflight:
    check = _Checker(contract, plan.owner)
    cap = limits.max_concurrency_cap
    if not 1 <= plan.max_concurrency <= cap:
        check.add(
            "/max_concurrency",
            f"max_concurrency must be between 1 and {cap}",
            ProblemCode.LIMITS,
        )
    check.count("/lanes", "lane", len(plan.lanes), limits.max_lanes)
    check.unique("/lanes", "item_key", [lane.item_key for lane in plan.lanes])
    admitted = tuple(
        check.calls(f"/lanes/{index}/calls", lane.calls, limits.max_calls_per_lane)
        for index, lane in enumerate(plan.lanes)
    )
    check.requirements(
        (
            (f"/lanes/{index}/calls", enumerate(call.tool for call in lane.calls))
            for index, lane in enumerate(plan.lanes)
        ),
        "before it in its lane",
    )
    check.deadline(plan.deadline_s)
    return PreflightResult(check.problems, () if check.problems else admitted)


class _Checker:
    """`owner_name` None: the owner could not be read (`readable_preflight`); the
    calls' tools are checked, not against an owner's allowlist."""

    def __init__(self, contract: Contract, owner_name: str | None) -> None:
        self.contract = contract
        self.problems: list[PlanProblem] = []
        # Some call names a tool with `requires` (only then are they walked again).
        self.gated = False
        self.owner = None if owner_name is None else contract.owners.get(owner_name)
        self.allowed: frozenset[str] = frozenset()
        if self.owner is not None:
            self.allowed = frozenset(self.owner.runner_defaults.allowed_tools)
        elif owner_name is not None:
            self.add("/owner", f"unknown owner {owner_name!r}", ProblemCode.UNKNOWN_OWNER)

    def add(
        self, pointer: str, message: str, code: ProblemCode = ProblemCode.INVALID_REQUEST
    ) -> None:
        self.problems.append(PlanProblem(pointer, message, code))

    def count(self, pointer: str, noun: str, count: int, limit: int) -> None:
        if count == 0:
            self.add(pointer, f"at least one {noun} is required")
        elif count > limit:
            self.add(pointer, f"{count} {noun}s exceed the limit of {limit}", ProblemCode.LIMITS)

    def unique(self, pointer: str, name: str, keys: Sequence[str]) -> None:
        self.unique_at(pointer, name, enumerate(keys))

    def unique_at(self, pointer: str, name: str, keys: Iterable[tuple[int, str]]) -> None:
        """Each key well formed (`key_problem`) and used once; keys paired with their
        index in the body."""
        first_index: dict[str, int] = {}
        for index, key in keys:
            malformed = key_problem(name, key)
            if malformed is not None:
                self.add(f"{pointer}/{index}/{name}", malformed)
            first = first_index.setdefault(key, index)
            if first != index:
                self.add(
                    f"{pointer}/{index}/{name}",
                    f"duplicate {name} {key!r}: at indices {first} and {index}",
                    ProblemCode.DUPLICATE_KEY,
                )

    def deadline(self, deadline_s: float | None) -> None:
        if deadline_s is not None and not (math.isfinite(deadline_s) and deadline_s > 0):
            self.add("/deadline_s", "deadline_s must be a positive number of seconds")

    def calls(
        self, pointer: str, calls: Sequence[PlannedCall], limit: int
    ) -> tuple[AdmittedArgs, ...]:
        self.count(pointer, "call", len(calls), limit)
        self.unique(pointer, "call_key", [call.call_key for call in calls])
        return tuple(self.call(f"{pointer}/{index}", call) for index, call in enumerate(calls))

    def requirements(
        self, chains: Iterable[tuple[str, Iterable[tuple[int, str]]]], earlier: str
    ) -> None:
        """Each call's `requires`: `after` against the calls before it in its chain
        (a sequence or a lane), assumed to succeed; `max_per_run` against the calls
        of its tool anywhere before it in the plan, lanes in input order. A chain is
        its pointer and its calls' tool names, each with its index in the chain."""
        if not self.gated:
            return
        tools = self.contract.tools
        planned: Counter[str] = Counter()  # calls of each tool so far, in the whole plan
        for pointer, calls in chains:
            before: Counter[str] = Counter()  # calls of each tool so far, in this chain
            for index, name in calls:
                tool = tools.get(name)
                if tool is None:
                    continue
                if tool.requires is not None:
                    for reason in unmet_requirements(
                        tool, before.__getitem__, planned[tool.id], tools, earlier
                    ):
                        self.add(
                            f"{pointer}/{index}/tool",
                            f"tool {tool.id!r} may not run here: {reason}",
                            ProblemCode.REQUIRES,
                        )
                before[tool.id] += 1
                planned[tool.id] += 1

    def call(self, pointer: str, call: PlannedCall) -> AdmittedArgs:
        tool = self.tool(f"{pointer}/tool", call.tool)
        args, payload = call.args, call.payload
        if args is not None and payload is None:
            where, admitted = f"{pointer}/args", dict(args)
        elif payload is not None and args is None:
            if tool is None:
                return {}
            where, admitted = f"{pointer}/payload", project_payload(tool.input_schema, payload)
        else:
            self.add(pointer, "exactly one of args or payload is required")
            return {}
        if tool is not None:
            self.arguments(where, tool, admitted)
        return admitted

    def tool(self, pointer: str, name: str) -> Tool | None:
        tool = self.contract.tools.get(name)
        if tool is None:
            self.add(pointer, f"unknown tool {name!r}", ProblemCode.UNKNOWN_TOOL)
            return None
        if tool.requires is not None:
            self.gated = True
        if self.owner is not None:
            if tool.owner != self.owner.name:
                self.add(
                    pointer,
                    f"tool {name!r} belongs to owner {tool.owner!r}, not {self.owner.name!r}",
                    ProblemCode.NOT_ALLOWED,
                )
            elif name not in self.allowed:
                self.add(
                    pointer,
                    f"tool {name!r} is not in the allowed_tools of {self.owner.name!r}",
                    ProblemCode.NOT_ALLOWED,
                )
        return tool

    def arguments(self, pointer: str, tool: Tool, admitted: AdmittedArgs) -> None:
        schema = tool.input_schema
        if schema.is_valid(admitted):
            return
        found = schema.problems(admitted)
        if not found:
            self.add(
                pointer,
                f"arguments do not match the input schema of {tool.id!r}",
                ProblemCode.INVALID_ARGS,
            )
        for problem in found:
            self.add(pointer + problem.pointer, problem.message, ProblemCode.INVALID_ARGS)


def key_problem(name: str, key: str) -> str | None:
    """Why `key` cannot be a `call_key` or `item_key` (`name`), or None when it can:
    1 to 256 characters, none of them a control character."""
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        return f"{name} must be 1 to {MAX_KEY_LENGTH} characters, not {len(key)}"
    if _CONTROL.search(key) is not None:
        return f"{name} may not contain control characters"
    return None
