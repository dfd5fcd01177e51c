"""A router run as the caller asked for it, before admission."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Budgets:
    """Each budget may only narrow: `max_calls` the owner's runner defaults, the rest
    the server limits. None takes the owner's or the server's value."""

    max_calls: int | None = None
    max_turns: int | None = None
    deadline_s: float | None = None
    max_tokens: int | None = None
    # Nano-units (`app.foundation.money`); needs prices on both profiles.
    max_cost_nanos: int | None = None


@dataclass(frozen=True, slots=True)
class Step:
    call_key: str
    tool: str
    args: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    verify: str
    max_attempts: int
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RouterRequest:
    owner: str
    goal: str
    router_profile: str
    final_profile: str
    context: Mapping[str, Any] = field(default_factory=dict)
    final_schema: Mapping[str, Any] | None = None
    budgets: Budgets = field(default_factory=Budgets)
    steps: tuple[Step, ...] = ()
    allowed_tools: tuple[str, ...] | None = None
    guardrails: tuple[str, ...] = ()
    completion: CompletionRequest | None = None

    def to_json(self) -> dict[str, Any]:
        completion = self.completion
        return {
            "owner": self.owner,
            "goal": self.goal,
            "router_profile": self.router_profile,
            "final_profile": self.final_profile,
            "context": dict(self.context),
            "final_schema": None if self.final_schema is None else dict(self.final_schema),
            "budgets": {
                "max_calls": self.budgets.max_calls,
                "max_turns": self.budgets.max_turns,
                "deadline_s": self.budgets.deadline_s,
                "max_tokens": self.budgets.max_tokens,
                "max_cost_nanos": self.budgets.max_cost_nanos,
            },
            "steps": [
                {"call_key": s.call_key, "tool": s.tool, "args": dict(s.args)} for s in self.steps
            ],
            "allowed_tools": None if self.allowed_tools is None else list(self.allowed_tools),
            "guardrails": list(self.guardrails),
            "completion": None
            if completion is None
            else {
                "verify": completion.verify,
                "max_attempts": completion.max_attempts,
                "params": dict(completion.params),
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RouterRequest:
        budgets = data["budgets"]
        completion = data["completion"]
        allowed = data["allowed_tools"]
        return cls(
            owner=data["owner"],
            goal=data["goal"],
            router_profile=data["router_profile"],
            final_profile=data["final_profile"],
            context=data["context"],
            final_schema=data["final_schema"],
            budgets=Budgets(**budgets),
            steps=tuple(Step(**step) for step in data["steps"]),
            allowed_tools=None if allowed is None else tuple(allowed),
            guardrails=tuple(data["guardrails"]),
            completion=None if completion is None else CompletionRequest(**completion),
        )
