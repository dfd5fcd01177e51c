"""A registry of the self-measuring tools in `plan_tools`."""

from __future__ import annotations

REGISTRY = """\
subagents:
  tester:
    tools:
      probe:
        callable: tests.api.plan_tools:probe
        description: Sleep, counting calls and in-flight peaks per group.
        input_schema:
          type: object
          properties:
            group: {type: string}
            label: {type: string}
            delay_s: {type: number, minimum: 0, maximum: 5}
          required: [group, label, delay_s]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
      limited_probe:
        callable: tests.api.plan_tools:probe
        description: The same probe behind a process-wide limit of two at a time.
        input_schema:
          type: object
          properties:
            group: {type: string}
            label: {type: string}
            delay_s: {type: number, minimum: 0, maximum: 5}
          required: [group, label, delay_s]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
        max_concurrency: 2
      echo:
        callable: tests.api.plan_tools:echo
        description: Return the text.
        input_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]
          additionalProperties: false
        output_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]
        redact: [secret]
      explode:
        callable: tests.api.plan_tools:explode
        description: Always raises.
        input_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]
        output_schema: {type: object}
      not_allowed:
        callable: tests.api.plan_tools:echo
        description: Registered but not in the allowlist.
        input_schema: {type: object}
        output_schema: {type: object}
    runner_defaults:
      allowed_tools: [probe, limited_probe, echo, explode]
      max_calls: 8
      tool_timeout_s: 10
"""
