"""One registry file: YAML text to validated declarations, with every shape problem.

pydantic reports every shape problem of the file in one pass. When there are
some, the file is then re-read piece by piece (each tool, each owner's runner
defaults, each policy) so the valid pieces still go through the later checks
(callables, schemas, references) and the problems of a file come all at once.
The ids of invalid tools are kept so references to them do not produce a
second, misleading "not registered" problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from app.contract.declarations import (
    GuardrailDecl,
    PolicyDecl,
    RegistryDecl,
    RunnerDefaultsDecl,
    ToolDecl,
    is_callable_ref,
    is_name,
)
from app.contract.errors import ContractProblem
from app.foundation.yaml_loader import YAMLLoadError, load_yaml_file

_Model = TypeVar("_Model", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class OwnerPart:
    """An owner's valid declarations; `runner_defaults` is None when they are invalid."""

    tools: Mapping[str, ToolDecl]
    runner_defaults: RunnerDefaultsDecl | None
    allowed_tools: tuple[str, ...]
    invalid_tools: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class RegistryFile:
    file: str
    owners: Mapping[str, OwnerPart] = field(default_factory=dict)
    guardrails: Mapping[str, GuardrailDecl] = field(default_factory=dict)
    verifiers: Mapping[str, PolicyDecl] = field(default_factory=dict)
    # (position in hooks.evidence, reference)
    evidence: tuple[tuple[int, str], ...] = ()


def read_registry_file(
    path: Path, max_bytes: int, max_depth: int
) -> tuple[RegistryFile, list[ContractProblem]]:
    file = str(path)
    try:
        raw = load_yaml_file(path, max_bytes=max_bytes, max_depth=max_depth)
    except YAMLLoadError as exc:
        return RegistryFile(file), [ContractProblem(file, "", str(exc))]
    return validate_registry(raw, file)


def validate_registry(raw: Any, file: str) -> tuple[RegistryFile, list[ContractProblem]]:
    if not isinstance(raw, dict) or not raw:
        message = "the file declares nothing" if not raw else "the top level must be a mapping"
        return RegistryFile(file), [ContractProblem(file, "", message)]
    try:
        declaration = RegistryDecl.model_validate(raw)
    except ValidationError as exc:
        problems = [_problem(file, error) for error in exc.errors()]
        return _valid_pieces(raw, file), problems
    owners = {
        name: OwnerPart(
            tools=owner.tools,
            runner_defaults=owner.runner_defaults,
            allowed_tools=tuple(owner.runner_defaults.allowed_tools),
        )
        for name, owner in declaration.subagents.items()
    }
    return RegistryFile(
        file,
        owners,
        declaration.guardrails,
        declaration.verifiers,
        tuple(enumerate(declaration.hooks.evidence)),
    ), []


def _valid_pieces(raw: dict[str, Any], file: str) -> RegistryFile:
    owners: dict[str, OwnerPart] = {}
    for name, owner in _named_mappings(raw.get("subagents")):
        tools = owner.get("tools")
        valid = {
            tool_id: _valid(ToolDecl, tool) if is_name(tool_id) else None
            for tool_id, tool in (tools.items() if isinstance(tools, dict) else ())
            if isinstance(tool_id, str)
        }
        runner_defaults = owner.get("runner_defaults")
        allowed = (
            runner_defaults.get("allowed_tools") if isinstance(runner_defaults, dict) else None
        )
        owners[name] = OwnerPart(
            tools={tool_id: tool for tool_id, tool in valid.items() if tool is not None},
            runner_defaults=_valid(RunnerDefaultsDecl, runner_defaults),
            allowed_tools=tuple(t for t in allowed if isinstance(t, str))
            if isinstance(allowed, list)
            else (),
            invalid_tools=frozenset(tool_id for tool_id, tool in valid.items() if tool is None),
        )
    guardrails = {
        name: policy
        for name, entry in _named_mappings(raw.get("guardrails"))
        if (policy := _valid(GuardrailDecl, entry)) is not None
    }
    verifiers = {
        name: verifier
        for name, entry in _named_mappings(raw.get("verifiers"))
        if (verifier := _valid(PolicyDecl, entry)) is not None
    }
    hooks = raw.get("hooks")
    evidence = hooks.get("evidence") if isinstance(hooks, dict) else None
    refs = tuple(
        (index, ref)
        for index, ref in enumerate(evidence if isinstance(evidence, list) else [])
        if is_callable_ref(ref)
    )
    return RegistryFile(file, owners, guardrails, verifiers, refs)


def _named_mappings(value: Any) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(value, dict):
        return []
    return [
        (name, item) for name, item in value.items() if is_name(name) and isinstance(item, dict)
    ]


def _valid(model: type[_Model], raw: Any) -> _Model | None:
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None


def _problem(file: str, error: ErrorDetails) -> ContractProblem:
    loc = list(error["loc"])
    prefix = ""
    if loc and loc[-1] == "[key]":
        loc.pop()
        prefix = "invalid name: "
    if error["type"] == "extra_forbidden":
        message = "unknown field"
    elif error["type"] == "missing":
        message = "required field is missing"
    elif error["type"] == "value_error":
        message = str(error.get("ctx", {}).get("error", error["msg"]))
    else:
        message = error["msg"]
    return ContractProblem(file, key_path(loc), prefix + message)


def key_path(parts: Sequence[int | str]) -> str:
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path
