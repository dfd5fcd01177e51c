"""Observation summaries: what the model sees of a call, cut to a size budget.

The summary is built from the receipt's redacted copy (the model provider is
outside the service too). A cut summary ends with a visible marker saying how
much was shown; the receipt keeps the full redacted output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

TRUNCATION_MARKER = "…[truncated: showed {shown} of {total} characters]"
_COMPACT = orjson.OPT_NON_STR_KEYS
_INDENTED = orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2


def truncate(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + TRUNCATION_MARKER.format(shown=limit, total=len(text)), True


def summarize(stored: Mapping[str, Any], limit: int) -> tuple[str, bool]:
    """`(summary, truncated)` for one receipt: its status and output or error."""
    body: dict[str, Any] = {"status": stored["status"]}
    error = stored.get("error")
    if error is None:
        body["output"] = stored.get("output")
    else:
        body["error"] = {"kind": error.get("kind"), "message": error.get("message")}
    if stored.get("cache_hit"):
        body["cache_hit"] = True
    return truncate(to_json_text(body), limit)


def observation(stored: Mapping[str, Any], limit: int) -> dict[str, Any]:
    summary, cut = summarize(stored, limit)
    return {
        "call_key": stored["call_key"],
        "tool": stored["tool"],
        "status": stored["status"],
        "summary": summary,
        "truncated": cut,
    }


def render(observations: Sequence[Mapping[str, Any]]) -> str:
    """The observations as prompt text, one per line, in call order."""
    if not observations:
        return "(none)"
    return "\n".join(
        f"- [{o['call_key']}] {o['tool']} ({o['status']}): {o['summary']}" for o in observations
    )


def to_json_text(value: Any, *, indent: bool = False) -> str:
    option = _INDENTED if indent else _COMPACT
    return orjson.dumps(value, option=option, default=_fallback).decode()


def _fallback(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return repr(value)
