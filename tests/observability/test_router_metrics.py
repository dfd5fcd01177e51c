"""The router's recording API and the metered LLM client."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from app.llm.errors import LLMTransportError
from app.llm.messages import Message, ModelReply, ToolDefinition, Usage
from app.llm.prices import Prices
from app.llm.profiles import ModelProfile
from app.observability.router import (
    MeteredLLMClient,
    record_router_run,
    record_router_stop,
    record_router_turn,
)
from tests.observability.metrics_reading import value

PROFILE = ModelProfile(
    name="router-test", provider="openai", base_url="http://127.0.0.1:9/v1", model="m"
)


class FakeLLM:
    def __init__(self, reply: ModelReply | None = None, error: Exception | None = None) -> None:
        self.reply = reply
        self.error = error

    async def complete(
        self,
        profile: ModelProfile,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
    ) -> ModelReply:
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        return self.reply


async def test_a_successful_request_counts_latency_and_tokens() -> None:
    ok = value("toolloop_llm_requests_total", profile="router-test", outcome="ok")
    seen = value("toolloop_llm_request_duration_seconds_count", profile="router-test")
    tokens_in = value("toolloop_llm_tokens_total", profile="router-test", direction="input")
    tokens_out = value("toolloop_llm_tokens_total", profile="router-test", direction="output")
    client = MeteredLLMClient(FakeLLM(ModelReply("hi", usage=Usage(12, 5))))

    reply = await client.complete(PROFILE, [Message.user("hello")])

    assert reply.text == "hi"
    assert value("toolloop_llm_requests_total", profile="router-test", outcome="ok") == ok + 1
    assert value("toolloop_llm_request_duration_seconds_count", profile="router-test") == seen + 1
    assert value("toolloop_llm_tokens_total", profile="router-test", direction="input") == (
        tokens_in + 12
    )
    assert value("toolloop_llm_tokens_total", profile="router-test", direction="output") == (
        tokens_out + 5
    )


async def test_a_priced_request_counts_its_cost_in_the_prices_unit() -> None:
    priced = replace(PROFILE, name="priced-test", prices=Prices(input_nanos=150, output_nanos=600))
    before = value("toolloop_llm_cost_total", profile="priced-test")
    unpriced = value("toolloop_llm_cost_total", profile="router-test")
    reply = ModelReply("hi", usage=Usage(1_000, 500))

    await MeteredLLMClient(FakeLLM(reply)).complete(priced, [Message.user("hello")])
    await MeteredLLMClient(FakeLLM(reply)).complete(PROFILE, [Message.user("hello")])

    assert value("toolloop_llm_cost_total", profile="priced-test") == pytest.approx(
        before + 0.00045
    )
    assert value("toolloop_llm_cost_total", profile="router-test") == unpriced


async def test_a_failed_request_counts_under_its_error_category() -> None:
    before = value("toolloop_llm_requests_total", profile="router-test", outcome="transport_error")
    error = LLMTransportError(
        profile="router-test", url="http://x", attempts=4, status=503, cause="HTTP 503"
    )
    client = MeteredLLMClient(FakeLLM(error=error))

    with pytest.raises(LLMTransportError):
        await client.complete(PROFILE, [Message.user("hello")])

    assert value(
        "toolloop_llm_requests_total", profile="router-test", outcome="transport_error"
    ) == (before + 1)


def test_turns_stops_and_runs_are_counted() -> None:
    turns = value("toolloop_router_turns_total", profile="router-test")
    stops = value("toolloop_router_stops_total", reason="max_turns")
    done = value("toolloop_router_runs_total", status="done")

    record_router_turn("router-test")
    record_router_turn("router-test")
    record_router_stop("max_turns")
    record_router_run("done")

    assert value("toolloop_router_turns_total", profile="router-test") == turns + 2
    assert value("toolloop_router_stops_total", reason="max_turns") == stops + 1
    assert value("toolloop_router_runs_total", status="done") == done + 1


def test_free_text_never_becomes_a_label() -> None:
    other_stops = value("toolloop_router_stops_total", reason="other")
    other_runs = value("toolloop_router_runs_total", status="other")

    record_router_stop("the verifier said: lookup failed for user 42")
    record_router_run("whatever the model said")

    assert value("toolloop_router_stops_total", reason="other") == other_stops + 1
    assert value("toolloop_router_runs_total", status="other") == other_runs + 1
