"""The load suites' registry: plain tools, and two that declare admission limits."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

OWNER = "load"
LIMITED_CONCURRENCY = 3
LIMITED_RATE = 40.0
LIMITED_BURST = 5
SLOTTED_CONCURRENCY = 4

_DELAY = {
    "type": "object",
    "properties": {"delay_s": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["delay_s"],
    "additionalProperties": False,
}
_N = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


def _tool(function: str, input_schema: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {
        "callable": f"tests.load.load_tools:{function}",
        "description": f"Load tool {function}.",
        "input_schema": copy.deepcopy(input_schema),  # no YAML anchors: the loader refuses them
        "output_schema": {"type": "object"},
        "effect": "read",
        **options,
    }


def write_registry(directory: Path) -> Path:
    tools = {
        "work": _tool("work", _N),
        "sync_work": _tool("sync_work", _N),
        "limited": _tool(
            "limited",
            _DELAY,
            max_concurrency=LIMITED_CONCURRENCY,
            rate_limit={"per_second": LIMITED_RATE, "burst": LIMITED_BURST},
        ),
        "slotted": _tool("slotted", _DELAY, max_concurrency=SLOTTED_CONCURRENCY),
    }
    runner = {"allowed_tools": list(tools), "max_calls": 100, "tool_timeout_s": 30}
    document = {"subagents": {OWNER: {"tools": tools, "runner_defaults": runner}}}
    path = directory / "load.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
