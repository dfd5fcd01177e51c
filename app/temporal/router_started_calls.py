"""The calls of `non_idempotent` tools a router stretch starts, kept durably before each
starts: a stretch whose worker is lost is not run again when its run may make such a
call, so the call it had in flight gets its `outcome_unknown` receipt from what is kept
here (`RouterActivities.lost`), as a plan's lost call does."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.contract import Contract, Effect
from app.engine.confirmation import ConfirmationDecision
from app.engine.receipt import ErrorKind, Receipt
from app.engine.run import RunIdentity, RunKind, RunState
from app.router.ports import RouterEngine
from app.store.repositories.router_exact_state import RouterExactStateRepository


class StartsKeptEngine:
    """A `RouterEngine` that keeps each call of a `non_idempotent` tool (its seq, call
    key, tool and exact arguments) in the run's exact state before the call starts."""

    def __init__(
        self, engine: RouterEngine, sessions: async_sessionmaker[AsyncSession], run_id: str
    ) -> None:
        self._engine = engine
        self._sessions = sessions
        self._run_id = run_id

    @property
    def contract(self) -> Contract:
        return self._engine.contract

    def open_run(
        self,
        run: RunIdentity,
        kind: RunKind = RunKind.ROUTER,
        *,
        deadline_s: float | None = None,
        first_seq: int = 0,
        parallel_batch_id: str | None = None,
        started: asyncio.Future[None] | None = None,
    ) -> RunState:
        return self._engine.open_run(
            run,
            kind,
            deadline_s=deadline_s,
            first_seq=first_seq,
            parallel_batch_id=parallel_batch_id,
            started=started,
        )

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
    ) -> Receipt:
        tool = self._engine.contract.tools.get(tool_id)
        if tool is not None and tool.effect is Effect.NON_IDEMPOTENT:
            if seq is None:
                seq = state.allocate_seq()
            started = {"seq": seq, "call_key": call_key, "tool": tool_id, "args": dict(args)}
            async with self._sessions.begin() as session:
                await RouterExactStateRepository(session).add_started_call(self._run_id, started)
        return await self._engine.run_call(
            state,
            tool_id,
            args,
            call_key=call_key,
            item_key=item_key,
            checked_fingerprint=checked_fingerprint,
            confirmed=confirmed,
            seq=seq,
        )

    async def record_denied(
        self,
        state: RunState,
        tool_id: str,
        args: Mapping[str, Any],
        *,
        call_key: str,
        reason: str,
        kind: ErrorKind = ErrorKind.GUARDRAIL,
    ) -> Receipt:
        return await self._engine.record_denied(
            state, tool_id, args, call_key=call_key, reason=reason, kind=kind
        )

    def record_not_started(
        self, state: RunState, tool_id: str, args: Mapping[str, Any], *, call_key: str
    ) -> Receipt:
        return self._engine.record_not_started(state, tool_id, args, call_key=call_key)
