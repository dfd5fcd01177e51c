"""Tools for the run-control tests: gates the test opens, and a redacting echo."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

entered: Counter[str] = Counter()
cancelled: list[str] = []
echoed: list[str] = []
_gates: dict[str, asyncio.Event] = {}


def reset() -> None:
    entered.clear()
    cancelled.clear()
    echoed.clear()
    _gates.clear()


def _gate(name: str) -> asyncio.Event:
    return _gates.setdefault(name, asyncio.Event())


def release(name: str) -> None:
    _gate(name).set()


async def gate(gate: str, label: str) -> dict[str, Any]:
    """Wait until the test releases `gate`."""
    entered[gate] += 1
    try:
        await _gate(gate).wait()
    except asyncio.CancelledError:
        cancelled.append(label)
        raise
    return {"label": label}


def echo(text: str) -> dict[str, Any]:
    echoed.append(text)
    return {"text": text}
