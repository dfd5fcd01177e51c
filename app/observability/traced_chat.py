"""A `chat {model}` CLIENT span per model request, with the GenAI conventions'
model, provider and token usage. Messages are never put on the span."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from app.llm.messages import Message, ModelReply, ToolDefinition
from app.llm.profiles import ModelProfile
from app.observability.router import ChatModel, llm_outcome


class TracedChatModel:
    def __init__(self, model: ChatModel, tracer: Tracer) -> None:
        self._model = model
        self._tracer = tracer

    async def complete(
        self,
        profile: ModelProfile,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
    ) -> ModelReply:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": profile.provider,
            "gen_ai.request.model": profile.model,
            "toolloop.model_profile": profile.name,
        }
        if profile.temperature is not None:
            attributes["gen_ai.request.temperature"] = profile.temperature
        if profile.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = profile.max_tokens
        with self._tracer.start_as_current_span(
            f"chat {profile.model}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                reply = await self._model.complete(profile, messages, tools)
            except BaseException as exc:
                span.set_attribute("error.type", llm_outcome(exc))
                span.set_status(Status(StatusCode.ERROR))
                raise
            span.set_attribute("gen_ai.usage.input_tokens", reply.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", reply.usage.output_tokens)
            if reply.finish_reason is not None:
                span.set_attribute("gen_ai.response.finish_reasons", [reply.finish_reason])
            return reply
