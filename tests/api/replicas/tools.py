"""Tools for the replica tests, run by `toolloop serve` processes: they talk to the test
through files in the directory `FILES_ENV` names (a call says it started, waits for its
gate, and is counted in `calls.log`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from tests.support.waiting import wait_for

FILES_ENV = "TOOLLOOP_TEST_REPLICA_FILES"
GATE_BOUND_S = 600.0


def _files() -> Path:
    return Path(os.environ[FILES_ENV])


def _count(label: str) -> None:
    with (_files() / "calls.log").open("a", encoding="utf-8") as log:
        log.write(label + "\n")


async def echo(label: str) -> dict[str, Any]:
    _count(label)
    return {"label": label}


async def gated(label: str) -> dict[str, Any]:
    """Say it started, then wait until the file `label` exists (the test opens the gate)."""
    _count(label)
    (_files() / f"{label}.started").touch()
    gate = _files() / label
    await wait_for(gate.exists, f"the gate {label} opened", bound_s=GATE_BOUND_S, every_s=0.01)
    return {"label": label}


def calls(directory: Path) -> list[str]:
    path = directory / "calls.log"
    return path.read_text().split() if path.exists() else []


def _tool(function: str, **extra: Any) -> dict[str, Any]:
    return {
        "callable": f"tests.api.replicas.tools:{function}",
        "description": f"Replica test tool {function}.",
        "input_schema": {
            "type": "object",
            "properties": {"label": {"type": "string"}},
            "required": ["label"],
            "additionalProperties": False,
        },
        "output_schema": {"type": "object"},
        **extra,
    }


def write_registry(directory: Path) -> Path:
    """Owner `replicas`: `echo`, `gated`, and `guarded` (an echo that needs confirmation)."""
    tools = {
        "echo": _tool("echo"),
        "gated": _tool("gated", timeout_s=600),
        "guarded": _tool("echo", requires_confirmation=True),
    }
    document = {
        "subagents": {
            "replicas": {
                "tools": tools,
                "runner_defaults": {
                    "allowed_tools": list(tools),
                    "max_calls": 16,
                    "tool_timeout_s": 600,
                },
            }
        }
    }
    path = directory / "registry.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def call(call_key: str, tool: str = "echo") -> dict[str, Any]:
    return {"call_key": call_key, "tool": tool, "args": {"label": call_key}}


def sequential(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"owner": "replicas", "calls": list(calls)}
