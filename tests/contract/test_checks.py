from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.contract.helpers import base_registry, load, only_problem, problems_of, write

OWNER = "subagents.worker-a"
TRANSFORM = f"{OWNER}.tools.transform"
FETCH = f"{OWNER}.tools.fetch"

ENVELOPE_OUTPUT = {
    "type": "object",
    "properties": {
        "status": {"type": "string"},
        "ready": {"type": "boolean"},
        "reason": {"type": "string"},
        "errors": {"type": "array"},
        "result": {},
    },
    "additionalProperties": False,
}


def envelope(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "version": 1,
        "role": "production",
        "graph": {
            "status_field": "status",
            "continue_statuses": ["success", "partial"],
            "stop_statuses": ["failed"],
        },
        "diagnosis": {"ready_field": "ready", "reason_code_field": "reason", "fields": ["errors"]},
        "handoff_fields": ["result"],
    }
    value.update(changes)
    return value


def with_envelope(tmp_path: Path, value: dict[str, Any]) -> list[tuple[str, str]]:
    registry = base_registry()
    tool = registry["subagents"]["worker-a"]["tools"]["transform"]
    tool["output_schema"] = ENVELOPE_OUTPUT
    tool["control_envelope"] = value
    problems = problems_of([write(tmp_path, "r.yml", registry)])
    prefix = f"{TRANSFORM}.control_envelope"
    return [(p.path.removeprefix(prefix), p.message) for p in problems]


def tool_problem(tmp_path: Path, tool: str = "transform", **fields: Any) -> tuple[str, str]:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"][tool].update(fields)
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    return problem.path, problem.message


def test_a_valid_envelope_compiles(tmp_path: Path) -> None:
    registry = base_registry()
    tool = registry["subagents"]["worker-a"]["tools"]["transform"]
    tool["output_schema"] = ENVELOPE_OUTPUT
    tool["control_envelope"] = envelope()
    compiled = load([write(tmp_path, "r.yml", registry)]).tools["transform"].control_envelope
    assert compiled is not None
    assert compiled.status_field == "status"
    assert compiled.continue_statuses == frozenset({"success", "partial"})
    assert compiled.stop_statuses == frozenset({"failed"})
    assert compiled.diagnosis is not None
    assert compiled.diagnosis.fields == ("errors",)
    assert compiled.diagnosis.facts_field is None
    assert compiled.handoff_fields == ("result",)


def test_envelope_status_field_is_required(tmp_path: Path) -> None:
    value = envelope()
    del value["graph"]["status_field"]
    assert with_envelope(tmp_path, value) == [(".graph.status_field", "required field is missing")]


@pytest.mark.parametrize("key", ["continue_statuses", "stop_statuses"])
def test_envelope_status_lists_must_not_be_empty(tmp_path: Path, key: str) -> None:
    value = envelope()
    value["graph"][key] = []
    [(path, message)] = with_envelope(tmp_path, value)
    assert path == f".graph.{key}"
    assert "at least 1 item" in message


def test_envelope_status_in_both_lists(tmp_path: Path) -> None:
    value = envelope()
    value["graph"]["stop_statuses"] = ["failed", "partial"]
    assert with_envelope(tmp_path, value) == [
        (".graph", "status 'partial' is both a continue and a stop status")
    ]


def test_envelope_duplicate_status(tmp_path: Path) -> None:
    value = envelope()
    value["graph"]["continue_statuses"] = ["success", "success"]
    assert with_envelope(tmp_path, value) == [
        (".graph.continue_statuses", "'success' is listed 2 times")
    ]


def test_envelope_field_with_two_roles(tmp_path: Path) -> None:
    value = envelope(diagnosis={"ready_field": "status", "fields": ["errors"]})
    assert with_envelope(tmp_path, value) == [
        (".diagnosis.ready_field", "field 'status' is already mapped by graph.status_field")
    ]


def test_envelope_role_field_listed_in_diagnosis_fields(tmp_path: Path) -> None:
    value = envelope(diagnosis={"ready_field": "ready", "fields": ["ready", "errors", "errors"]})
    assert with_envelope(tmp_path, value) == [
        (".diagnosis.fields", "'errors' is listed 2 times"),
        (".diagnosis.fields", "field 'ready' already has a role in the envelope"),
    ]


def test_envelope_duplicate_handoff_field(tmp_path: Path) -> None:
    value = envelope(handoff_fields=["result", "result"])
    assert with_envelope(tmp_path, value) == [(".handoff_fields", "'result' is listed 2 times")]


def test_envelope_empty_diagnosis(tmp_path: Path) -> None:
    assert with_envelope(tmp_path, envelope(diagnosis={})) == [
        (".diagnosis", "maps no field: name at least one, or remove it")
    ]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda e: e.update(mode="x"), ".mode"),
        (lambda e: e["graph"].update(retry_statuses=["x"]), ".graph.retry_statuses"),
        (lambda e: e["diagnosis"].update(severity_field="s"), ".diagnosis.severity_field"),
    ],
)
def test_envelope_unknown_keys(tmp_path: Path, change: Any, path: str) -> None:
    value = envelope()
    change(value)
    assert with_envelope(tmp_path, value) == [(path, "unknown field")]


