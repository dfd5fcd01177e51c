"""Tools for the fault tests. Every call is counted by its idempotency key: in this
process (`calls`) and, when `CALL_LOG_ENV` names a file, in that file, because the
service under test is often another process."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from app.engine import current_call

CALL_LOG_ENV = "TOOLLOOP_FAULTS_CALL_LOG"
GATE_DIR_ENV = "TOOLLOOP_FAULTS_GATE_DIR"

calls: list[str] = []
_gates: dict[str, asyncio.Event] = {}


def reset() -> None:
    calls.clear()
    _gates.clear()


def release(label: str) -> None:
    _gates.setdefault(label, asyncio.Event()).set()


def _record() -> None:
    key = current_call().idempotency_key
    calls.append(key)
    path = os.environ.get(CALL_LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(key + "\n")


async def step(label: str, sleep_s: float = 0.0) -> dict[str, Any]:
    """Sleep `sleep_s`, then answer the label."""
    _record()
    await asyncio.sleep(sleep_s)
    return {"label": label}


def gate(label: str) -> dict[str, Any]:
    """Wait (in a worker thread) until a file named `label` exists in `GATE_DIR_ENV`:
    the test, another process, opens the gate."""
    _record()
    path = os.path.join(os.environ[GATE_DIR_ENV], label)
    while not os.path.exists(path):
        time.sleep(0.01)
    return {"label": label}


async def hold(label: str) -> dict[str, Any]:
    """Wait until the test releases `label`."""
    _record()
    await _gates.setdefault(label, asyncio.Event()).wait()
    return {"label": label}
