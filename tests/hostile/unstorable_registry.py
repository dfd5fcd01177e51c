"""A registry of the tools in `unstorable_tools`."""

from __future__ import annotations

REGISTRY = """\
subagents:
  hostile:
    tools:
      counted:
        callable: tests.hostile.unstorable_tools:counted
        description: Count each run; not idempotent.
        input_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]
          additionalProperties: false
        output_schema: {type: object}
        effect: non_idempotent
      unstorable_output:
        callable: tests.hostile.unstorable_tools:unstorable_output
        description: Return a string no database stores.
        input_schema:
          type: object
          properties: {kind: {type: string}}
          required: [kind]
        output_schema: {type: object}
      unstorable_error:
        callable: tests.hostile.unstorable_tools:unstorable_error
        description: Raise with a message no database stores.
        input_schema:
          type: object
          properties: {kind: {type: string}}
          required: [kind]
        output_schema: {type: object}
    runner_defaults:
      allowed_tools: [counted, unstorable_output, unstorable_error]
      max_calls: 8
      tool_timeout_s: 10
"""
