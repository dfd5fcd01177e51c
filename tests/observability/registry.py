"""The test registry: one owner with the tools of `obs_tools`."""

from __future__ import annotations

from pathlib import Path

OWNER = "obs-worker"

_TEXT = """
        input_schema:
          type: object
          properties: {text: {type: string, maxLength: 2000}}
          required: [text]
          additionalProperties: false
        output_schema:
          type: object
          properties: {text: {type: string}}
          required: [text]"""

REGISTRY = f"""\
subagents:
  {OWNER}:
    tools:
      echo:
        callable: tests.observability.obs_tools:echo
        description: Return the text.{_TEXT}
        effect: read
      cached_echo:
        callable: tests.observability.obs_tools:echo
        description: Return the text, cached.{_TEXT}
        effect: read
        cacheable: true
      padded_echo:
        callable: tests.observability.obs_tools:padded_echo
        description: Return the text and padding, past the stored-output cap.
        input_schema:
          type: object
          properties: {{text: {{type: string, maxLength: 2000}}}}
          required: [text]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
      leak:
        callable: tests.observability.obs_tools:leak
        description: Raise with the text in the message.{_TEXT}
      flaky:
        callable: tests.observability.obs_tools:flaky
        description: Fail a given number of times per token, then succeed.
        input_schema:
          type: object
          properties: {{token: {{type: string}}, failures: {{type: integer}}}}
          required: [token, failures]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
        retry: {{max_attempts: 3, backoff_s: 0}}
      hang:
        callable: tests.observability.obs_tools:hang
        description: Never returns.{_TEXT}
        effect: non_idempotent
        timeout_s: 0.05
      hold:
        callable: tests.observability.obs_tools:hold
        description: Wait until the test releases it.{_TEXT}
        effect: read
        max_concurrency: 1
      unlisted:
        callable: tests.observability.obs_tools:echo
        description: Registered, not allowed.{_TEXT}
    runner_defaults:
      allowed_tools: [echo, cached_echo, padded_echo, leak, flaky, hang, hold]
      max_calls: 8
      tool_timeout_s: 10
"""


def write_registry(directory: Path) -> Path:
    path = directory / "observability.yml"
    path.write_text(REGISTRY)
    return path
