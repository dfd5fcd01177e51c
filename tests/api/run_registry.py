"""A registry of the gate and echo tools in `run_tools`."""

from __future__ import annotations

from typing import Any

REGISTRY = """\
subagents:
  runner:
    tools:
      gate:
        callable: tests.api.run_tools:gate
        description: Wait until the test opens the gate.
        input_schema:
          type: object
          properties:
            gate: {type: string}
            label: {type: string}
          required: [gate, label]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
      echo:
        callable: tests.api.run_tools:echo
        description: Return the text.
        input_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]
          additionalProperties: false
        output_schema: {type: object}
    runner_defaults:
      allowed_tools: [gate, echo]
      max_calls: 8
      tool_timeout_s: 60
"""


def gate(call_key: str, name: str) -> dict[str, Any]:
    return {"call_key": call_key, "tool": "gate", "args": {"gate": name, "label": call_key}}


def echo(call_key: str, text: str = "x") -> dict[str, Any]:
    return {"call_key": call_key, "tool": "echo", "args": {"text": text}}


def sequential(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"owner": "runner", "calls": list(calls)}


def parallel(lanes: dict[str, list[dict[str, Any]]], max_concurrency: int = 4) -> dict[str, Any]:
    return {
        "owner": "runner",
        "max_concurrency": max_concurrency,
        "lanes": [{"item_key": key, "calls": calls} for key, calls in lanes.items()],
    }
