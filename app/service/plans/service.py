"""Use-cases for caller-declared plans: preflight and record the run; `plans.runs` executes it.

A run's start commits before its first call runs, so that a crash leaves a run
to be marked `interrupted`, with one exception: a plan whose calls all name
tools declared `effect: read`, whose caller waits for its end and claimed no
idempotency key, queues its start and goes on. The start commits with or before
the run's first receipts, the run answers only once both are durable, and a
call of a tool with effects that such a run still reaches (a dispatch) waits
for the start (`app.engine.run.RunState`). A crash before that commit leaves no
trace of the run, which ran no call with effects; the request waits for one
commit instead of two (`docs/decisions.md`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.contract import Contract, Effect
from app.engine import (
    Engine,
    ParallelPlan,
    PlanLimits,
    PlannedCall,
    PlanProblem,
    ReadablePlan,
    RunIdentity,
    SequentialPlan,
    preflight_parallel,
    preflight_sequential,
    readable_problems,
)
from app.foundation.ids import new_run_id
from app.observability.context import bind_run
from app.observability.plans import record_plan_rejected
from app.service.errors import PlanRejected
from app.service.idempotency import IdempotencyClaim
from app.service.plans.context import ContextRedaction
from app.service.plans.digest import plan_digest
from app.service.plans.executor import LocalExecutor, PlanExecutor
from app.service.plans.mcp_call import MCP
from app.service.rejection_audit import RejectionAudit, rejection_detail
from app.service.runs.records import record_run_start
from app.service.runs.tasks import SupervisedRun
from app.store.journal.writer import GroupCommitWriter

PLAN_REJECTED = "plan.rejected"


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
    max_stored_output_bytes: int
    # Where preflighted plans and MCP one-call runs run (resumed plans run locally).
    executor: PlanExecutor = field(default_factory=LocalExecutor)
    # Rows for rejected plans: sanitized, bounded per caller (`rejection_audit`).
    rejections: RejectionAudit = field(init=False)
    context_redaction: ContextRedaction = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rejections", RejectionAudit(self.writer.emit_row, PLAN_REJECTED))
        object.__setattr__(self, "context_redaction", ContextRedaction(self.contract))

    async def open_sequential(
        self,
        plan: SequentialPlan,
        caller: str | None,
        claim: IdempotencyClaim | None = None,
        *,
        answered_at_end: bool = False,
    ) -> SupervisedRun:
        """Preflight, then record the run (and claim `claim`); the calls run under the supervisor.

        `answered_at_end`: the caller is answered once the run ended, not as soon as
        it is recorded; a plan of read tools alone then does not wait for its start
        to commit (the module's docstring).

        Raises PlanRejected (nothing recorded but the audit event), IdempotencyKeyTaken,
        StorageUnavailable.
        """
        checked = preflight_sequential(plan, self.contract, self.limits)
        problems = checked.problems or self.executor.problems(plan)
        if problems:
            self._reject("sequential", plan.owner, caller, problems)
        identity, started = await self._open_run(
            "sequential",
            plan_digest(plan),
            plan.owner,
            caller,
            plan.context,
            None,
            claim,
            answered_at_end
            and claim is None
            and self.executor.defers_start
            and self._reads_only(plan.calls),
        )
        return self.executor.sequential(self, identity, plan, checked.admitted, started, claim)

    async def open_parallel(
        self,
        plan: ParallelPlan,
        caller: str | None,
        claim: IdempotencyClaim | None = None,
        *,
        answered_at_end: bool = False,
    ) -> SupervisedRun:
        """As `open_sequential`, for a parallel plan."""
        checked = preflight_parallel(plan, self.contract, self.limits)
        problems = checked.problems or self.executor.problems(plan)
        if problems:
            self._reject("parallel", plan.owner, caller, problems)
        batch_id = str(uuid4())
        identity, started = await self._open_run(
            "parallel",
            plan_digest(plan),
            plan.owner,
            caller,
            plan.context,
            batch_id,
            claim,
            answered_at_end
            and claim is None
            and self.executor.defers_start
            and self._reads_only(call for lane in plan.lanes for call in lane.calls),
        )
        return self.executor.parallel(
            self, identity, plan, checked.admitted, batch_id, started, claim
        )

    def problems_in(self, readable: ReadablePlan) -> list[PlanProblem]:
        """Preflight's problems in the parts of a plan a body of the wrong shape
        still gave (nothing is recorded: the body was no plan)."""
        return readable_problems(readable, self.contract, self.limits)

    async def open_mcp_call(
        self, owner: str, tool: str, args: Mapping[str, Any], caller: str | None
    ) -> SupervisedRun:
        """A one-call run of kind `mcp`: `tool` with `args`, as `owner`; the call's key
        is the tool's name. Preflighted, recorded and run by the executor as
        `open_sequential` (the caller waits for its end, with no idempotency key).

        Raises PlanRejected (nothing recorded but the audit event), StorageUnavailable.
        """
        plan = SequentialPlan(owner, (PlannedCall(tool, tool, args),))
        checked = preflight_sequential(plan, self.contract, self.limits)
        problems = checked.problems or self.executor.problems(plan)
        if problems:
            self._reject(MCP, owner, caller, problems)
        identity, started = await self._open_run(
            MCP,
            plan_digest(plan),
            owner,
            caller,
            plan.context,
            None,
            None,
            self.executor.defers_start and self._reads_only(plan.calls),
        )
        return self.executor.mcp_call(self, identity, plan, checked.admitted, started)

    def _reads_only(self, calls: Iterable[PlannedCall]) -> bool:
        """Whether every call names a tool declared `effect: read` (preflight passed)."""
        tools = self.contract.tools
        return all(tools[call.tool].effect is Effect.READ for call in calls)

    def _reject(
        self, kind: str, owner: str, caller: str | None, problems: Sequence[PlanProblem]
    ) -> None:
        detail = {"plan_kind": kind, **rejection_detail(owner, self.contract.owners, problems)}
        self.rejections.record(caller, detail)
        record_plan_rejected(kind, problems)
        raise PlanRejected(problems)

    def close(self) -> None:
        """Write what the rejection audit still holds (the service is closing)."""
        self.rejections.close()

    async def _open_run(
        self,
        kind: str,
        digest: str,
        owner: str,
        caller: str | None,
        context: Mapping[str, Any],
        batch_id: str | None,
        claim: IdempotencyClaim | None,
        deferred_start: bool,
    ) -> tuple[RunIdentity, asyncio.Future[None] | None]:
        """The run's identity, and its start's future when `deferred_start` (the start
        is queued, not committed yet), else None (committed)."""
        run_id = new_run_id()
        stored_context = self.context_redaction.stored(owner, context)
        started = await record_run_start(
            self.sessions,
            run_id=run_id,
            kind=kind,
            owner=owner,
            contract_hash=self.contract.hash,
            instance_id=self.executor.run_instance(self.instance_id),
            caller=caller,
            parallel_batch_id=batch_id,
            claim=claim,
            request_digest=digest,
            writer=self.writer,
            committed_first=not deferred_start,
            context=stored_context,
        )
        bind_run(run_id, caller)
        self.writer.emit_row(
            {
                "run_id": run_id,
                "at": _now(),
                "kind": "plan.accepted",
                "caller": caller,
                "tool": None,
                "call_key": None,
                "item_key": None,
                "detail": {"plan_kind": kind, "owner": owner, "context": stored_context},
            }
        )
        identity = RunIdentity(
            run_id=run_id,
            owner=owner,
            caller=caller,
            context=context,
            contract_hash=self.contract.hash,
        )
        return identity, started
