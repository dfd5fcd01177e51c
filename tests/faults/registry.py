"""The fault tests' registry and plan builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REGISTRY = """\
subagents:
  faults:
    tools:
      step:
        callable: tests.faults.fault_tools:step
        description: Sleep, then answer the label.
        input_schema:
          type: object
          properties:
            label: {type: string}
            sleep_s: {type: number, minimum: 0, maximum: 30}
          required: [label]
          additionalProperties: false
        output_schema: {type: object}
        effect: idempotent
      gate:
        callable: tests.faults.fault_tools:gate
        description: Wait until the test opens the gate file named by the label.
        input_schema:
          type: object
          properties: {label: {type: string, pattern: "^[a-z0-9-]+$"}}
          required: [label]
          additionalProperties: false
        output_schema: {type: object}
        effect: idempotent
      read_gate:
        callable: tests.faults.fault_tools:gate
        description: The gate, declared a read (its run's start need not commit first).
        input_schema:
          type: object
          properties: {label: {type: string, pattern: "^[a-z0-9-]+$"}}
          required: [label]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
      hold:
        callable: tests.faults.fault_tools:hold
        description: Wait until the test releases the label.
        input_schema:
          type: object
          properties: {label: {type: string}}
          required: [label]
          additionalProperties: false
        output_schema: {type: object}
        effect: idempotent
    runner_defaults:
      allowed_tools: [step, gate, read_gate, hold]
      max_calls: 100
      tool_timeout_s: 60
"""


def write_registry(directory: Path, description: str = "Sleep, then answer the label.") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "faults.yml"
    path.write_text(REGISTRY.replace("Sleep, then answer the label.", description))
    return path


def step(call_key: str, sleep_s: float = 0.0) -> dict[str, Any]:
    return {"call_key": call_key, "tool": "step", "args": {"label": call_key, "sleep_s": sleep_s}}


def gate(call_key: str, name: str) -> dict[str, Any]:
    return {"call_key": call_key, "tool": "gate", "args": {"label": name}}


def read_gate(call_key: str, name: str) -> dict[str, Any]:
    return {"call_key": call_key, "tool": "read_gate", "args": {"label": name}}


def hold(call_key: str) -> dict[str, Any]:
    return {"call_key": call_key, "tool": "hold", "args": {"label": call_key}}


def sequential(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"owner": "faults", "calls": list(calls)}


def parallel(lanes: dict[str, list[dict[str, Any]]], max_concurrency: int = 4) -> dict[str, Any]:
    return {
        "owner": "faults",
        "max_concurrency": max_concurrency,
        "lanes": [{"item_key": key, "calls": calls} for key, calls in lanes.items()],
    }


REPO = Path(__file__).resolve().parents[2]


def server_env(registry: Path, database_url: str, **extra: str) -> dict[str, str]:
    """`toolloop serve`'s environment for a fault test: the fault tools' registry,
    the database, quiet logs, this checkout importable; `extra` added as given."""
    return {
        "TOOLLOOP_REGISTRIES": str(registry),
        "TOOLLOOP_DATABASE_URL": database_url,
        "TOOLLOOP_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(REPO),
        **extra,
    }
