"""OpenAI-compatible chat completions: `POST {base_url}/chat/completions`.

Tools use the native `tools`/`tool_calls` format; tool results go back as
`role: tool` messages. Tool-call arguments are passed on as the raw string the
model gave, unparsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.llm.errors import LLMMalformedResponse
from app.llm.messages import Message, ModelReply, ToolCall, ToolDefinition, Usage
from app.llm.profiles import ModelProfile
from app.llm.wire import (
    ProviderRequest,
    decode_json,
    expect_list,
    expect_mapping,
    expect_text,
    optional_text,
    token_count,
)


def build_request(
    profile: ModelProfile,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    api_key: str | None,
) -> ProviderRequest:
    headers = {"content-type": "application/json", "accept": "application/json"}
    if api_key is not None:
        headers["authorization"] = f"Bearer {api_key}"
    body: dict[str, Any] = {
        "model": profile.model,
        "messages": [_message(message) for message in messages],
    }
    if tools:
        body["tools"] = [_tool(tool) for tool in tools]
    if profile.temperature is not None:
        body["temperature"] = profile.temperature
    if profile.max_tokens is not None:
        body["max_tokens"] = profile.max_tokens
    return ProviderRequest(f"{profile.base_url}/chat/completions", headers, body)


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def parse_response(body: bytes) -> ModelReply:
    data = expect_mapping(decode_json(body), "body")
    choices = expect_list(data.get("choices"), "choices")
    if not choices:
        raise LLMMalformedResponse("choices is empty")
    choice = expect_mapping(choices[0], "choices[0]")
    message = expect_mapping(choice.get("message"), "choices[0].message")
    text = optional_text(message.get("content"), "message.content") or ""
    raw_calls = message.get("tool_calls")
    calls = () if raw_calls is None else _tool_calls(expect_list(raw_calls, "message.tool_calls"))
    usage = data.get("usage")
    return ModelReply(
        text=text,
        tool_calls=calls,
        usage=_usage(None if usage is None else expect_mapping(usage, "usage")),
        finish_reason=optional_text(choice.get("finish_reason"), "finish_reason"),
    )


def _tool_calls(raw: list[Any]) -> tuple[ToolCall, ...]:
    calls = []
    for index, item in enumerate(raw):
        where = f"tool_calls[{index}]"
        call = expect_mapping(item, where)
        function = expect_mapping(call.get("function"), f"{where}.function")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            raise LLMMalformedResponse(f"{where}.function.arguments is not a string")
        calls.append(
            ToolCall(
                id=expect_text(call.get("id"), f"{where}.id"),
                name=expect_text(function.get("name"), f"{where}.function.name"),
                arguments=arguments,
            )
        )
    return tuple(calls)


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(
        input_tokens=token_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        output_tokens=token_count(usage.get("completion_tokens"), "usage.completion_tokens"),
    )
