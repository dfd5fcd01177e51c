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
    """The history encoded so far (its messages, and their JSON joined by commas),
    and the body's frame: the members around the messages array, encoded."""

    __slots__ = ("frame", "frame_key", "joined", "messages", "tools")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.joined = bytearray()
        self.tools = ToolsCache()
        self.frame_key: tuple[object, object] = (None, None)
        self.frame = (b"", b"")

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

    def framed(self, profile: ModelProfile, tools: Sequence[ToolDefinition]) -> tuple[bytes, bytes]:
        """What comes before the messages array's items and what comes after them,
        kept while the profile (immutable) and the tools' encoding are the same."""
        encoded = self.tools.get(tools, _encoded_tools) if tools else None
        profile_kept, tools_kept = self.frame_key
        if profile is profile_kept and encoded is tools_kept:
            return self.frame
        head = b'{"model":' + dumps(profile.model) + b',"messages":['
        tail = [b"]"]
        if encoded is not None:
            tail += (b',"tools":', encoded)
        if profile.temperature is not None:
            tail += (b',"temperature":', dumps(profile.temperature))
        if profile.max_tokens is not None:
            tail += (b',"max_tokens":', dumps(profile.max_tokens))
        tail.append(b"}")
        self.frame_key, self.frame = (profile, encoded), (head, b"".join(tail))
        return self.frame


def _spliced_body(
    profile: ModelProfile, conversation: Conversation, tools: Sequence[ToolDefinition]
) -> bytes:
    """The body `build_request` gives for the same messages, spliced from kept fragments."""
    entry = conversation.cache.entries.get(PROVIDER)
    if not isinstance(entry, _Encoded):
        entry = conversation.cache.entries[PROVIDER] = _Encoded()
    history = entry.history(conversation.history)
    head, tail = entry.framed(profile, tools)
    parts: list[Piece] = [head]
    for message in conversation.lead:
        if len(parts) > 1:
            parts.append(b",")
        parts.append(dumps(_message(message)))
    if history:
        if len(parts) > 1:
            parts.append(b",")
        parts.append(history)
    parts.append(tail)
    return b"".join(parts)


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
    # Types are checked inline; the named checks (`expect_*`) run only to raise.
    data = decode_json(body)
    if not isinstance(data, dict):
        expect_mapping(data, "body")
    choices = data.get("choices")
    if not isinstance(choices, list):
        expect_list(choices, "choices")
    if not choices:
        raise LLMMalformedResponse("choices is empty")
    choice = choices[0]
    if not isinstance(choice, dict):
        expect_mapping(choice, "choices[0]")
    message = choice.get("message")
    if not isinstance(message, dict):
        expect_mapping(message, "choices[0].message")
    text = message.get("content")
    if text is None:
        text = ""
    elif not isinstance(text, str):
        optional_text(text, "message.content")
    raw_calls = message.get("tool_calls")
    if raw_calls is None:
        calls: tuple[ToolCall, ...] = ()
    elif isinstance(raw_calls, list):
        calls = _tool_calls(raw_calls)
    else:
        calls = _tool_calls(expect_list(raw_calls, "message.tool_calls"))  # raises
    usage = data.get("usage")
    if usage is None:
        counted = _NO_USAGE
    else:
        if not isinstance(usage, dict):
            expect_mapping(usage, "usage")
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if type(prompt) is int and type(completion) is int and prompt >= 0 and completion >= 0:
            counted = Usage(prompt, completion)
        else:
            counted = _usage(usage)
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        optional_text(finish, "finish_reason")
    return ModelReply(text, calls, counted, finish)


_NO_USAGE = Usage()


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
