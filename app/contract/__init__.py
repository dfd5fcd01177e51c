"""The registry contract: explicit YAML loading, mechanical validation, compilation.

`load_contract` is the entry point; it returns an immutable, hashed `Contract`
or raises `RegistryError` listing every problem in every file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.contract.compiled import (
    NO_RETRY,
    Contract,
    ControlEnvelope,
    DiagnosisMapping,
    Effect,
    Owner,
    PolicyCallable,
    RateLimit,
    Requires,
    ResolvedCallable,
    RetryPolicy,
    RunnerDefaults,
    Tool,
)
from app.contract.compiler import compile_contract
from app.contract.errors import ContractProblem, RegistryError, SchemaDefinitionError
from app.contract.registry_file import RegistryFile, read_registry_file
from app.contract.schemas import CompiledSchema, SchemaProblem, compile_schema
from app.foundation.yaml_loader import DEFAULT_MAX_DEPTH, DEFAULT_MAX_FILE_BYTES

__all__ = [
    "NO_RETRY",
    "CompiledSchema",
    "Contract",
    "ContractProblem",
    "ControlEnvelope",
    "DiagnosisMapping",
    "Effect",
    "Owner",
    "PolicyCallable",
    "RateLimit",
    "RegistryError",
    "Requires",
    "ResolvedCallable",
    "RetryPolicy",
    "RunnerDefaults",
    "SchemaDefinitionError",
    "SchemaProblem",
    "Tool",
    "compile_schema",
    "load_contract",
]


def load_contract(
    paths: Sequence[Path],
    allowed_modules: Sequence[str] | None = None,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Contract:
    """Load, check and compile registry files; every problem found is in the RegistryError."""
    if not paths:
        raise RegistryError([ContractProblem("", "", "no registry file given")])
    problems: list[ContractProblem] = []
    files: list[RegistryFile] = []
    seen: set[Path] = set()
    for path in paths:
        resolved = Path(path).resolve()
        if resolved in seen:
            problems.append(ContractProblem(str(path), "", "the file is listed more than once"))
            continue
        seen.add(resolved)
        registry, found = read_registry_file(Path(path), max_file_bytes, max_depth)
        files.append(registry)
        problems.extend(found)
    try:
        contract = compile_contract(files, allowed_modules)
    except RegistryError as exc:
        problems.extend(exc.problems)
    if problems:
        raise RegistryError(problems)
    return contract
