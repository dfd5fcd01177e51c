"""Tools for the confirmation tests: they count their calls by label."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

calls: Counter[str] = Counter()


def reset() -> None:
    calls.clear()


async def step(label: str, secret: str = "") -> dict[str, Any]:
    calls[label] += 1
    return {"label": label}


async def nap(label: str, seconds: float) -> dict[str, Any]:
    await asyncio.sleep(seconds)
    calls[label] += 1
    return {"label": label}
