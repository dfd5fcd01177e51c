"""Tools for the shutdown tests, run by a `toolloop serve` subprocess: each says it
started by creating a file in the directory `STARTED_DIR_ENV` names."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

STARTED_DIR_ENV = "TOOLLOOP_TEST_STARTED_DIR"


def _started(label: str) -> None:
    Path(os.environ[STARTED_DIR_ENV], f"{label}.started").touch()


async def slow(label: str, seconds: float) -> dict[str, Any]:
    _started(label)
    await asyncio.sleep(seconds)
    return {"label": label}


def slow_sync(label: str, seconds: float) -> dict[str, Any]:
    _started(label)
    time.sleep(seconds)
    return {"label": label}
