"""Tools for the confirmation tests: they count their calls by label."""

from __future__ import annotations

from collections import Counter
from typing import Any

calls: Counter[str] = Counter()


def reset() -> None:
    calls.clear()


async def step(label: str, secret: str = "") -> dict[str, Any]:
    calls[label] += 1
    return {"label": label}
