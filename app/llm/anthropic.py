"""Anthropic messages API: `POST {base_url}/v1/messages`.

System messages become the top-level `system` prompt (joined in order); tool
results go back as user turns holding `tool_result` blocks, and consecutive
turns of one role are merged, as the API expects. A `tool_use` block's `input`
object is serialised to JSON text so callers see the same `ToolCall` shape for
every provider.

The API requires `max_tokens`; when a profile leaves it unset, requests send
DEFAULT_MAX_TOKENS (4096, an output budget every current model accepts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from app.llm.errors import LLMMalformedResponse, LLMRequestError
from app.llm.messages import Message, ModelReply, ToolCall, ToolDefinition, Usage
from app.llm.profiles import ModelProfile
from app.llm.wire import (
    ProviderRequest,
    decode_json,
    encode_json,
    expect_list,
    expect_mapping,
    expect_text,
    optional_text,
    token_count,
)

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


def build_request(
    profile: ModelProfile,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    api_key: str | None,
) -> ProviderRequest:
    headers = {
        "content-type": "application/json",
        "accept": "application/json",
        "anthropic-version": API_VERSION,
    }
    if api_key is not None:
        headers["x-api-key"] = api_key
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    body: dict[str, Any] = {
        "model": profile.model,
        "max_tokens": profile.max_tokens if profile.max_tokens is not None else DEFAULT_MAX_TOKENS,
        "messages": _turns(messages),
    }
    if system:
        body["system"] = system
    if tools:
        body["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            for tool in tools
        ]
    if profile.temperature is not None:
        body["temperature"] = profile.temperature
    return ProviderRequest(f"{profile.base_url}/v1/messages", headers, body)


def _turns(messages: Sequence[Message]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        # The API wants a user turn's tool_result blocks before any text.
        turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return turns


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}
        ]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)})
    return blocks


def _input(call: ToolCall) -> Any:
    try:
        value = orjson.loads(call.arguments)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise LLMRequestError(
            f"tool call {call.id!r} ({call.name}): arguments are not a JSON object, "
            "which the Anthropic messages API requires"
        )
    return value


def parse_response(body: bytes) -> ModelReply:
    data = expect_mapping(decode_json(body), "body")
    content = expect_list(data.get("content"), "content")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, item in enumerate(content):
        where = f"content[{index}]"
        block = expect_mapping(item, where)
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise LLMMalformedResponse(f"{where}.text is not a string")
            texts.append(text)
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=expect_text(block.get("id"), f"{where}.id"),
                    name=expect_text(block.get("name"), f"{where}.name"),
                    arguments=encode_json(expect_mapping(block.get("input"), f"{where}.input")),
                )
            )
        elif not isinstance(kind, str):
            raise LLMMalformedResponse(f"{where}.type is not a string")
        # Other block kinds (thinking, ...) carry nothing the router acts on.
    usage = data.get("usage")
    return ModelReply(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=_usage(None if usage is None else expect_mapping(usage, "usage")),
        finish_reason=optional_text(data.get("stop_reason"), "stop_reason"),
    )


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(
        input_tokens=token_count(usage.get("input_tokens"), "usage.input_tokens"),
        output_tokens=token_count(usage.get("output_tokens"), "usage.output_tokens"),
    )
