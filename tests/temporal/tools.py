"""Tools of the Temporal executor's tests: they run inside `toolloop worker` processes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any


def echo(text: str, secret: str | None = None) -> dict[str, Any]:
    return {"text": text, "secret": secret}


def explode(text: str) -> dict[str, Any]:
    raise RuntimeError(f"exploded on {text}")


async def gate(marks: str, name: str) -> dict[str, Any]:
    """Mark that this attempt started (in which process), then wait until the test
    releases the gate: the test decides when the call ends, without a fixed sleep."""
    folder = Path(marks)
    (folder / f"{name}.started.{os.getpid()}").touch()
    while not (folder / f"{name}.release").exists():
        await asyncio.sleep(0.02)
    return {"name": name, "pid": os.getpid()}
