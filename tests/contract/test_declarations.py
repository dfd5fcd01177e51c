from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.contract.helpers import base_registry, only_problem, problems_of, write

TOOL = "subagents.worker-a.tools.transform"


def registry_with_tool(**fields: Any) -> dict[str, Any]:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["transform"].update(fields)
    return registry


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda r: r.update(extras={}), "extras"),
        (lambda r: r["subagents"]["worker-a"].update(prompt="x"), "subagents.worker-a.prompt"),
        (
            lambda r: r["subagents"]["worker-a"]["tools"]["transform"].update(args_schema={}),
            f"{TOOL}.args_schema",
        ),
        (
            lambda r: r["subagents"]["worker-a"]["runner_defaults"].update(model="m"),
            "subagents.worker-a.runner_defaults.model",
        ),
        (lambda r: r["guardrails"]["guard"].update(priority=1), "guardrails.guard.priority"),
        (lambda r: r["hooks"].update(before_tool=[]), "hooks.before_tool"),
    ],
)
def test_unknown_fields_are_errors(tmp_path: Path, change: Any, path: str) -> None:
    registry = base_registry()
    change(registry)
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert (problem.path, problem.message) == (path, "unknown field")


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"retry": {"max_attempts": 2, "jitter": True}, "effect": "read"}, "retry.jitter"),
        ({"rate_limit": {"per_second": 1, "burst": 1, "window": 2}}, "rate_limit.window"),
        ({"requires": {"after": [], "max_per_run": 1, "before": ["fetch"]}}, "requires.before"),
    ],
)
def test_unknown_nested_fields_are_errors(tmp_path: Path, fields: Any, path: str) -> None:
    problem = only_problem([write(tmp_path, "r.yml", registry_with_tool(**fields))])
    assert (problem.path, problem.message) == (f"{TOOL}.{path}", "unknown field")


@pytest.mark.parametrize("field", ["callable", "description", "input_schema", "output_schema"])
def test_required_tool_fields(tmp_path: Path, field: str) -> None:
    registry = base_registry()
    del registry["subagents"]["worker-a"]["tools"]["transform"][field]
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    # A tool names a callable or an MCP server (`mcp`): the message says so.
    message = "required field is missing"
    if field == "callable":
        message += ": declare callable or mcp"
    assert (problem.path, problem.message) == (f"{TOOL}.{field}", message)


def test_runner_defaults_are_required(tmp_path: Path) -> None:
    registry = base_registry()
    del registry["subagents"]["worker-a"]["runner_defaults"]
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert problem.path == "subagents.worker-a.runner_defaults"


@pytest.mark.parametrize("description", ["", "   "])
def test_description_must_not_be_empty(tmp_path: Path, description: str) -> None:
    problem = only_problem([write(tmp_path, "r.yml", registry_with_tool(description=description))])
    assert (problem.path, problem.message) == (f"{TOOL}.description", "must not be empty")


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": -1.5}, "timeout_s"),
        ({"timeout_s": "5"}, "timeout_s"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_concurrency": 2.5}, "max_concurrency"),
        ({"cacheable": "true"}, "cacheable"),
        ({"effect": "write"}, "effect"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"retry": {"max_attempts": 2, "backoff_s": -1}}, "retry.backoff_s"),
        ({"rate_limit": {"per_second": 0, "burst": 1}}, "rate_limit.per_second"),
        ({"rate_limit": {"per_second": 1, "burst": 0}}, "rate_limit.burst"),
        ({"requires": {"max_per_run": 0}}, "requires.max_per_run"),
        ({"redact": ["token", ""]}, "redact[1]"),
        ({"requires_confirmation": 1}, "requires_confirmation"),
    ],
)
def test_tool_field_limits(tmp_path: Path, fields: Any, path: str) -> None:
    problem = only_problem([write(tmp_path, "r.yml", registry_with_tool(**fields))])
    assert problem.path == f"{TOOL}.{path}"


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_calls", 0), ("max_calls", -3), ("tool_timeout_s", 0), ("tool_timeout_s", -1)],
)
def test_runner_defaults_must_be_positive(tmp_path: Path, field: str, value: int) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["runner_defaults"][field] = value
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert problem.path == f"subagents.worker-a.runner_defaults.{field}"
    assert "greater than 0" in problem.message


@pytest.mark.parametrize(
    "ref",
    [
        "demo_app.tools",
        "demo_app.tools:",
        ":run",
        "demo app:run",
        "demo_app.tools:run()",
        "a..b:run",
        "a:b:c",
    ],
)
def test_callable_syntax(tmp_path: Path, ref: str) -> None:
    problem = only_problem([write(tmp_path, "r.yml", registry_with_tool(callable=ref))])
    assert problem.path == f"{TOOL}.callable"
    assert "is not a callable reference 'package.module:function'" in problem.message


