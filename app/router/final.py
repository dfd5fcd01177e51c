"""Checking the final writer's answer against the caller's `final_schema`."""

from __future__ import annotations

from typing import Any

import orjson

from app.contract.schemas import CompiledSchema

_MAX_PROBLEMS = 20


def parse_final(text: str, schema: CompiledSchema) -> tuple[Any, list[str]]:
    """`(value, [])` when `text` is one JSON value valid against `schema`, else the problems.

    A reply wrapped in one Markdown code fence is accepted: the fence is
    formatting, not content.
    """
    candidate = _unfenced(text.strip())
    try:
        value = orjson.loads(candidate)
    except orjson.JSONDecodeError:
        return None, ["the reply is not one JSON value"]
    if schema.is_valid(value):
        return value, []
    found = schema.problems(value)
    if not found:
        return None, ["the reply does not match the final_schema"]
    return None, [f"{p.pointer or '/'}: {p.message}" for p in found[:_MAX_PROBLEMS]]


def _unfenced(text: str) -> str:
    if len(text) < 6 or not text.startswith("```") or not text.endswith("```"):
        return text
    inner = text[3:-3]
    info, newline, rest = inner.partition("\n")
    if newline and (not info.strip() or info.strip().isalnum()):
        return rest  # drop the info-string line ("json")
    return inner
