"""The tools the benchmarks run: no-ops and fixed sleeps, so only the substrate is measured."""

from __future__ import annotations

import asyncio
from typing import Any


async def noop(text: str) -> dict[str, Any]:
    return {"text": text}


async def sleep_10ms(text: str) -> dict[str, Any]:
    await asyncio.sleep(0.01)
    return {"text": text}
