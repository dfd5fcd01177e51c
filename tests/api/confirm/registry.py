"""A registry with a tool that requires confirmation, for the confirmation tests."""

REGISTRY = """\
subagents:
  tester:
    tools:
      step:
        callable: tests.api.confirm.tools:step
        description: Count a call by label.
        input_schema:
          type: object
          properties: {label: {type: string}, secret: {type: string}}
          required: [label]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
      launch:
        callable: tests.api.confirm.tools:step
        description: The same, only once a person approved the exact call.
        input_schema:
          type: object
          properties: {label: {type: string}, secret: {type: string}}
          required: [label]
          additionalProperties: false
        output_schema: {type: object}
        redact: [secret]
        requires_confirmation: true
      peek:
        callable: tests.api.confirm.tools:step
        description: A read that still needs a person's approval.
        input_schema:
          type: object
          properties: {label: {type: string}}
          required: [label]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
        requires_confirmation: true
      nap:
        callable: tests.api.confirm.tools:nap
        description: Sleep, then count the call by label.
        input_schema:
          type: object
          properties: {label: {type: string}, seconds: {type: number, minimum: 0}}
          required: [label, seconds]
          additionalProperties: false
        output_schema: {type: object}
        effect: read
    runner_defaults:
      allowed_tools: [step, launch, peek, nap]
      max_calls: 10
      tool_timeout_s: 5
"""
