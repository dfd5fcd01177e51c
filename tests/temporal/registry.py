"""The Temporal executor tests' registry."""

from __future__ import annotations

from pathlib import Path

REGISTRY = """\
subagents:
  tester:
    tools:
      echo:
        callable: tests.temporal.tools:echo
        description: Return the text.
        input_schema:
          type: object
          properties: {text: {type: string}, secret: {type: string}}
          required: [text]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
        redact: [secret]
      whoami:
        callable: tests.temporal.tools:whoami
        description: Return the text and the process the call ran in.
        input_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
      explode:
        callable: tests.temporal.tools:explode
        description: Always raises.
        input_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]
        output_schema: {type: object}
      gate:
        callable: tests.temporal.tools:gate
        description: Wait until the test releases the gate.
        input_schema:
          type: object
          properties: {marks: {type: string}, name: {type: string}}
          required: [marks, name]
          additionalProperties: false
        output_schema: {type: object}
        effect: idempotent
        timeout_s: 120
      gate_once:
        callable: tests.temporal.tools:gate
        description: The same gate, with effects that must not happen twice.
        input_schema:
          type: object
          properties: {marks: {type: string}, name: {type: string}}
          required: [marks, name]
          additionalProperties: false
        output_schema: {type: object}
        effect: non_idempotent
        timeout_s: 120
      approved:
        callable: tests.temporal.tools:echo
        description: Needs a person's approval.
        input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
        output_schema: {type: object}
        requires_confirmation: true
    runner_defaults:
      allowed_tools: [echo, whoami, explode, gate, gate_once, approved]
      max_calls: 8
      tool_timeout_s: 120
"""


def write_registry(directory: Path) -> Path:
    path = directory / "registry.yml"
    path.write_text(REGISTRY)
    return path
