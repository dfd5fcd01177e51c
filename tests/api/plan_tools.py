"""Tools for the plans API tests; they measure themselves (calls, in-flight peaks)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

calls: Counter[str] = Counter()
in_flight: Counter[str] = Counter()
peak: Counter[str] = Counter()
finish_order: list[str] = []
_lock = threading.Lock()


def reset() -> None:
    with _lock:
        calls.clear()
        in_flight.clear()
        peak.clear()
        finish_order.clear()


def _enter(group: str) -> None:
    with _lock:
        calls[group] += 1
        in_flight[group] += 1
        peak[group] = max(peak[group], in_flight[group])


def _leave(group: str, label: str) -> None:
    with _lock:
        in_flight[group] -= 1
        finish_order.append(label)


async def probe(group: str, label: str, delay_s: float) -> dict[str, Any]:
    _enter(group)
    try:
        await asyncio.sleep(delay_s)
    finally:
        _leave(group, label)
    return {"label": label}


def echo(text: str) -> dict[str, Any]:
    calls["echo"] += 1
    return {"text": text}


def explode(text: str) -> dict[str, Any]:
    calls["explode"] += 1
    raise RuntimeError(f"cannot handle {text}")
