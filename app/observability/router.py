"""The router's metrics: what it calls to record turns, stops and model requests.

    record_router_turn(profile)        once per model decision
    record_router_stop(reason)         when a run stops before done (its `stopped_by`)
    record_router_run(status)          once per finished run: done|incomplete|pending|error
    record_shadow_verdict(guardrail, failed)  a shadow guardrail's would-be denial or failure
    MeteredLLMClient(client)           wraps the LLM client: requests, latency, tokens, cost

Profiles and stop reasons are bounded by configuration, not by an enum known
here, so they go through capped vocabularies: pass the category (a profile
name, a stop code such as `max_turns`), never free text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from time import perf_counter
from typing import Protocol

from app.foundation.money import NANOS_PER_UNIT
from app.llm.errors import (
    LLMConfigurationError,
    LLMMalformedResponse,
    LLMRequestError,
    LLMTransportError,
)
from app.llm.messages import Message, ModelReply, ToolDefinition, Usage
from app.llm.profiles import ModelProfile
from app.observability.labels import CappedVocabulary, Vocabulary
from app.observability.metrics import (
    GUARDRAIL_SHADOW,
    LLM_COST,
    LLM_DURATION,
    LLM_REQUESTS,
    LLM_TOKENS,
    ROUTER_RUNS,
    ROUTER_STOPS,
    ROUTER_TURNS,
)

PROFILES = CappedVocabulary(64)
GUARDRAILS = CappedVocabulary(64)
STOP_REASONS = CappedVocabulary(32)
RUN_STATUSES = Vocabulary(("done", "incomplete", "pending", "error"))
LLM_OUTCOMES = Vocabulary(
    (
        "ok",
        "configuration_error",
        "request_error",
        "transport_error",
        "malformed_response",
        "cancelled",
        "error",
    )
)


def record_router_turn(profile: str) -> None:
    ROUTER_TURNS.labels(PROFILES(profile)).inc()


def record_router_stop(reason: str) -> None:
    ROUTER_STOPS.labels(STOP_REASONS(reason)).inc()


def record_router_run(status: str) -> None:
    ROUTER_RUNS.labels(RUN_STATUSES(status)).inc()


def record_shadow_verdict(guardrail: str, *, failed: bool) -> None:
    GUARDRAIL_SHADOW.labels(GUARDRAILS(guardrail), "failed" if failed else "denied").inc()


def record_llm_request(
    profile: str,
    seconds: float,
    *,
    outcome: str = "ok",
    usage: Usage | None = None,
    cost_nanos: int | None = None,
) -> None:
    label = PROFILES(profile)
    if cost_nanos:
        LLM_COST.labels(label).inc(cost_nanos / NANOS_PER_UNIT)
    LLM_REQUESTS.labels(label, LLM_OUTCOMES(outcome)).inc()
    LLM_DURATION.labels(label).observe(seconds)
    if usage is not None:
        if usage.input_tokens > 0:
            LLM_TOKENS.labels(label, "input").inc(usage.input_tokens)
        if usage.output_tokens > 0:
            LLM_TOKENS.labels(label, "output").inc(usage.output_tokens)


def llm_outcome(exc: BaseException) -> str:
    if isinstance(exc, LLMConfigurationError):
        return "configuration_error"
    if isinstance(exc, LLMRequestError):
        return "request_error"
    if isinstance(exc, LLMTransportError):
        return "transport_error"
    if isinstance(exc, LLMMalformedResponse):
        return "malformed_response"
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "error"


class ChatModel(Protocol):
    async def complete(
        self,
        profile: ModelProfile,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
    ) -> ModelReply: ...


class MeteredLLMClient:
    """A `ChatModel` (such as `app.llm.client.LLMClient`) that records every request."""

    def __init__(self, client: ChatModel) -> None:
        self._client = client

    async def complete(
        self,
        profile: ModelProfile,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
    ) -> ModelReply:
        started = perf_counter()
        try:
            reply = await self._client.complete(profile, messages, tools)
        except BaseException as exc:
            record_llm_request(profile.name, perf_counter() - started, outcome=llm_outcome(exc))
            raise
        usage, prices = reply.usage, profile.prices
        cost = (
            None if prices is None else prices.cost_nanos(usage.input_tokens, usage.output_tokens)
        )
        record_llm_request(profile.name, perf_counter() - started, usage=usage, cost_nanos=cost)
        return reply
