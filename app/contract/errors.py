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


class RegistryError(Exception):
    def __init__(self, problems: Sequence[ContractProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


class SchemaDefinitionError(Exception):
    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))
