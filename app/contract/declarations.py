"""The registry file, as declared: shapes, types and single-field limits.

Every model forbids unknown fields and is strict (no "5" for 5, no "yes" for
true). Rules that relate several fields or several files live in `checks.py`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# Owner, tool and policy names double as LLM function names, hence the narrow alphabet.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CALLABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")

# No user:password@ part: the URL is stored with the contract, a token goes in token_env.
_MCP_URL = re.compile(r"https?://[^\s/?#@]+(?:[/?#]\S*)?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a name: use 1-64 of A-Z a-z 0-9 _ -")
    return value


def _callable_ref(value: str) -> str:
    if not _CALLABLE.fullmatch(value):
        raise ValueError(f"{value!r} is not a callable reference 'package.module:function'")
    return value


def is_name(value: Any) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def is_callable_ref(value: Any) -> bool:
    return isinstance(value, str) and _CALLABLE.fullmatch(value) is not None


def _mcp_url(value: str) -> str:
    if not _MCP_URL.fullmatch(value):
        raise ValueError(
            "must be an http:// or https:// URL without credentials (use token_env for a token)"
        )
    return value


def _env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not an environment variable name")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


Name = Annotated[str, AfterValidator(_name)]
CallableRef = Annotated[str, AfterValidator(_callable_ref)]
Text = Annotated[str, AfterValidator(_not_blank)]
McpUrl = Annotated[str, AfterValidator(_mcp_url)]
EnvName = Annotated[str, AfterValidator(_env_name)]
PositiveInt = Annotated[int, Field(gt=0)]
PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeSeconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
EffectName = Literal["read", "idempotent", "non_idempotent"]


class Declaration(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RetryDecl(Declaration):
    max_attempts: PositiveInt
    backoff_s: NonNegativeSeconds = 0.0
    backoff_max_s: NonNegativeSeconds | None = None


class RateLimitDecl(Declaration):
    per_second: PositiveSeconds
    burst: PositiveInt


class RequiresDecl(Declaration):
    after: list[Name] = []
    max_per_run: PositiveInt | None = None


class GraphDecl(Declaration):
    status_field: Text
    continue_statuses: Annotated[list[Text], Field(min_length=1)]
    stop_statuses: Annotated[list[Text], Field(min_length=1)]


class DiagnosisDecl(Declaration):
    ready_field: Text | None = None
    reason_code_field: Text | None = None
    failure_kind_field: Text | None = None
    facts_field: Text | None = None
    fields: list[Text] = []


class ControlEnvelopeDecl(Declaration):
    version: Literal[1]
    role: Text
    graph: GraphDecl
    diagnosis: DiagnosisDecl | None = None
    handoff_fields: list[Text] = []


class McpDecl(Declaration):
    """A tool served by a remote MCP server over Streamable HTTP."""

    url: McpUrl
    tool: Text
    token_env: EnvName | None = None


class ToolDecl(Declaration):
    # Exactly one of the two (`checks.check_tool`).
    callable: CallableRef | None = None
    mcp: McpDecl | None = None
    description: Text
    input_schema: Any
    output_schema: Any
    cacheable: bool = False
    cache_ttl_s: PositiveSeconds | None = None
    timeout_s: PositiveSeconds | None = None
    retry: RetryDecl | None = None
    effect: EffectName = "non_idempotent"
    max_concurrency: PositiveInt | None = None
    rate_limit: RateLimitDecl | None = None
    redact: list[Text] = []
    requires: RequiresDecl | None = None
    requires_confirmation: bool = False
    control_envelope: ControlEnvelopeDecl | None = None


class RunnerDefaultsDecl(Declaration):
    allowed_tools: list[Name]
    max_calls: PositiveInt
    tool_timeout_s: PositiveSeconds


class OwnerDecl(Declaration):
    tools: Annotated[dict[Name, ToolDecl], Field(min_length=1)]
    runner_defaults: RunnerDefaultsDecl


class PolicyDecl(Declaration):
    callable: CallableRef
    description: Text


class GuardrailDecl(PolicyDecl):
    # shadow: the guardrail runs and its would-be denials are recorded; nothing is denied.
    mode: Literal["enforce", "shadow"] = "enforce"


class HooksDecl(Declaration):
    evidence: list[CallableRef] = []


class RegistryDecl(Declaration):
    subagents: dict[Name, OwnerDecl] = {}
    guardrails: dict[Name, GuardrailDecl] = {}
    verifiers: dict[Name, PolicyDecl] = {}
    hooks: HooksDecl = HooksDecl()
