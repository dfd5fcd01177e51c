"""Tools for the console tests: an echo that takes a secret, a call held until the test
releases it, and one that fails."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

GATE_DIR_ENV = "CONSOLE_GATE_DIR"

_released: dict[str, asyncio.Event] = {}


def reset() -> None:
    _released.clear()


def release(label: str) -> None:
    _released.setdefault(label, asyncio.Event()).set()


def echo(text: str, secret: str | None = None) -> dict[str, Any]:
    return {"text": text}


async def hold(label: str) -> dict[str, Any]:
    await _released.setdefault(label, asyncio.Event()).wait()
    return {"label": label}


def fail(text: str) -> dict[str, Any]:
    raise RuntimeError(f"refused {len(text)} characters")


def gate(label: str) -> dict[str, Any]:
    """Wait (in a worker thread) until a file named `label` exists in the directory
    `CONSOLE_GATE_DIR` names: the test, another process, opens the gate."""
    path = os.path.join(os.environ[GATE_DIR_ENV], label)
    while not os.path.exists(path):
        time.sleep(0.02)
    return {"label": label}
