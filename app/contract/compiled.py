"""The immutable, hashed contract that the engine and router execute against.

Everything here is produced by `compiler.compile_contract` from validated
declarations; nothing is mutated after compilation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.contract.schemas import CompiledSchema


class Effect(StrEnum):
    READ = "read"
    IDEMPOTENT = "idempotent"
    NON_IDEMPOTENT = "non_idempotent"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int
    backoff_s: float
    backoff_max_s: float


NO_RETRY = RetryPolicy(max_attempts=1, backoff_s=0.0, backoff_max_s=0.0)


@dataclass(frozen=True, slots=True)
class RateLimit:
    per_second: float
    burst: int


@dataclass(frozen=True, slots=True)
class Requires:
    after: tuple[str, ...]
    max_per_run: int | None


@dataclass(frozen=True, slots=True)
class DiagnosisMapping:
    ready_field: str | None
    reason_code_field: str | None
    failure_kind_field: str | None
    facts_field: str | None
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ControlEnvelope:
    version: int
    role: str
    status_field: str
    continue_statuses: frozenset[str]
    stop_statuses: frozenset[str]
    diagnosis: DiagnosisMapping | None
    handoff_fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResolvedCallable:
    ref: str
    function: Callable[..., Any]
    is_async: bool


@dataclass(frozen=True, slots=True)
class McpEndpoint:
    """Where a remote tool is served; `token_env` names the variable holding its token."""

    url: str
    tool: str
    token_env: str | None


@dataclass(frozen=True, slots=True)
class Tool:
    id: str
    owner: str
    source_file: str
    target: ResolvedCallable
    description: str
    input_schema: CompiledSchema
    output_schema: CompiledSchema
    cacheable: bool
    cache_ttl_s: float | None
    timeout_s: float
    retry: RetryPolicy
    effect: Effect
    max_concurrency: int | None
    rate_limit: RateLimit | None
    redact: frozenset[str]
    requires: Requires | None
    requires_confirmation: bool
    control_envelope: ControlEnvelope | None
    definition_hash: str
    # A remote MCP tool: `target` stays unbound until the service binds it to a connection.
    mcp: McpEndpoint | None = None


@dataclass(frozen=True, slots=True)
class RunnerDefaults:
    allowed_tools: tuple[str, ...]
    max_calls: int
    tool_timeout_s: float


@dataclass(frozen=True, slots=True)
class Owner:
    name: str
    tools: Mapping[str, Tool]
    runner_defaults: RunnerDefaults


@dataclass(frozen=True, slots=True)
class PolicyCallable:
    name: str
    source_file: str
    target: ResolvedCallable
    description: str
    # A shadow guardrail's denials are recorded, never applied (`mode: shadow`).
    shadow: bool = False


@dataclass(frozen=True, slots=True)
class Contract:
    owners: Mapping[str, Owner]
    tools: Mapping[str, Tool]
    guardrails: Mapping[str, PolicyCallable]
    verifiers: Mapping[str, PolicyCallable]
    evidence_hooks: tuple[ResolvedCallable, ...]
    hash: str
    canonical: Mapping[str, Any]
