"""Prompt assembly: the formal prompt files filled with the run's live state.

The system prompt is rendered again before every router turn (budgets left,
visible tools); the conversation after it is the run's history, which the
model client encodes once per message (`app.llm.messages.Conversation`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.contract.compiled import Tool
from app.llm.messages import Conversation, Message, ToolDefinition, WireCache
from app.router.observations import render, to_json_text
from app.router.session import RunSession


@dataclass(frozen=True, slots=True)
class Offer:
    """The tools offered on a turn, in the forms a request needs. Built when the
    offered set changes (it changes only when `requires` gating does), not per turn:
    the same tuple of definitions lets the model client reuse its encoding."""

    tools: Mapping[str, Tool]
    definitions: tuple[ToolDefinition, ...]
    listing: str  # the system prompt's `tools` value


def offer(offered: Mapping[str, Tool]) -> Offer:
    return Offer(
        offered,
        tool_definitions(offered),
        to_json_text(
            [{"name": t.id, "description": t.description} for t in offered.values()], indent=True
        ),
    )


def tool_definitions(offered: Mapping[str, Tool]) -> tuple[ToolDefinition, ...]:
    return tuple(
        ToolDefinition(tool.id, tool.description, dict(tool.input_schema.source))
        for tool in offered.values()
    )


def task_message(session: RunSession) -> Message:
    request = session.plan.request
    return Message.user(
        session.kit.prompts.render(
            "router.task",
            goal=request.goal,
            context=to_json_text(request.context, indent=True),
            observations=render(session.state.observations),
        )
    )


def router_messages(
    session: RunSession, offered: Offer, history: list[Message], cache: WireCache
) -> Conversation:
    """The system prompt, rendered for this turn, then the run's history."""
    plan, state = session.plan, session.state
    budgets = plan.budgets
    left = {
        "calls_left": max(0, budgets.max_calls - state.calls),
        "turns_left": max(0, budgets.max_turns - state.turns),
        "seconds_left": round(max(0.0, session.seconds_left()), 1),
        "tokens_left": None
        if budgets.max_tokens is None
        else max(0, budgets.max_tokens - state.tokens),
    }
    system = session.kit.prompts.render(
        "router.system",
        owner=plan.owner.name,
        budgets=to_json_text(left, indent=True),
        tools=offered.listing,
    )
    return Conversation((Message.system(system),), history, cache)


def completion_retry(session: RunSession, reason: str, max_attempts: int) -> Message:
    return Message.user(
        session.kit.prompts.render(
            "router.completion_retry",
            reason=reason,
            attempt=str(session.state.attempts),
            max_attempts=str(max_attempts),
        )
    )


def started_detail(session: RunSession) -> dict[str, Any]:
    """What the run was asked to do, recorded as its first decision."""
    plan, budgets, completion = session.plan, session.plan.budgets, session.plan.completion
    return {
        "owner": plan.owner.name,
        "router_profile": plan.router_profile.name,
        "final_profile": plan.final_profile.name,
        "budgets": {
            "max_calls": budgets.max_calls,
            "max_turns": budgets.max_turns,
            "deadline_s": budgets.deadline_s,
            "max_tokens": budgets.max_tokens,
        },
        "allowed_tools": list(plan.tools),
        "guardrails": [g.name for g in plan.guardrails],
        "completion": None
        if completion is None
        else {"verify": completion.verifier.name, "max_attempts": completion.max_attempts},
        "final_schema": plan.final_schema is not None,
        "steps": len(plan.request.steps),
        "prompts": session.kit.prompts.versions(),
    }
