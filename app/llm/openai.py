"""OpenAI-compatible chat completions: `POST {base_url}/chat/completions`.

Tools use the native `tools`/`tool_calls` format; tool results go back as
`role: tool` messages. Tool-call arguments are passed on as the raw string the
model gave, unparsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from app.llm.errors import LLMMalformedResponse
from app.llm.messages import Conversation, Message, ModelReply, ToolCall, ToolDefinition, Usage
from app.llm.profiles import ModelProfile
from app.llm.wire import (
    Piece,
    ProviderRequest,
    ToolsCache,
    decode_json,
    dumps,
    expect_list,
    expect_mapping,
    expect_text,
    kept_prefix,
    optional_text,
    spliced,
    token_count,
)

PROVIDER = "openai"


def build_request(
    profile: ModelProfile,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    api_key: str | None,
) -> ProviderRequest:
    headers = {"content-type": "application/json", "accept": "application/json"}
    if api_key is not None:
        headers["authorization"] = f"Bearer {api_key}"
    url = f"{profile.base_url}/chat/completions"
    if isinstance(messages, Conversation):
        return ProviderRequest(url, headers, _spliced_body(profile, messages, tools))
    body: dict[str, Any] = {
        "model": profile.model,
        "messages": [_message(message) for message in messages],
    }
    if tools:
        body["tools"] = _tools(tools)
    if profile.temperature is not None:
        body["temperature"] = profile.temperature
    if profile.max_tokens is not None:
        body["max_tokens"] = profile.max_tokens
    return ProviderRequest(url, headers, dumps(body))


class _Encoded:
    """The history encoded so far: its messages, and their JSON joined by commas."""

    __slots__ = ("joined", "messages", "tools")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.joined = bytearray()
        self.tools = ToolsCache()

    def history(self, history: Sequence[Message]) -> bytearray:
        if not kept_prefix(self.messages, history):
            self.messages, self.joined = [], bytearray()
        joined = self.joined
        for message in history[len(self.messages) :]:
            if joined:
                joined += b","
            joined += dumps(_message(message))
            self.messages.append(message)
        return joined


def _spliced_body(
    profile: ModelProfile, conversation: Conversation, tools: Sequence[ToolDefinition]
) -> bytes:
    """The body `build_request` gives for the same messages, spliced from kept fragments."""
    entry = conversation.cache.entries.get(PROVIDER)
    if not isinstance(entry, _Encoded):
        entry = conversation.cache.entries[PROVIDER] = _Encoded()
    history = entry.history(conversation.history)
    listed: list[Piece] = [b"["]
    for message in conversation.lead:
        if len(listed) > 1:
            listed.append(b",")
        listed.append(dumps(_message(message)))
    if history:
        if len(listed) > 1:
            listed.append(b",")
        listed.append(history)
    listed.append(b"]")
    fields: list[tuple[str, Sequence[Piece]]] = [
        ("model", (dumps(profile.model),)),
        ("messages", listed),
    ]
    if tools:
        fields.append(("tools", (entry.tools.get(tools, _encoded_tools),)))
    if profile.temperature is not None:
        fields.append(("temperature", (dumps(profile.temperature),)))
    if profile.max_tokens is not None:
        fields.append(("max_tokens", (dumps(profile.max_tokens),)))
    return spliced(fields)


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


def _tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [_tool(tool) for tool in tools]


def _encoded_tools(tools: Sequence[ToolDefinition]) -> bytes:
    return dumps(_tools(tools))


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
        if not isinstance(item, dict):
            _bad_call(index, item)
        call, function = item, item.get("function")
        if not isinstance(function, dict):
            _bad_call(index, item)
        call_id, name, arguments = call.get("id"), function.get("name"), function.get("arguments")
        if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
            _bad_call(index, item)
        if not isinstance(arguments, str):
            _bad_call(index, item)
        calls.append(ToolCall(call_id, name, arguments))
    return tuple(calls)


def _bad_call(index: int, item: Any) -> NoReturn:
    """The first problem of a tool call, named as the checks in order find it (the
    happy path checks types inline, without building these names)."""
    where = f"tool_calls[{index}]"
    call = expect_mapping(item, where)
    function = expect_mapping(call.get("function"), f"{where}.function")
    if not isinstance(function.get("arguments"), str):
        raise LLMMalformedResponse(f"{where}.function.arguments is not a string")
    expect_text(call.get("id"), f"{where}.id")
    expect_text(function.get("name"), f"{where}.function.name")
    raise AssertionError("a tool call failed a check it passes")  # pragma: no cover


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(
        input_tokens=token_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        output_tokens=token_count(usage.get("completion_tokens"), "usage.completion_tokens"),
    )
