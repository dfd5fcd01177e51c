"""Use-cases for caller-declared plans: preflight, record the run, execute, report."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from uuid import uuid4

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.contract import Contract
from app.engine.engine import Engine
from app.engine.errors import ReceiptWriteFailed
from app.engine.plan import ParallelPlan, PlanLimits, SequentialPlan
from app.engine.preflight import PlanProblem, preflight_parallel, preflight_sequential
from app.engine.redaction import redact_text
from app.engine.run import RunIdentity
from app.service.errors import PlanRejected, StorageUnavailable
from app.service.writer import GroupCommitWriter
from app.store.repositories.runs import RunRepository

T = TypeVar("T")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class PlanService:
    contract: Contract
    engine: Engine
    sessions: async_sessionmaker[AsyncSession]
    writer: GroupCommitWriter
    limits: PlanLimits
    instance_id: str

    async def run_sequential(self, plan: SequentialPlan, caller: str | None) -> dict[str, Any]:
        checked = preflight_sequential(plan, self.contract, self.limits)
        if checked.problems:
            self._reject("sequential", plan.owner, caller, checked.problems)
        identity = await self._open_run("sequential", plan.owner, caller, plan.context, None)
        outcome = await self._settle(self.engine.run_sequential(identity, plan, checked.admitted))
        await self._finish(identity.run_id, outcome.status, len(outcome.receipts))
        return outcome.to_response()

    async def run_parallel(self, plan: ParallelPlan, caller: str | None) -> dict[str, Any]:
        checked = preflight_parallel(plan, self.contract, self.limits)
        if checked.problems:
            self._reject("parallel", plan.owner, caller, checked.problems)
        batch_id = str(uuid4())
        identity = await self._open_run("parallel", plan.owner, caller, plan.context, batch_id)
        outcome = await self._settle(
            self.engine.run_parallel(identity, plan, checked.admitted, parallel_batch_id=batch_id)
        )
        await self._finish(
            identity.run_id, outcome.status, sum(len(lane.receipts) for lane in outcome.lanes)
        )
        return outcome.to_response()

    def _reject(
        self, kind: str, owner: str, caller: str | None, problems: Sequence[PlanProblem]
    ) -> None:
        self.writer.emit_row(
            {
                "run_id": None,
                "at": _now(),
                "kind": "plan.rejected",
                "caller": caller,
                "tool": None,
                "call_key": None,
                "item_key": None,
                "detail": {
                    "plan_kind": kind,
                    "owner": redact_text(owner),
                    "problems": [
                        {"pointer": redact_text(p.pointer), "message": redact_text(p.message)}
                        for p in problems
                    ],
                },
            }
        )
        raise PlanRejected(problems)

    async def _open_run(
        self,
        kind: str,
        owner: str,
        caller: str | None,
        context: Mapping[str, Any],
        batch_id: str | None,
    ) -> RunIdentity:
        run_id = str(uuid4())
        # The run row is committed before the first call runs, so a crash leaves a trace.
        try:
            async with self.sessions.begin() as session:
                await RunRepository(session).create(
                    id=run_id,
                    kind=kind,
                    owner=owner,
                    contract_hash=self.contract.hash,
                    instance_id=self.instance_id,
                    caller=caller,
                    parallel_batch_id=batch_id,
                )
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run could not be recorded: {exc}") from exc
        self.writer.emit_row(
            {
                "run_id": run_id,
                "at": _now(),
                "kind": "plan.accepted",
                "caller": caller,
                "tool": None,
                "call_key": None,
                "item_key": None,
                "detail": {"plan_kind": kind, "owner": owner},
            }
        )
        return RunIdentity(
            run_id=run_id,
            owner=owner,
            caller=caller,
            context=context,
            contract_hash=self.contract.hash,
        )

    async def _settle(self, work: Awaitable[T]) -> T:
        try:
            return await work
        except ReceiptWriteFailed as exc:
            raise StorageUnavailable(str(exc)) from exc

    async def _finish(self, run_id: str, status: str, call_count: int) -> None:
        try:
            async with self.sessions.begin() as session:
                await RunRepository(session).finish(
                    run_id, status=status, call_count=call_count, finished_at=_now()
                )
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run's end could not be recorded: {exc}") from exc
