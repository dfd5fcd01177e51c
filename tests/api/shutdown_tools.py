"""Tools for tests of a `toolloop serve` subprocess, and their registry: each says it
started by creating a file in the directory `STARTED_DIR_ENV` names."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import yaml

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


def _tool(function: str) -> dict[str, Any]:
    return {
        "callable": f"tests.api.shutdown_tools:{function}",
        "description": f"Sleep: {function}.",
        "input_schema": {
            "type": "object",
            "properties": {"label": {"type": "string"}, "seconds": {"type": "number"}},
            "required": ["label", "seconds"],
            "additionalProperties": False,
        },
        "output_schema": {"type": "object"},
        "timeout_s": 3600,
    }


def write_registry(directory: Path) -> Path:
    """Owner `sleeper` with the tools `slow` and `slow_sync`, in `directory`."""
    tools = {"slow": _tool("slow"), "slow_sync": _tool("slow_sync")}
    document = {
        "subagents": {
            "sleeper": {
                "tools": tools,
                "runner_defaults": {
                    "allowed_tools": list(tools),
                    "max_calls": 8,
                    "tool_timeout_s": 3600,
                },
            }
        }
    }
    path = directory / "registry.yaml"
    path.write_text(yaml.safe_dump(document))
    return path
