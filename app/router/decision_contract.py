"""The decision contract: is a tool call the model proposed one the run may make?

Everything the model sends is untrusted. In order, a proposal is rejected when
the tool is unknown to the run, hidden this turn (its `requires` did not hold
when the tool list was built), its arguments are not a JSON object or fail the
input schema, it repeats an earlier call exactly (same fingerprint), its
`requires` no longer hold at dispatch, or no call budget is left. Guardrails,
the streak bound and confirmation come after, in the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

import orjson

from app.contract.compiled import Tool
from app.engine.failures import BAD_ARGS, describe_problems
from app.foundation.canonical import fingerprint
from app.llm.messages import ToolCall
from app.router.gating import gate_problem
from app.router.policies import short
from app.router.state import RouterState

_MAX_NAME_CHARS = 100


class Rejected(StrEnum):
    UNKNOWN_TOOL = "unknown_tool"
    HIDDEN_TOOL = "hidden_tool"
    INVALID_JSON = "invalid_json"
    INVALID_ARGUMENTS = "invalid_arguments"
    DUPLICATE_CALL = "duplicate_call"
    BLOCKED = "blocked"
    BUDGET = "budget"
    SAME_TOOL_STREAK = "same_tool_streak"

    @property
    def malformed(self) -> bool:
        """Output the model should not have produced, counted as malformed."""
        return self not in (Rejected.DUPLICATE_CALL, Rejected.BUDGET, Rejected.SAME_TOOL_STREAK)


@dataclass(frozen=True, slots=True)
class Rejection:
    kind: Rejected
    reason: str

    def observation(self) -> str:
        return f"rejected: {self.kind.value}: {self.reason}"


class Candidate(NamedTuple):
    """A proposal that passed the check: its arguments validated with the tool's
    input schema, and their fingerprint. (Immutable; one is built per call.)"""

    tool: Tool
    args: dict[str, Any]
    fingerprint: str


@dataclass
class Batch:
    """Calls of one turn decided so far: for duplicates, `max_per_run` and the budget."""

    fingerprints: set[str] = field(default_factory=set)
    per_tool: dict[str, int] = field(default_factory=dict)
    calls: int = 0

    def take(self, candidate: Candidate) -> None:
        self.calls += 1
        tool_id = candidate.tool.id
        self.per_tool[tool_id] = self.per_tool.get(tool_id, 0) + 1


def shown_name(name: str) -> str:
    return repr(short(name, _MAX_NAME_CHARS))


def check_proposal(
    call: ToolCall,
    *,
    tools: Mapping[str, Tool],
    offered: Mapping[str, Tool],
    registered: Mapping[str, Tool],
    state: RouterState,
    batch: Batch,
    max_calls: int,
) -> Rejection | Candidate:
    tool = tools.get(call.name)
    if tool is None:
        return Rejection(
            Rejected.UNKNOWN_TOOL, f"no tool named {shown_name(call.name)} is available in this run"
        )
    if call.name not in offered:
        why = gate_problem(tool, state, registered) or "it was not offered this turn"
        return Rejection(Rejected.HIDDEN_TOOL, f"tool {call.name!r} is not available now: {why}")
    try:
        args = orjson.loads(call.arguments)
    except orjson.JSONDecodeError:
        return Rejection(Rejected.INVALID_JSON, "the arguments are not valid JSON")
    if not isinstance(args, dict):
        return Rejection(Rejected.INVALID_JSON, "the arguments must be one JSON object")
    if not tool.input_schema.is_valid(args):
        return Rejection(
            Rejected.INVALID_ARGUMENTS, describe_problems(BAD_ARGS, tool.input_schema, args)
        )
    exact = fingerprint(tool.id, args)
    if state.seen(exact) or exact in batch.fingerprints:
        return Rejection(
            Rejected.DUPLICATE_CALL,
            "exactly this call (same tool, same arguments) was already made in this run; "
            "its result is above",
        )
    if tool.requires is not None:  # (without requires, nothing is gated)
        blocked = gate_problem(tool, state, registered, batch.per_tool)
        if blocked is not None:
            return Rejection(Rejected.BLOCKED, f"tool {tool.id!r} may not run now: {blocked}")
    if state.calls + batch.calls >= max_calls:
        return Rejection(
            Rejected.BUDGET,
            f"the call budget is spent ({max_calls} calls); answer without more tool calls",
        )
    return Candidate(tool, args, exact)
