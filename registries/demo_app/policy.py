"""Router policies: guardrails (may this call run?) and a verifier (is the run done?)."""

from __future__ import annotations

from typing import Any

MAX_TEXT_CHARS = 10_000
SHORT_TEXT_CHARS = 1_000


def no_huge_texts(call: dict[str, Any]) -> str | None:
    return _longer_than(call, MAX_TEXT_CHARS)


def short_texts_only(call: dict[str, Any]) -> str | None:
    return _longer_than(call, SHORT_TEXT_CHARS)


def _longer_than(call: dict[str, Any], limit: int) -> str | None:
    text = call.get("args", {}).get("text")
    if isinstance(text, str) and len(text) > limit:
        return f"text is longer than {limit} characters"
    return None


def lookup_succeeded(run: dict[str, Any]) -> dict[str, Any]:
    for receipt in run.get("receipts", []):
        if receipt.get("tool") == "slow_lookup" and receipt.get("status") == "succeeded":
            return {"ok": True, "reason": "a lookup succeeded"}
    return {"ok": False, "reason": "no successful slow_lookup call yet"}