def test_envelope_version_must_be_1(tmp_path: Path) -> None:
    [(path, message)] = with_envelope(tmp_path, envelope(version=2))
    assert path == ".version"
    assert "Input should be 1" in message


def test_envelope_fields_must_exist_in_a_closed_output_schema(tmp_path: Path) -> None:
    value = envelope(handoff_fields=["result", "summary"])
    value["graph"]["status_field"] = "state"
    assert with_envelope(tmp_path, value) == [
        (".graph.status_field", "field 'state' is not a property of the closed output_schema"),
        (".handoff_fields", "field 'summary' is not a property of the closed output_schema"),
    ]


def test_cacheable_needs_a_safe_effect(tmp_path: Path) -> None:
    assert tool_problem(tmp_path, cacheable=True) == (
        f"{TRANSFORM}.cacheable",
        "a cacheable tool must have effect read or idempotent, not non_idempotent",
    )
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["transform"].update(
        cacheable=True, effect="idempotent"
    )
    assert load([write(tmp_path, "ok.yml", registry)]).tools["transform"].cacheable


def test_cache_ttl_needs_cacheable(tmp_path: Path) -> None:
    assert tool_problem(tmp_path, cache_ttl_s=10) == (
        f"{TRANSFORM}.cache_ttl_s",
        "only a cacheable tool has a cache TTL",
    )


def test_retry_needs_a_safe_effect(tmp_path: Path) -> None:
    assert tool_problem(tmp_path, retry={"max_attempts": 2}) == (
        f"{TRANSFORM}.retry",
        "a retried tool must have effect read or idempotent, not non_idempotent",
    )
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["transform"]["retry"] = {"max_attempts": 1}
    load([write(tmp_path, "ok.yml", registry)])


def test_backoff_max_at_least_backoff(tmp_path: Path) -> None:
    retry = {"max_attempts": 2, "backoff_s": 2, "backoff_max_s": 1}
    assert tool_problem(tmp_path, "fetch", retry=retry) == (
        f"{FETCH}.retry.backoff_max_s",
        "must be at least backoff_s",
    )


def test_redact_duplicates(tmp_path: Path) -> None:
    assert tool_problem(tmp_path, redact=["token", "token"]) == (
        f"{TRANSFORM}.redact",
        "'token' is listed 2 times",
    )


def test_allowed_tools_must_be_this_owners_tools(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["runner_defaults"]["allowed_tools"] = [
        "transform",
        "transfrom",
        "transform",
    ]
    problems = problems_of([write(tmp_path, "r.yml", registry)])
    assert [(p.path, p.message) for p in problems] == [
        (f"{OWNER}.runner_defaults.allowed_tools", "'transform' is listed 2 times"),
        (f"{OWNER}.runner_defaults.allowed_tools[1]", "tool 'transfrom' is not registered"),
    ]


def test_allowed_tools_naming_another_owners_tool(tmp_path: Path) -> None:
    registry = base_registry()
    tools = registry["subagents"]["worker-a"]["tools"]
    registry["subagents"]["worker-b"] = {
        "tools": {"fetch": tools.pop("fetch")},
        "runner_defaults": {"allowed_tools": ["transform"], "max_calls": 1, "tool_timeout_s": 1},
    }
    registry["subagents"]["worker-a"]["runner_defaults"]["allowed_tools"] = ["transform"]
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert (problem.path, problem.message) == (
        "subagents.worker-b.runner_defaults.allowed_tools[0]",
        "tool 'transform' belongs to owner 'worker-a', not 'worker-b'",
    )


@pytest.mark.parametrize(
    ("requires", "path", "message"),
    [
        ({}, "requires", "declares no condition: set after and/or max_per_run, or remove it"),
        (
            {"after": []},
            "requires",
            "declares no condition: set after and/or max_per_run, or remove it",
        ),
        ({"after": ["nope"]}, "requires.after[0]", "tool 'nope' is not registered"),
        ({"after": ["fetch"]}, "requires.after[0]", "a tool cannot require itself"),
        ({"after": ["transform", "transform"]}, "requires.after", "'transform' is listed 2 times"),
    ],
)
def test_requires_rules(tmp_path: Path, requires: Any, path: str, message: str) -> None:
    assert tool_problem(tmp_path, "fetch", requires=requires) == (f"{FETCH}.{path}", message)


def test_requires_cycle(tmp_path: Path) -> None:
    registry = base_registry()
    tools = registry["subagents"]["worker-a"]["tools"]
    tools["transform"]["requires"] = {"after": ["fetch"]}
    tools["fetch"]["requires"] = {"after": ["transform"]}
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert (problem.path, problem.message) == (
        f"{OWNER}.tools",
        "requires.after forms a cycle; these tools could never run: fetch, transform",
    )


def test_requires_chain_without_cycle_is_fine(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["fetch"]["requires"] = {"after": ["transform"]}
    load([write(tmp_path, "r.yml", registry)])
