"""Validated declarations from one or more files -> one frozen, hashed Contract.

Names are global: an owner, a tool id, a guardrail or a verifier is declared
once across all files. Every problem is collected before RegistryError is
raised. The contract's canonical form holds declarations only (no file paths,
no file order), so moving or reordering files keeps its hash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson

from app.contract.callables import CallableError, require_one_argument, resolve_callable
from app.contract.checks import check_envelope_fields, check_owner, check_tool
from app.contract.compiled import (
    NO_RETRY,
    Contract,
    ControlEnvelope,
    DiagnosisMapping,
    Effect,
    McpEndpoint,
    Owner,
    PolicyCallable,
    RateLimit,
    Requires,
    ResolvedCallable,
    RetryPolicy,
    RunnerDefaults,
    Tool,
)
from app.contract.declarations import (
    ControlEnvelopeDecl,
    GuardrailDecl,
    PolicyDecl,
    RunnerDefaultsDecl,
    ToolDecl,
)
from app.contract.errors import ContractProblem, RegistryError, SchemaDefinitionError
from app.contract.registry_file import OwnerPart, RegistryFile
from app.contract.remote import unbound_remote_target
from app.contract.schemas import CompiledSchema, compile_schema
from app.foundation.canonical import canonical_json, sha256_digest


@dataclass
class _Compilation:
    allowed_modules: Sequence[str] | None
    problems: list[ContractProblem] = field(default_factory=list)

    def report(self, file: str, path: str, message: str) -> None:
        self.problems.append(ContractProblem(file, path, message))

    def resolve(self, file: str, path: str, ref: str, *, policy: bool) -> ResolvedCallable | None:
        try:
            resolved = resolve_callable(ref, self.allowed_modules)
            if policy:
                require_one_argument(resolved)
        except CallableError as exc:
            self.report(file, path, str(exc))
            return None
        return resolved

    def schema(self, file: str, path: str, schema: Any) -> CompiledSchema | None:
        try:
            return compile_schema(schema)
        except SchemaDefinitionError as exc:
            for message in exc.messages:
                self.report(file, path, message)
            return None


@dataclass(frozen=True, slots=True)
class _OwnerEntry:
    file: str
    name: str
    part: OwnerPart


def compile_contract(
    files: Sequence[RegistryFile], allowed_modules: Sequence[str] | None = None
) -> Contract:
    work = _Compilation(allowed_modules)
    tool_owners = _index_tools(work, files)
    owners: dict[str, Owner] = {}
    canonical: dict[str, Any] = {"owners": {}, "tools": {}}
    for entry in _index_owners(work, files):
        owner = _compile_owner(work, entry, tool_owners, canonical)
        if owner is not None:
            owners[entry.name] = owner
    guardrails = _policies(work, files, "guardrails")
    verifiers = _policies(work, files, "verifiers")
    hooks = _evidence_hooks(work, files)
    if work.problems:
        raise RegistryError(work.problems)
    # `mode` enters the hash only when it is not the default (enforce).
    canonical["guardrails"] = {
        name: policy.decl.model_dump(mode="json", exclude_defaults=True)
        for name, policy in guardrails.items()
    }
    canonical["verifiers"] = {name: _dump(policy.decl) for name, policy in verifiers.items()}
    canonical["hooks"] = {"evidence": [hook.ref for hook in hooks]}
    canonical_bytes = canonical_json(canonical)
    return Contract(
        owners=MappingProxyType(owners),
        tools=MappingProxyType(
            {t.id: t for owner in owners.values() for t in owner.tools.values()}
        ),
        guardrails=MappingProxyType({name: p.compiled for name, p in guardrails.items()}),
        verifiers=MappingProxyType({name: p.compiled for name, p in verifiers.items()}),
        evidence_hooks=tuple(hooks),
        hash=sha256_digest(canonical_bytes),
        canonical=orjson.loads(canonical_bytes),
    )


def _compile_owner(
    work: _Compilation,
    entry: _OwnerEntry,
    tool_owners: Mapping[str, str],
    canonical: dict[str, Any],
) -> Owner | None:
    part = entry.part
    findings = check_owner(
        entry.name, part.tools, part.allowed_tools, tool_owners, part.invalid_tools
    )
    for path, message in findings:
        work.report(entry.file, f"subagents.{entry.name}.{path}", message)
    tools: dict[str, Tool] = {}
    for tool_id, decl in part.tools.items():
        if tool_owners.get(tool_id) != entry.name:
            continue  # a duplicate id, reported by _index_tools
        canonical["tools"][tool_id] = {"owner": entry.name, "definition": _tool_dump(decl)}
        tool = _compile_tool(work, entry, tool_id, decl)
        if tool is not None:
            tools[tool_id] = tool
    if part.runner_defaults is None:
        return None
    canonical["owners"][entry.name] = {
        "runner_defaults": _dump(part.runner_defaults),
        "tools": sorted(part.tools),
    }
    return Owner(
        name=entry.name,
        tools=MappingProxyType(tools),
        runner_defaults=_runner_defaults(part.runner_defaults),
    )


def _index_owners(work: _Compilation, files: Sequence[RegistryFile]) -> list[_OwnerEntry]:
    first_file: dict[str, str] = {}
    entries: list[_OwnerEntry] = []
    for registry in files:
        for name, part in registry.owners.items():
            if name in first_file:
                work.report(
                    registry.file,
                    f"subagents.{name}",
                    f"owner {name!r} is already declared in {first_file[name]}",
                )
                continue
            first_file[name] = registry.file
            entries.append(_OwnerEntry(registry.file, name, part))
    return entries


def _index_tools(work: _Compilation, files: Sequence[RegistryFile]) -> dict[str, str]:
    """Tool id -> owner of its first registration; later registrations are problems."""
    first: dict[str, tuple[str, str]] = {}
    for registry in files:
        declared = [
            (owner, tool_id)
            for owner, part in registry.owners.items()
            for tool_id in [*part.tools, *sorted(part.invalid_tools)]
        ]
        for owner, tool_id in declared:
            if tool_id in first:
                first_owner, first_file = first[tool_id]
                work.report(
                    registry.file,
                    f"subagents.{owner}.tools.{tool_id}",
                    f"tool id {tool_id!r} is already registered by owner {first_owner!r} "
                    f"in {first_file}",
                )
            else:
                first[tool_id] = (owner, registry.file)
    return {tool_id: owner for tool_id, (owner, _) in first.items()}


def _compile_tool(
    work: _Compilation, entry: _OwnerEntry, tool_id: str, decl: ToolDecl
) -> Tool | None:
    prefix = f"subagents.{entry.name}.tools.{tool_id}"
    before = len(work.problems)
    for path, message in check_tool(decl):
        work.report(entry.file, f"{prefix}.{path}", message)
    target: ResolvedCallable | None = None
    if decl.mcp is not None:
        target = unbound_remote_target(tool_id)
    elif decl.callable is not None:
        target = work.resolve(entry.file, f"{prefix}.callable", decl.callable, policy=False)
    input_schema = work.schema(entry.file, f"{prefix}.input_schema", decl.input_schema)
    output_schema = work.schema(entry.file, f"{prefix}.output_schema", decl.output_schema)
    if decl.control_envelope is not None and output_schema is not None:
        for path, message in check_envelope_fields(decl.control_envelope, output_schema):
            work.report(entry.file, f"{prefix}.control_envelope.{path}", message)
    runner_defaults = entry.part.runner_defaults
    if len(work.problems) > before or not (
        target and input_schema and output_schema and runner_defaults
    ):
        return None
    retry = NO_RETRY
    if decl.retry is not None:
        backoff_max_s = decl.retry.backoff_max_s
        retry = RetryPolicy(
            max_attempts=decl.retry.max_attempts,
            backoff_s=decl.retry.backoff_s,
            backoff_max_s=decl.retry.backoff_s if backoff_max_s is None else backoff_max_s,
        )
    requires = None
    if decl.requires is not None:
        requires = Requires(after=tuple(decl.requires.after), max_per_run=decl.requires.max_per_run)
    rate_limit = None
    if decl.rate_limit is not None:
        rate_limit = RateLimit(per_second=decl.rate_limit.per_second, burst=decl.rate_limit.burst)
    return Tool(
        id=tool_id,
        owner=entry.name,
        source_file=entry.file,
        target=target,
        description=decl.description,
        input_schema=input_schema,
        output_schema=output_schema,
        cacheable=decl.cacheable,
        cache_ttl_s=decl.cache_ttl_s,
        timeout_s=decl.timeout_s or runner_defaults.tool_timeout_s,
        retry=retry,
        effect=Effect(decl.effect),
        max_concurrency=decl.max_concurrency,
        rate_limit=rate_limit,
        redact=frozenset(decl.redact),
        requires=requires,
        requires_confirmation=decl.requires_confirmation,
        control_envelope=_control_envelope(decl.control_envelope),
        definition_hash=sha256_digest(
            canonical_json({"id": tool_id, "definition": _tool_dump(decl)})
        ),
        mcp=None
        if decl.mcp is None
        else McpEndpoint(url=decl.mcp.url, tool=decl.mcp.tool, token_env=decl.mcp.token_env),
    )


def _control_envelope(decl: ControlEnvelopeDecl | None) -> ControlEnvelope | None:
    if decl is None:
        return None
    diagnosis = None
    if decl.diagnosis is not None:
        diagnosis = DiagnosisMapping(
            ready_field=decl.diagnosis.ready_field,
            reason_code_field=decl.diagnosis.reason_code_field,
            failure_kind_field=decl.diagnosis.failure_kind_field,
            facts_field=decl.diagnosis.facts_field,
            fields=tuple(decl.diagnosis.fields),
        )
    return ControlEnvelope(
        version=decl.version,
        role=decl.role,
        status_field=decl.graph.status_field,
        continue_statuses=frozenset(decl.graph.continue_statuses),
        stop_statuses=frozenset(decl.graph.stop_statuses),
        diagnosis=diagnosis,
        handoff_fields=tuple(decl.handoff_fields),
    )


def _runner_defaults(decl: RunnerDefaultsDecl) -> RunnerDefaults:
    return RunnerDefaults(
        allowed_tools=tuple(decl.allowed_tools),
        max_calls=decl.max_calls,
        tool_timeout_s=decl.tool_timeout_s,
    )


@dataclass(frozen=True, slots=True)
class _Policy:
    decl: PolicyDecl
    compiled: PolicyCallable


def _policies(work: _Compilation, files: Sequence[RegistryFile], kind: str) -> dict[str, _Policy]:
    first_file: dict[str, str] = {}
    policies: dict[str, _Policy] = {}
    for registry in files:
        declared: Mapping[str, PolicyDecl] = getattr(registry, kind)
        for name, decl in declared.items():
            path = f"{kind}.{name}"
            if name in first_file:
                work.report(
                    registry.file, path, f"{name!r} is already declared in {first_file[name]}"
                )
                continue
            first_file[name] = registry.file
            target = work.resolve(registry.file, f"{path}.callable", decl.callable, policy=True)
            if target is not None:
                shadow = isinstance(decl, GuardrailDecl) and decl.mode == "shadow"
                compiled = PolicyCallable(name, registry.file, target, decl.description, shadow)
                policies[name] = _Policy(decl, compiled)
    return policies


def _evidence_hooks(work: _Compilation, files: Sequence[RegistryFile]) -> list[ResolvedCallable]:
    first_file: dict[str, str] = {}
    hooks: list[ResolvedCallable] = []
    for registry in files:
        for index, ref in registry.evidence:
            path = f"hooks.evidence[{index}]"
            if ref in first_file:
                work.report(
                    registry.file, path, f"{ref!r} is already declared in {first_file[ref]}"
                )
                continue
            first_file[ref] = registry.file
            target = work.resolve(registry.file, path, ref, policy=True)
            if target is not None:
                hooks.append(target)
    return sorted(hooks, key=lambda hook: hook.ref)


def _dump(decl: Any) -> Any:
    return decl.model_dump(mode="json")


def _tool_dump(decl: ToolDecl) -> Any:
    """The declaration without the one of callable/mcp it leaves out, so tools declared
    before `mcp` existed keep their definition hash."""
    dumped = _dump(decl)
    for key in ("callable", "mcp"):
        if dumped[key] is None:
            del dumped[key]
    return dumped
