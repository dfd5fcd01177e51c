"""What a router run needs from its process: the engine, a model client, the prompts,
the limits, and somewhere to record its decisions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from app.engine.engine import Engine
from app.foundation.redaction import DEFAULT_REDACTOR, Redactor
from app.observability.router import ChatModel
from app.router.limits import RouterLimits
from app.router.prompts import PromptSet


class DecisionSink(Protocol):
    def record(
        self,
        kind: str,
        detail: Mapping[str, Any],
        *,
        tool: str | None = None,
        call_key: str | None = None,
    ) -> None:
        """Keep one decision of the run (already redacted) without blocking."""
        ...


@dataclass(frozen=True, slots=True)
class RouterKit:
    engine: Engine
    llm: ChatModel
    prompts: PromptSet
    limits: RouterLimits
    redactors: Mapping[str, Redactor]

    @classmethod
    def build(
        cls, engine: Engine, llm: ChatModel, prompts: PromptSet, limits: RouterLimits
    ) -> RouterKit:
        redactors = {
            tool_id: Redactor(tool.redact) if tool.redact else DEFAULT_REDACTOR
            for tool_id, tool in engine.contract.tools.items()
        }
        return cls(engine, llm, prompts, limits, redactors)
