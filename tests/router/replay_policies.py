"""A guardrail that replaces the example's in replay tests: it refuses every call."""

from __future__ import annotations

from typing import Any


def refuse_everything(call: dict[str, Any]) -> str:
    return "refused by the changed policy"
