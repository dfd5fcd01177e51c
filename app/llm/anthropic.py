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
from app.llm.messages import Conversation, Message, ModelReply, ToolCall, ToolDefinition, Usage
from app.llm.profiles import ModelProfile
from app.llm.wire import (
    Piece,
    ProviderRequest,
    ToolsCache,
    decode_json,
    dumps,
    encode_json,
    expect_list,
    expect_mapping,
    expect_text,
    kept_prefix,
    optional_text,
    spliced,
    token_count,
)

PROVIDER = "anthropic"
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
    url = f"{profile.base_url}/v1/messages"
    if isinstance(messages, Conversation) and all(m.role == "system" for m in messages.lead):
        return ProviderRequest(url, headers, _spliced_body(profile, messages, tools))
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    body: dict[str, Any] = {
        "model": profile.model,
        "max_tokens": _max_tokens(profile),
        "messages": _turns(messages),
    }
    if system:
        body["system"] = system
    if tools:
        body["tools"] = _tools(tools)
    if profile.temperature is not None:
        body["temperature"] = profile.temperature
    return ProviderRequest(url, headers, dumps(body))


def _max_tokens(profile: ModelProfile) -> int:
    return profile.max_tokens if profile.max_tokens is not None else DEFAULT_MAX_TOKENS


def _tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


def _encoded_tools(tools: Sequence[ToolDefinition]) -> bytes:
    return dumps(_tools(tools))


# One content block, encoded: (is it a tool_result, its JSON).
_Block = tuple[bool, bytes]


class _Encoded:
    """The history encoded so far, as `_turns` would make it: the turns that are
    closed (a later message has the other role) encoded and joined by commas, the
    open last turn as encoded blocks, and the texts of system messages."""

    __slots__ = ("blocks", "closed", "messages", "role", "systems", "tools")

    def __init__(self) -> None:
        self.tools = ToolsCache()
        self._reset()

    def _reset(self) -> None:
        self.messages: list[Message] = []
        self.systems: list[str] = []
        self.closed = bytearray()
        self.role: str | None = None
        self.blocks: list[_Block] = []

    def update(self, history: Sequence[Message]) -> None:
        if not kept_prefix(self.messages, history):
            self._reset()
        for message in history[len(self.messages) :]:
            self._add(message)
            self.messages.append(message)

    def _add(self, message: Message) -> None:
        if message.role == "system":
            if message.content:
                self.systems.append(message.content)
            return
        blocks = [(b["type"] == "tool_result", dumps(b)) for b in _blocks(message)]
        if not blocks:
            return
        role = "assistant" if message.role == "assistant" else "user"
        if role == self.role:
            self.blocks.extend(blocks)
            return
        if self.role is not None:
            if self.closed:
                self.closed += b","
            self.closed += _encoded_turn(self.role, self.blocks)
        self.role, self.blocks = role, blocks

    def turns(self) -> list[Piece]:
        """The pieces of the `messages` array."""
        listed: list[Piece] = [b"[", self.closed]
        if self.role is not None:
            if self.closed:
                listed.append(b",")
            listed.append(_encoded_turn(self.role, self.blocks))
        listed.append(b"]")
        return listed


def _encoded_turn(role: str, blocks: list[_Block]) -> bytes:
    # As `_turns` sorts them: tool_result blocks first, each group in order.
    ordered = [b for result, b in blocks if result] + [b for result, b in blocks if not result]
    return b"".join((b'{"role":', dumps(role), b',"content":[', b",".join(ordered), b"]}"))


def _spliced_body(
    profile: ModelProfile, conversation: Conversation, tools: Sequence[ToolDefinition]
) -> bytes:
    """The body `build_request` gives for the same messages, spliced from kept fragments.

    Only for a lead of system messages: the history's turns never merge with it.
    """
    entry = conversation.cache.entries.get(PROVIDER)
    if not isinstance(entry, _Encoded):
        entry = conversation.cache.entries[PROVIDER] = _Encoded()
    entry.update(conversation.history)
    leading = [m.content for m in conversation.lead if m.content]
    system = "\n\n".join(leading + entry.systems)
    fields: list[tuple[str, Sequence[Piece]]] = [
        ("model", (dumps(profile.model),)),
        ("max_tokens", (dumps(_max_tokens(profile)),)),
        ("messages", entry.turns()),
    ]
    if system:
        fields.append(("system", (dumps(system),)))
    if tools:
        fields.append(("tools", (entry.tools.get(tools, _encoded_tools),)))
    if profile.temperature is not None:
        fields.append(("temperature", (dumps(profile.temperature),)))
    return spliced(fields)


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
