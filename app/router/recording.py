"""A run's model replies as it keeps them, to be replayed without a model
(`app.llm.replay` serves them back; its docstring gives the shape).

Every kept reply is redacted with the run's rules, as the stored conversation
is (`transcript`): tool-call arguments through the tool's redactor, all other
text through the built-in patterns. It is also capped: the text and each
call's arguments keep at most MAX_REPLY_CHARS characters, ending with the
TRUNCATED marker, at most MAX_REPLY_CALLS calls are kept, and such a reply
says `"truncated": true`. A truncated reply replays as what was kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.foundation.redaction import DEFAULT_REDACTOR, Redactor, redact_text
from app.llm.messages import ModelReply
from app.router.transcript import redact_arguments

MAX_REPLY_CHARS = 16_000
MAX_REPLY_CALLS = 64
MAX_ID_CHARS = 256
TRUNCATED = "...[truncated: {count} more characters]"


def reply_entry(role: str, reply: ModelReply, redactors: Mapping[str, Redactor]) -> dict[str, Any]:
    text, truncated = _capped(redact_text(reply.text))
    calls = []
    for call in reply.tool_calls[:MAX_REPLY_CALLS]:
        redactor = redactors.get(call.name, DEFAULT_REDACTOR)
        arguments, cut = _capped(redact_arguments(call.arguments, redactor))
        name, cut_name = _capped(redact_text(call.name), MAX_ID_CHARS)
        call_id, cut_id = _capped(call.id, MAX_ID_CHARS)
        truncated = truncated or cut or cut_name or cut_id
        calls.append({"id": call_id, "name": name, "arguments": arguments})
    usage = reply.usage
    finish, cut = (
        (None, False) if reply.finish_reason is None else _capped(reply.finish_reason, MAX_ID_CHARS)
    )
    return {
        "role": role,
        "kind": "reply",
        "text": text,
        "tool_calls": calls,
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        "finish_reason": finish,
        "truncated": truncated or cut or len(reply.tool_calls) > MAX_REPLY_CALLS,
    }


def failure_entry(role: str, kind: str, detail: str | None = None) -> dict[str, Any]:
    """A request that gave no reply: `malformed` (reason), `error` (summary) or `timeout`."""
    entry: dict[str, Any] = {"role": role, "kind": kind}
    if kind == "malformed":
        entry["reason"] = _capped(redact_text(detail or ""))[0]
    elif kind == "error":
        entry["error"] = _capped(redact_text(detail or ""))[0]
    return entry


def _capped(text: str, limit: int = MAX_REPLY_CHARS) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + TRUNCATED.format(count=len(text) - limit), True
