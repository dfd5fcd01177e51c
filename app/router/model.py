"""Asking a model under the run's budgets: deadline, tokens, cost, and untrusted
replies. Each reply's tokens and cost go to the usage ledger before the run goes on."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from time import perf_counter

from app.engine.watchdog import WatchdogExpired
from app.llm.errors import LLMError, LLMMalformedResponse
from app.llm.messages import Message, ModelReply, ToolDefinition
from app.llm.profiles import ModelProfile
from app.router.outcome import Stop
from app.router.policies import short
from app.router.ports import UsageEntry
from app.router.recording import failure_entry, reply_entry
from app.router.session import RunSession

logger = logging.getLogger("toolloop.router")


async def ask(
    session: RunSession,
    profile: ModelProfile,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    role: str,
    *,
    budgets_checked: bool = False,
) -> ModelReply | str | None:
    """The reply; a stop; or None for a malformed reply (counted, to be retried).

    Transport faults were already retried by the client; what reaches here ends
    the run (`llm_error`). The call is bounded by the time the run has left.
    `budgets_checked`: the caller checked `session.budget_stop` just before (the
    router turn does, with the turn bound), so it is not checked again here.
    """
    if not budgets_checked:
        stop = session.budget_stop(router_turn=False)
        if stop is not None:
            return stop
    state = session.state
    if role == "router":
        state.turns += 1
    else:
        state.final_calls += 1
    started = perf_counter()
    try:
        with session.deadline_watch():
            reply = await session.kit.llm.complete(profile, messages, tools)
    except (WatchdogExpired, TimeoutError):
        session.replies.append(failure_entry(role, "timeout"))
        session.record("router.model_timeout", {"role": role, "profile": profile.name})
        return Stop.DEADLINE.value
    except LLMMalformedResponse as exc:
        session.replies.append(failure_entry(role, "malformed", exc.reason))
        state.count_malformed("malformed_reply")
        session.record(
            "router.malformed_reply",
            {"role": role, "profile": profile.name, "reason": short(exc.reason)},
        )
        return None
    except LLMError as exc:
        logger.warning("router run %s: the %s model failed: %s", session.identity.run_id, role, exc)
        state.error = short(exc.summary)
        session.replies.append(failure_entry(role, "error", state.error))
        session.record(
            "router.llm_error", {"role": role, "profile": profile.name, "error": state.error}
        )
        return Stop.LLM_ERROR.value
    latency_ms = round((perf_counter() - started) * 1000.0, 3)
    session.replies.append(reply_entry(role, reply, session.kit.redactors))
    usage = reply.usage
    prices = profile.prices
    cost = None if prices is None else prices.cost_nanos(usage.input_tokens, usage.output_tokens)
    state.add_usage(usage.input_tokens, usage.output_tokens, latency_ms, cost)
    identity = session.identity
    await session.kit.ledger.record(
        UsageEntry(
            identity.run_id,
            identity.owner,
            identity.caller,
            profile.name,
            role,
            usage.input_tokens,
            usage.output_tokens,
            cost,
        )
    )
    session.record(
        "router.model_turn",
        {
            "role": role,
            "turn": state.turns,
            "profile": profile.name,
            "tool_calls": [
                {"id": short(c.id, 100), "name": short(c.name, 100)} for c in reply.tool_calls
            ],
            "text_chars": len(reply.text),
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "latency_ms": latency_ms,
            "finish_reason": reply.finish_reason,
            "cost_nanos": cost,
        },
    )
    budgets = session.plan.budgets
    if budgets.max_tokens is not None and state.tokens > budgets.max_tokens:
        return Stop.MAX_TOKENS.value
    if budgets.max_cost_nanos is not None and (state.cost_nanos or 0) > budgets.max_cost_nanos:
        return Stop.MAX_COST.value
    return reply
