"""Callables for the `requires` tests at dispatch: each counts its runs in `RAN`."""

from __future__ import annotations

import asyncio
from typing import Any

from app.engine import DispatchRejected, current_call

RAN: list[str] = []


async def fetch(ok: bool = True) -> dict[str, Any]:
    RAN.append("fetch")
    if not ok:
        raise RuntimeError("fetch failed")
    return {"fetched": True}


async def publish(**kwargs: Any) -> dict[str, Any]:
    RAN.append("publish")
    return {"published": kwargs}


async def dispatch_each(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A registered router: dispatches each call in turn and reports what became of it."""
    call = current_call()
    results: list[str] = []
    for each in calls:
        try:
            receipt = await call.dispatch(each["tool"], each.get("args", {}))
        except DispatchRejected as exc:
            results.append(f"rejected: {exc}")
        else:
            results.append(receipt.status.value)
        await asyncio.sleep(0)
    return {"results": results}
