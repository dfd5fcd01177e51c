"""The router test registry: an `agent` owner, a `waiter` whose tool waits for the test,
a `capped` owner whose one tool needs a confirmation and runs once a run, and an
`other` owner the agent may not use."""

from __future__ import annotations

from pathlib import Path

from app.contract import Contract, load_contract

_M = "tests.router.router_tools"

REGISTRY = f"""\
subagents:
  agent:
    tools:
      lookup:
        callable: {_M}:lookup
        description: Look a term up.
        input_schema:
          type: object
          properties: {{term: {{type: string, minLength: 1}}}}
          required: [term]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
      echo:
        callable: {_M}:echo
        description: Return the text.
        input_schema:
          type: object
          properties: {{text: {{type: string}}}}
          required: [text]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
        redact: [secret]
      summarize:
        callable: {_M}:summarize
        description: Summarize a text; only after a lookup, once per run.
        input_schema:
          type: object
          properties: {{text: {{type: string}}}}
          required: [text]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
        requires: {{after: [lookup], max_per_run: 1}}
      explode:
        callable: {_M}:explode
        description: Always fails.
        input_schema:
          type: object
          properties: {{text: {{type: string}}}}
          required: [text]
        output_schema: {{type: object}}
      publish:
        callable: {_M}:publish
        description: Publish something; needs a person's approval.
        input_schema:
          type: object
          properties: {{title: {{type: string}}}}
          required: [title]
          additionalProperties: false
        output_schema: {{type: object}}
        requires_confirmation: true
      big:
        callable: {_M}:big
        description: Return a long text.
        input_schema:
          type: object
          properties: {{size: {{type: integer, minimum: 0}}}}
          required: [size]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
      nap:
        callable: {_M}:nap
        description: Sleep.
        input_schema:
          type: object
          properties: {{seconds: {{type: number, minimum: 0}}}}
          required: [seconds]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
      rendezvous:
        callable: {_M}:rendezvous
        description: Wait for a partner call.
        input_schema:
          type: object
          properties: {{group: {{type: string}}, label: {{type: string}}}}
          required: [group, label]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
      unlisted:
        callable: {_M}:echo
        description: Registered, not in the allowlist.
        input_schema: {{type: object}}
        output_schema: {{type: object}}
    runner_defaults:
      allowed_tools: [lookup, echo, summarize, explode, publish, big, nap, rendezvous]
      max_calls: 6
      tool_timeout_s: 5
  waiter:
    tools:
      hold:
        callable: {_M}:hold
        description: Wait until the test opens the gate.
        input_schema:
          type: object
          properties: {{gate: {{type: string}}}}
          required: [gate]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
      announce:
        callable: {_M}:publish
        description: Publish something; needs a person's approval.
        input_schema:
          type: object
          properties: {{title: {{type: string}}}}
          required: [title]
          additionalProperties: false
        output_schema: {{type: object}}
        requires_confirmation: true
    runner_defaults:
      allowed_tools: [hold, announce]
      max_calls: 4
      tool_timeout_s: 60
  capped:
    tools:
      publish_once:
        callable: {_M}:publish
        description: Publish something once a run; needs a person's approval.
        input_schema:
          type: object
          properties: {{title: {{type: string}}}}
          required: [title]
          additionalProperties: false
        output_schema: {{type: object}}
        requires_confirmation: true
        requires: {{max_per_run: 1}}
    runner_defaults:
      allowed_tools: [publish_once]
      max_calls: 4
      tool_timeout_s: 5
  other:
    tools:
      foreign:
        callable: {_M}:echo
        description: Another owner's tool.
        input_schema: {{type: object}}
        output_schema: {{type: object}}
    runner_defaults:
      allowed_tools: [foreign]
      max_calls: 2
      tool_timeout_s: 5

guardrails:
  allow_all:
    callable: {_M}:allow_all
    description: Allows everything.
  no_echo:
    callable: {_M}:no_echo
    description: Refuses echo.
  no_echo_either:
    callable: {_M}:no_echo_either
    description: Refuses echo too.
  broken_guardrail:
    callable: {_M}:broken_guardrail
    description: Always raises.
  shadow_no_echo:
    callable: {_M}:no_echo
    description: Would refuse echo.
    mode: shadow
  shadow_broken:
    callable: {_M}:broken_guardrail
    description: Always raises, in shadow.
    mode: shadow

verifiers:
  never_done:
    callable: {_M}:never_done
    description: Never satisfied.
  lookup_found:
    callable: {_M}:lookup_found
    description: A lookup succeeded.
  wrong_shape:
    callable: {_M}:wrong_shape
    description: Answers something that is not a verdict.
"""


def write_registry(directory: Path, text: str = REGISTRY) -> Path:
    path = directory / "router-registry.yml"
    path.write_text(text)
    return path


def load_registry(directory: Path, text: str = REGISTRY) -> Contract:
    return load_contract([write_registry(directory, text)])