def test_names_use_a_narrow_alphabet(tmp_path: Path) -> None:
    registry = base_registry()
    tools = registry["subagents"]["worker-a"]["tools"]
    tools["has space"] = tools.pop("fetch")
    registry["subagents"]["worker-a"]["runner_defaults"]["allowed_tools"] = ["transform"]
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert problem.path == "subagents.worker-a.tools.has space"
    assert problem.message.startswith("invalid name: 'has space' is not a name")


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    registry = base_registry()
    tools = registry["subagents"]["worker-a"]["tools"]
    tools["transform"]["timeout_s"] = 0
    tools["fetch"]["description"] = ""
    registry["verifiers"]["verify"]["callable"] = "tests.contract.fixtures_callables.good:missing"
    problems = problems_of([write(tmp_path, "r.yml", registry)])
    assert [(p.path, p.message) for p in problems] == [
        (f"{TOOL}.timeout_s", "Input should be greater than 0"),
        ("subagents.worker-a.tools.fetch.description", "must not be empty"),
        (
            "verifiers.verify.callable",
            "'tests.contract.fixtures_callables.good:missing' does not exist",
        ),
    ]


def test_an_invalid_tool_does_not_echo_as_unregistered(tmp_path: Path) -> None:
    registry = registry_with_tool(bogus=1)
    registry["subagents"]["worker-a"]["tools"]["fetch"]["requires"] = {"after": ["transform"]}
    problems = problems_of([write(tmp_path, "r.yml", registry)])
    assert [(p.path, p.message) for p in problems] == [(f"{TOOL}.bogus", "unknown field")]


def test_an_owner_left_with_no_valid_tool_is_not_reported_twice(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"] = {"transform": {"callable": "x:y"}}
    registry["subagents"]["worker-a"]["runner_defaults"]["allowed_tools"] = ["transform"]
    problems = problems_of([write(tmp_path, "r.yml", registry)])
    assert {p.path for p in problems} == {
        f"{TOOL}.description",
        f"{TOOL}.input_schema",
        f"{TOOL}.output_schema",
    }


def test_owner_needs_at_least_one_tool(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"] = {}
    registry["subagents"]["worker-a"]["runner_defaults"]["allowed_tools"] = []
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert problem.path == "subagents.worker-a.tools"


def test_pieces_of_an_invalid_owner_are_still_checked(tmp_path: Path) -> None:
    registry = base_registry()
    worker = registry["subagents"]["worker-a"]
    worker["tools"]["transform"]["surprise"] = True
    worker["tools"]["fetch"]["callable"] = "tests.contract.fixtures_callables.good:missing"
    worker["runner_defaults"]["max_calls"] = 0
    worker["runner_defaults"]["allowed_tools"] = ["transform", "fetch", "absent"]
    registry["hooks"]["evidence"] = ["not a ref", "tests.contract.fixtures_callables.good:nope"]
    problems = problems_of([write(tmp_path, "r.yml", registry)])
    assert [(p.path, p.message) for p in problems] == [
        (f"{TOOL}.surprise", "unknown field"),
        ("subagents.worker-a.runner_defaults.max_calls", "Input should be greater than 0"),
        (
            "hooks.evidence[0]",
            "'not a ref' is not a callable reference 'package.module:function'",
        ),
        (
            "subagents.worker-a.runner_defaults.allowed_tools[2]",
            "tool 'absent' is not registered",
        ),
        (
            "subagents.worker-a.tools.fetch.callable",
            "'tests.contract.fixtures_callables.good:missing' does not exist",
        ),
        ("hooks.evidence[1]", "'tests.contract.fixtures_callables.good:nope' does not exist"),
    ]


@pytest.mark.parametrize("mode", ["dry-run", "Shadow", 1, None])
def test_a_guardrail_mode_is_enforce_or_shadow(tmp_path: Path, mode: Any) -> None:
    registry = base_registry()
    registry["guardrails"]["guard"]["mode"] = mode
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert problem.path == "guardrails.guard.mode"
    assert "'enforce' or 'shadow'" in problem.message


def test_a_verifier_has_no_mode(tmp_path: Path) -> None:
    registry = base_registry()
    registry["verifiers"]["verify"]["mode"] = "shadow"
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert (problem.path, problem.message) == ("verifiers.verify.mode", "unknown field")
