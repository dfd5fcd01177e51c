"""Tools for the load suites, run inside the server process.

`limited` and `slotted` measure themselves: each call appends one line
(tool, run, lane, call, enter and exit on the monotonic clock) to the file
named by TOOLLOOP_TEST_TRACE, in one O_APPEND write, so lines never interleave.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from app.engine import current_call

TRACE_ENV = "TOOLLOOP_TEST_TRACE"


async def work(n: int) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"n": n, "square": n * n}


def sync_work(n: int) -> dict[str, Any]:
    return {"n": n, "text": f"item {n}"}


async def _traced(delay_s: float) -> dict[str, Any]:
    enter = time.monotonic()
    await asyncio.sleep(delay_s)
    leave = time.monotonic()
    call = current_call()
    line = f"{call.tool} {call.run_id} {call.item_key} {call.call_key} {enter!r} {leave!r}\n"
    descriptor = os.open(os.environ[TRACE_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)
    return {"item_key": call.item_key, "call_key": call.call_key}


async def limited(delay_s: float) -> dict[str, Any]:
    return await _traced(delay_s)


async def slotted(delay_s: float) -> dict[str, Any]:
    return await _traced(delay_s)
