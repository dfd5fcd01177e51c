"""Errors raised while loading and compiling registries.

Exception
├── RegistryError            one or more ContractProblem; load_contract raises it
└── SchemaDefinitionError    a JSON Schema that cannot be used as a gate
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ContractProblem:
    file: str
    path: str
    message: str

    def __str__(self) -> str:
        if self.path:
            return f"{self.file}: {self.path}: {self.message}"
        return f"{self.file}: {self.message}"


MAX_RENDERED_PROBLEMS = 200


class RegistryError(Exception):
    """Every problem found is in `problems`; rendering stops after a bound, saying so."""

    def __init__(self, problems: Sequence[ContractProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.lines()))

    def lines(self, limit: int = MAX_RENDERED_PROBLEMS) -> list[str]:
        lines = [str(problem) for problem in self.problems[:limit]]
        hidden = len(self.problems) - limit
        if hidden > 0:
            lines.append(f"... and {hidden} more problem(s)")
        return lines


class SchemaDefinitionError(Exception):
    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))
