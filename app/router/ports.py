"""What a router run needs from its process: the engine, a model client, the prompts,
the limits, somewhere to record its decisions, and the usage ledger."""

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
class UsageEntry:
    """One model request's tokens and cost (nano-units; None: the profile has no prices)."""

    run_id: str
    owner: str
    caller: str | None
    profile: str
    role: str
    input_tokens: int
    output_tokens: int
    cost_nanos: int | None


class UsageLedger(Protocol):
    async def record(self, entry: UsageEntry) -> None:
        """Keep the entry durably before the run goes on."""
        ...


@dataclass(frozen=True, slots=True)
class RouterKit:
    engine: Engine
    llm: ChatModel
    prompts: PromptSet
    limits: RouterLimits
    redactors: Mapping[str, Redactor]
    ledger: UsageLedger

    @classmethod
    def build(
        cls,
        engine: Engine,
        llm: ChatModel,
        prompts: PromptSet,
        limits: RouterLimits,
        ledger: UsageLedger,
    ) -> RouterKit:
        redactors = {
            tool_id: Redactor(tool.redact) if tool.redact else DEFAULT_REDACTOR
            for tool_id, tool in engine.contract.tools.items()
        }
        return cls(engine, llm, prompts, limits, redactors, ledger)
