"""Tools the MCP endpoint tests call through `toolloop serve`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any


def shout(text: str, times: int = 1) -> dict[str, Any]:
    return {"text": " ".join([text.upper()] * times)}


def count_words(text: str) -> int:
    return len(text.split())


def explode(text: str) -> dict[str, Any]:
    raise RuntimeError(f"the tool exploded on {text!r}")


def sign(text: str) -> dict[str, Any]:
    return {"text": text, "token": "sk-live-" + "7" * 24}


def transfer(amount: int) -> dict[str, Any]:
    """Runs only once a person approved the call (the engine's gate)."""
    return {"moved": amount}


async def wait_for_file(path: str) -> dict[str, Any]:
    """Return once `path` exists (the test creates it, or cancels the call first)."""
    for _ in range(3000):  # a bound on the wait, not a timing assertion
        if await asyncio.to_thread(Path(path).exists):
            return {"path": path}
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{path} never appeared")
