"""Tools, guardrails and verifiers of the router test registry; they record their calls."""

from __future__ import annotations

import asyncio
from typing import Any

CALLS: list[tuple[str, dict[str, Any]]] = []
GUARDRAIL_CALLS: list[str] = []
_ARRIVED: dict[str, int] = {}
_EVENTS: dict[str, asyncio.Event] = {}
_GATES: dict[str, asyncio.Event] = {}
# Gates whose `hold` call was cancelled.
CANCELLED: list[str] = []


def reset() -> None:
    CALLS.clear()
    GUARDRAIL_CALLS.clear()
    CANCELLED.clear()
    _ARRIVED.clear()
    _EVENTS.clear()
    _GATES.clear()


def release(gate: str) -> None:
    _GATES.setdefault(gate, asyncio.Event()).set()


def lookup(term: str) -> dict[str, Any]:
    CALLS.append(("lookup", {"term": term}))
    return {"term": term, "found": term == "toolloop"}


def echo(text: str) -> dict[str, Any]:
    CALLS.append(("echo", {"text": text}))
    return {"text": text}


def summarize(text: str) -> dict[str, Any]:
    CALLS.append(("summarize", {"text": text}))
    return {"summary": text[:10]}


def explode(text: str) -> dict[str, Any]:
    CALLS.append(("explode", {"text": text}))
    raise RuntimeError("the tool failed")


def publish(title: str) -> dict[str, Any]:
    CALLS.append(("publish", {"title": title}))
    return {"published": title}


def big(size: int) -> dict[str, Any]:
    CALLS.append(("big", {"size": size}))
    return {"text": "x" * size}


async def nap(seconds: float) -> dict[str, Any]:
    CALLS.append(("nap", {"seconds": seconds}))
    await asyncio.sleep(seconds)
    return {"slept": seconds}


async def rendezvous(group: str, label: str) -> dict[str, Any]:
    """Returns only once two calls of `group` are in flight together: proof of concurrency."""
    CALLS.append(("rendezvous", {"group": group, "label": label}))
    event = _EVENTS.setdefault(group, asyncio.Event())
    _ARRIVED[group] = _ARRIVED.get(group, 0) + 1
    if _ARRIVED[group] >= 2:
        event.set()
    await asyncio.wait_for(event.wait(), timeout=5)
    return {"label": label}


async def hold(gate: str) -> dict[str, Any]:
    """Returns once the test releases `gate`."""
    CALLS.append(("hold", {"gate": gate}))
    try:
        await _GATES.setdefault(gate, asyncio.Event()).wait()
    except asyncio.CancelledError:
        CANCELLED.append(gate)
        raise
    return {"gate": gate}


def allow_all(call: dict[str, Any]) -> str | None:
    GUARDRAIL_CALLS.append("allow_all")
    return "allow"


def no_echo(call: dict[str, Any]) -> str | None:
    GUARDRAIL_CALLS.append("no_echo")
    return "echo is not allowed here" if call["tool"] == "echo" else None


def no_echo_either(call: dict[str, Any]) -> str | None:
    GUARDRAIL_CALLS.append("no_echo_either")
    return "second guardrail" if call["tool"] == "echo" else None


def broken_guardrail(call: dict[str, Any]) -> str | None:
    GUARDRAIL_CALLS.append("broken_guardrail")
    raise ValueError("policy store down")


def never_done(run: dict[str, Any]) -> dict[str, Any]:
    return {"ok": False, "reason": "always red"}


def lookup_found(run: dict[str, Any]) -> dict[str, Any]:
    for receipt in run["receipts"]:
        if receipt["tool"] == "lookup" and receipt["status"] == "succeeded":
            return {"ok": True, "reason": "a lookup succeeded"}
    return {"ok": False, "reason": "no lookup yet"}


def wrong_shape(run: dict[str, Any]) -> Any:
    return 42
