"""Mechanical rules that relate several fields of a declaration, or several tools.

Each check yields every problem it finds (as (key path, message) pairs relative
to the declaration it is given) instead of stopping at the first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence

from app.contract.declarations import ControlEnvelopeDecl, ToolDecl
from app.contract.schemas import CompiledSchema

Finding = tuple[str, str]


def check_tool(decl: ToolDecl) -> Iterator[Finding]:
    if decl.callable is None and decl.mcp is None:
        yield "callable", "required field is missing: declare callable or mcp"
    elif decl.callable is not None and decl.mcp is not None:
        yield "mcp", "declare callable or mcp, not both"
    safe_to_repeat = decl.effect in ("read", "idempotent")
    if decl.cacheable and not safe_to_repeat:
        yield (
            "cacheable",
            f"a cacheable tool must have effect read or idempotent, not {decl.effect}",
        )
    if decl.cache_ttl_s is not None and not decl.cacheable:
        yield "cache_ttl_s", "only a cacheable tool has a cache TTL"
    if decl.retry is not None:
        if decl.retry.max_attempts > 1 and not safe_to_repeat:
            yield "retry", f"a retried tool must have effect read or idempotent, not {decl.effect}"
        if decl.retry.backoff_max_s is not None and decl.retry.backoff_max_s < decl.retry.backoff_s:
            yield "retry.backoff_max_s", "must be at least backoff_s"
    yield from _duplicates("redact", decl.redact)
    if decl.requires is not None and not decl.requires.after and decl.requires.max_per_run is None:
        yield "requires", "declares no condition: set after and/or max_per_run, or remove it"
    if decl.requires is not None:
        yield from _duplicates("requires.after", decl.requires.after)
    if decl.control_envelope is not None:
        for path, message in check_envelope(decl.control_envelope):
            yield f"control_envelope.{path}", message


def check_envelope(envelope: ControlEnvelopeDecl) -> Iterator[Finding]:
    graph = envelope.graph
    yield from _duplicates("graph.continue_statuses", graph.continue_statuses)
    yield from _duplicates("graph.stop_statuses", graph.stop_statuses)
    for status in sorted(set(graph.continue_statuses) & set(graph.stop_statuses)):
        yield "graph", f"status {status!r} is both a continue and a stop status"
    roles = {"graph.status_field": graph.status_field}
    diagnosis = envelope.diagnosis
    if diagnosis is not None:
        named = {
            "diagnosis.ready_field": diagnosis.ready_field,
            "diagnosis.reason_code_field": diagnosis.reason_code_field,
            "diagnosis.failure_kind_field": diagnosis.failure_kind_field,
            "diagnosis.facts_field": diagnosis.facts_field,
        }
        roles.update({key: value for key, value in named.items() if value is not None})
        if len(roles) == 1 and not diagnosis.fields:
            yield "diagnosis", "maps no field: name at least one, or remove it"
        yield from _duplicates("diagnosis.fields", diagnosis.fields)
        for name in sorted(set(diagnosis.fields) & set(roles.values())):
            yield "diagnosis.fields", f"field {name!r} already has a role in the envelope"
    seen: dict[str, str] = {}
    for key, name in roles.items():
        if name in seen:
            yield key, f"field {name!r} is already mapped by {seen[name]}"
        else:
            seen[name] = key
    yield from _duplicates("handoff_fields", envelope.handoff_fields)


def check_envelope_fields(
    envelope: ControlEnvelopeDecl, output_schema: CompiledSchema
) -> Iterator[Finding]:
    """A closed output schema must declare every field the envelope maps."""
    if not output_schema.is_closed_object:
        return
    mapped = {"graph.status_field": [envelope.graph.status_field]}
    if envelope.diagnosis is not None:
        diagnosis = envelope.diagnosis
        for key in ("ready_field", "reason_code_field", "failure_kind_field", "facts_field"):
            value = getattr(diagnosis, key)
            mapped[f"diagnosis.{key}"] = [value] if value is not None else []
        mapped["diagnosis.fields"] = diagnosis.fields
    mapped["handoff_fields"] = envelope.handoff_fields
    for key, names in mapped.items():
        for name in names:
            if name not in output_schema.declared_properties:
                yield key, f"field {name!r} is not a property of the closed output_schema"


def check_owner(
    owner: str,
    tools: Mapping[str, ToolDecl],
    allowed: Sequence[str],
    tool_owners: Mapping[str, str],
    invalid_tools: Iterable[str],
) -> Iterator[Finding]:
    """References from an owner's runner defaults and tools to its tools."""
    known_invalid = set(invalid_tools)

    def reference(path: str, tool_id: str) -> Iterator[Finding]:
        if tool_id in tools or tool_id in known_invalid:
            return
        if tool_id in tool_owners:
            yield path, f"tool {tool_id!r} belongs to owner {tool_owners[tool_id]!r}, not {owner!r}"
        else:
            yield path, f"tool {tool_id!r} is not registered"

    yield from _duplicates("runner_defaults.allowed_tools", allowed)
    for index, tool_id in enumerate(allowed):
        yield from reference(f"runner_defaults.allowed_tools[{index}]", tool_id)
    for tool_id, tool in tools.items():
        if tool.requires is None:
            continue
        for index, required in enumerate(tool.requires.after):
            path = f"tools.{tool_id}.requires.after[{index}]"
            if required == tool_id:
                yield path, "a tool cannot require itself"
            else:
                yield from reference(path, required)
    yield from _requirement_cycles(tools)


def _requirement_cycles(tools: Mapping[str, ToolDecl]) -> Iterator[Finding]:
    waiting = {
        tool_id: {t for t in tool.requires.after if t in tools and t != tool_id}
        if tool.requires is not None
        else set()
        for tool_id, tool in tools.items()
    }
    # Peel off tools whose requirements can be met; what remains waits on a cycle.
    ready = [tool_id for tool_id, needs in waiting.items() if not needs]
    while ready:
        done = ready.pop()
        del waiting[done]
        for tool_id, needs in waiting.items():
            if done in needs:
                needs.discard(done)
                if not needs:
                    ready.append(tool_id)
    if waiting:
        names = ", ".join(sorted(waiting))
        yield "tools", f"requires.after forms a cycle; these tools could never run: {names}"


def _duplicates(path: str, values: Iterable[str]) -> Iterator[Finding]:
    for value, count in Counter(values).items():
        if count > 1:
            yield path, f"{value!r} is listed {count} times"
