"""Registry builders and loaders shared by the contract tests."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.contract import Contract, ContractProblem, RegistryError, load_contract

GOOD = "tests.contract.fixtures_callables.good"
BAD = "tests.contract.fixtures_callables.bad"

TEXT_OBJECT = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


def transform_tool(**overrides: Any) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "callable": f"{GOOD}:transform",
        "description": "Upper-case one text.",
        "input_schema": copy.deepcopy(TEXT_OBJECT),
        "output_schema": copy.deepcopy(TEXT_OBJECT),
    }
    tool.update(overrides)
    return tool


def base_registry() -> dict[str, Any]:
    return {
        "subagents": {
            "worker-a": {
                "tools": {
                    "transform": transform_tool(),
                    "fetch": {
                        "callable": f"{GOOD}:fetch",
                        "description": "Fetch one key.",
                        "input_schema": {},
                        "output_schema": {},
                        "effect": "read",
                        "cacheable": True,
                    },
                },
                "runner_defaults": {
                    "allowed_tools": ["transform", "fetch"],
                    "max_calls": 4,
                    "tool_timeout_s": 120,
                },
            }
        },
        "guardrails": {"guard": {"callable": f"{GOOD}:guard", "description": "Allow all."}},
        "verifiers": {"verify": {"callable": f"{GOOD}:verify", "description": "Always done."}},
        "hooks": {"evidence": [f"{GOOD}:record"]},
    }


def owner(*tool_ids: str, **tools: dict[str, Any]) -> dict[str, Any]:
    return {
        "tools": tools,
        "runner_defaults": {
            "allowed_tools": list(tool_ids or tools),
            "max_calls": 4,
            "tool_timeout_s": 60,
        },
    }


def write(directory: Path, name: str, content: Any) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def load(paths: Sequence[Path], allowed_modules: Sequence[str] | None = None) -> Contract:
    return load_contract(paths, allowed_modules)


def problems_of(
    paths: Sequence[Path], allowed_modules: Sequence[str] | None = None, **options: Any
) -> list[ContractProblem]:
    with pytest.raises(RegistryError) as info:
        load_contract(paths, allowed_modules, **options)
    return info.value.problems


def only_problem(paths: Sequence[Path], **options: Any) -> ContractProblem:
    problems = problems_of(paths, **options)
    assert len(problems) == 1, problems
    return problems[0]
