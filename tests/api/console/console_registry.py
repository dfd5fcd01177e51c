"""The console tests' registry."""

from __future__ import annotations

from pathlib import Path

REGISTRY = """\
subagents:
  desk:
    tools:
      echo:
        callable: tests.api.console.console_tools:echo
        description: Answer the text.
        input_schema:
          type: object
          properties: {text: {type: string}, secret: {type: string}}
          required: [text]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
        redact: [secret]
      hold:
        callable: tests.api.console.console_tools:hold
        description: Wait until the test releases the label.
        input_schema:
          type: object
          properties: {label: {type: string}}
          required: [label]
          additionalProperties: false
        output_schema: {type: object}
        effect: idempotent
      fail:
        callable: tests.api.console.console_tools:fail
        description: Always fails.
        input_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
      gate:
        callable: tests.api.console.console_tools:gate
        description: Wait until the test opens the gate file named by the label.
        input_schema:
          type: object
          properties: {label: {type: string, pattern: "^[a-z0-9-]+$"}}
          required: [label]
          additionalProperties: false
        output_schema: {type: object}
        effect: idempotent
      pay:
        callable: tests.api.console.console_tools:echo
        description: Pay; a person approves each call.
        input_schema:
          type: object
          properties: {text: {type: string}, secret: {type: string}}
          required: [text]
          additionalProperties: false
        output_schema: {type: object}
        effect: non_idempotent
        requires_confirmation: true
        redact: [secret]
    runner_defaults:
      allowed_tools: [echo, hold, fail, gate, pay]
      max_calls: 100
      tool_timeout_s: 60
"""


def write_registry(directory: Path) -> Path:
    path = directory / "desk.yml"
    path.write_text(REGISTRY)
    return path


def call(call_key: str, tool: str, **args: str) -> dict[str, object]:
    return {"call_key": call_key, "tool": tool, "args": args}
