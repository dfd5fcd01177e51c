"""Router policies: a guardrail (may this call run?) and a verifier (is the run done?)."""

from __future__ import annotations

from typing import Any

MAX_TEXT_CHARS = 10_000


def no_huge_texts(call: dict[str, Any]) -> str | None:
    text = call.get("args", {}).get("text")
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        return f"text is longer than {MAX_TEXT_CHARS} characters"
    return None


def lookup_succeeded(run: dict[str, Any]) -> dict[str, Any]:
    for receipt in run.get("receipts", []):
        if receipt.get("tool") == "slow_lookup" and receipt.get("status") == "succeeded":
            return {"ok": True, "reason": "a lookup succeeded"}
    return {"ok": False, "reason": "no successful slow_lookup call yet"}
