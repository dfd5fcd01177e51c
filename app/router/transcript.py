"""The router conversation as stored in a checkpoint: JSON, and redacted.

Tool-call arguments go through the tool's redactor (the built-in patterns for
a name the model made up); everything else through the built-in patterns.
Observations are built from redacted receipts already. `dump_exact` keeps the
conversation as the model saw it, for a store that holds exact copies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from app.foundation.redaction import DEFAULT_REDACTOR, Redactor, redact_text
from app.llm.messages import Message, ToolCall


def redact_arguments(raw: str, redactor: Redactor) -> str:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return redact_text(raw)
    return redact_parsed(parsed, redactor)


def redact_parsed(parsed: Any, redactor: Redactor) -> str:
    """`redact_arguments` for arguments already parsed from the model's text."""
    return orjson.dumps(redactor.redact(parsed), option=orjson.OPT_NON_STR_KEYS).decode()


def dump(messages: Sequence[Message], redactors: Mapping[str, Redactor]) -> list[dict[str, Any]]:
    return [_dump(message, redactors) for message in messages]


def _dump(message: Message, redactors: Mapping[str, Redactor]) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": redact_text(message.content)}
    if message.tool_calls:
        data["tool_calls"] = [
            {
                "id": call.id,
                "name": redact_text(call.name),
                "arguments": redact_arguments(
                    call.arguments, redactors.get(call.name, DEFAULT_REDACTOR)
                ),
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        data["tool_call_id"] = message.tool_call_id
    return data


def dump_exact(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as JSON, unredacted: `load` gives back the same messages."""
    out: list[dict[str, Any]] = []
    for message in messages:
        data: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            data["tool_calls"] = [
                {"id": call.id, "name": call.name, "arguments": call.arguments}
                for call in message.tool_calls
            ]
        if message.tool_call_id is not None:
            data["tool_call_id"] = message.tool_call_id
        out.append(data)
    return out


def load(data: Sequence[Mapping[str, Any]]) -> list[Message]:
    return [
        Message(
            item["role"],
            item["content"],
            tuple(
                ToolCall(call["id"], call["name"], call["arguments"])
                for call in item.get("tool_calls", ())
            ),
            item.get("tool_call_id"),
        )
        for item in data
    ]
