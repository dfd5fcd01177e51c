"""What a router run needs from its process: the engine, a model client, the prompts,
the limits, somewhere to record its decisions, and the usage ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from app.contract.compiled import Contract
from app.engine.confirmation import ConfirmationDecision
from app.engine.engine import Engine
from app.engine.receipt import ErrorKind, Receipt
from app.engine.run import RunIdentity, RunKind, RunState
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


class RouterEngine(Protocol):
    """What the router asks of the engine (`Engine`, or a wrapper of one)."""

    @property
    def contract(self) -> Contract: ...

    def open_run(
        self,
        run: RunIdentity,
        kind: RunKind = RunKind.ROUTER,
        *,
        deadline_s: float | None = None,
        first_seq: int = 0,
        parallel_batch_id: str | None = None,
        started: asyncio.Future[None] | None = None,
    ) -> RunState: ...

    async def run_call(
        self,
        state: RunState,
        tool_id: str,
        args: Mapping[str, Any],
        *,
        call_key: str,
        item_key: str | None = None,
        checked_fingerprint: str | None = None,
        confirmed: ConfirmationDecision | None = None,
        seq: int | None = None,
    ) -> Receipt: ...

    async def record_denied(
        self,
        state: RunState,
        tool_id: str,
        args: Mapping[str, Any],
        *,
        call_key: str,
        reason: str,
        kind: ErrorKind = ErrorKind.GUARDRAIL,
    ) -> Receipt: ...

    def record_not_started(
        self, state: RunState, tool_id: str, args: Mapping[str, Any], *, call_key: str
    ) -> Receipt: ...


@dataclass(frozen=True, slots=True)
class RouterKit:
    engine: RouterEngine
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
