"""Resuming an interrupted plan run: only the calls without a successful receipt run again.

The caller sends the original plan again; its digest must match the one stored
when the run was opened (the plan itself is never stored). Each chain (the
sequential plan, or each lane) keeps its leading succeeded receipts and goes
on from its first call that did not succeed, under the same `seq`, hence the
same idempotency key `{run_id}:{seq}`. A call whose stored receipt did not
succeed (cancelled or skipped by a shutdown, failed, timed out) gets its new
receipt in that same row; the replaced one is kept as a `receipt.superseded`
audit event. Calls dispatched by tools get sequence numbers after every
stored receipt. The run then ends as any run does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from app.contract.compiled import Tool
from app.engine import (
    ParallelPlan,
    Receipt,
    ResumePoint,
    RunIdentity,
    SequentialPlan,
    Status,
    preflight_parallel,
    preflight_sequential,
)
from app.observability.context import bind_run
from app.service.errors import (
    ContractChanged,
    PlanRejected,
    RequestMismatch,
    ResumeForbidden,
    RunNotFound,
    RunNotResumable,
    StorageUnavailable,
)
from app.service.idempotency import IdempotencyClaim, claim_key
from app.service.plans.digest import plan_digest
from app.service.plans.runs import ParallelRun, SequentialRun
from app.service.plans.service import PlanService
from app.service.runs.reads import RunViewer
from app.service.runs.records import stored_receipts
from app.service.runs.tasks import RunResult, RunSupervisor, SupervisedRun
from app.store.journal.chain import stored_entry
from app.store.journal.writer import GroupCommitWriter
from app.store.models import Receipt as StoredReceipt
from app.store.models import Run
from app.store.repositories.runs import INTERRUPTED, RunRepository

# (run kind, the run's creator) -> may this caller resume it?
ResumeRule = Callable[[str, str | None], bool]
PLAN_KINDS = ("sequential", "parallel")


@dataclass(frozen=True, slots=True)
class RunResumer:
    plans: PlanService
    supervisor: RunSupervisor

    async def find(self, run_id: str, viewer: RunViewer, may_resume: ResumeRule) -> str:
        """The kind of the run the caller may resume. Raises RunNotFound, ResumeForbidden,
        RunNotResumable (not a plan run)."""
        run = await self._run(run_id)
        if run is None:
            raise RunNotFound(run_id)
        if not may_resume(run.kind, run.caller):
            if viewer.can_see_run(run.caller):
                raise ResumeForbidden(run_id)
            raise RunNotFound(run_id)
        if run.kind not in PLAN_KINDS:
            raise RunNotResumable(run_id, f"a {run.kind} run is not a plan run")
        return run.kind

    async def open(
        self,
        run_id: str,
        plan: SequentialPlan | ParallelPlan,
        caller: str | None,
        claim: IdempotencyClaim | None = None,
    ) -> SupervisedRun:
        """Check the run and the plan, reopen the run (claiming `claim` with it) and
        return it ready to execute under the supervisor."""
        run = await self._run(run_id)
        if run is None:
            raise RunNotFound(run_id)
        if run.status != INTERRUPTED or self.supervisor.is_active(run_id):
            raise RunNotResumable(run_id, f"it is {run.status}; only an interrupted run resumes")
        contract = self.plans.contract
        if run.contract_hash != contract.hash:
            raise ContractChanged(
                f"run {run_id} was admitted against contract {run.contract_hash}, "
                f"the service now runs {contract.hash}"
            )
        if run.request_digest is None or run.request_digest != plan_digest(plan):
            raise RequestMismatch(run_id)
        rows = await stored_receipts(self.plans.sessions, run_id)
        point, superseded = _resume_point(rows, _chains(plan), contract.tools, caller)
        identity = RunIdentity(run_id, run.owner, run.caller, plan.context, contract.hash)
        resumed = self._prepared(run, plan, identity, point)
        await self._reopen(run_id, claim)
        writer = self.plans.writer
        writer.supersede(run_id, superseded)
        writer.emit_row(_resumed_event(run, caller, point, len(superseded)))
        bind_run(run_id, caller)
        return _Resumed(resumed, writer)

    def _prepared(
        self,
        run: Run,
        plan: SequentialPlan | ParallelPlan,
        identity: RunIdentity,
        point: ResumePoint,
    ) -> SupervisedRun:
        """Preflight the plan again (for its admitted arguments; under the same contract it
        passes as it did) and wrap it as a plan run that starts at `point`."""
        contract, limits = self.plans.contract, self.plans.limits
        if isinstance(plan, SequentialPlan):
            checked = preflight_sequential(plan, contract, limits)
            if checked.problems:
                raise PlanRejected(checked.problems)
            return SequentialRun(self.plans, identity, plan, checked.admitted, point)
        lanes = preflight_parallel(plan, contract, limits)
        if lanes.problems:
            raise PlanRejected(lanes.problems)
        assert run.parallel_batch_id is not None
        return ParallelRun(self.plans, identity, plan, lanes.admitted, run.parallel_batch_id, point)

    async def _run(self, run_id: str) -> Run | None:
        try:
            async with self.plans.sessions() as session:
                return await RunRepository(session).get(run_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run could not be read: {exc}") from exc

    async def _reopen(self, run_id: str, claim: IdempotencyClaim | None) -> None:
        try:
            async with self.plans.sessions.begin() as session:
                if claim is not None:
                    await claim_key(session, claim, run_id)
                reopened = await RunRepository(session).reopen_interrupted(
                    run_id, self.plans.instance_id
                )
                if not reopened:
                    raise RunNotResumable(run_id, "another resume started it first")
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run could not be reopened: {exc}") from exc


class _Resumed:
    """The resumed run; drops the writer's unused replacements once it ended."""

    def __init__(self, run: SupervisedRun, writer: GroupCommitWriter) -> None:
        self._run = run
        self._writer = writer

    @property
    def run_id(self) -> str:
        return self._run.run_id

    async def execute(self) -> None:
        try:
            await self._run.execute()
        except Exception:
            self._writer.forget_superseded(self.run_id)
            raise

    async def finish(self) -> RunResult:
        try:
            return await self._run.finish()
        finally:
            self._writer.forget_superseded(self.run_id)

    async def stop(self, status: str) -> RunResult:
        try:
            return await self._run.stop(status)
        finally:
            self._writer.forget_superseded(self.run_id)


def _chains(plan: SequentialPlan | ParallelPlan) -> list[int]:
    """The length of each chain of calls: the sequential plan, or each lane."""
    if isinstance(plan, SequentialPlan):
        return [len(plan.calls)]
    return [len(lane.calls) for lane in plan.lanes]


def _resume_point(
    rows: Sequence[StoredReceipt],
    chains: Sequence[int],
    tools: Mapping[str, Tool],
    caller: str | None,
) -> tuple[ResumePoint, dict[int, dict[str, Any]]]:
    """Per chain, the leading succeeded receipts; and the audit rows of every other
    stored receipt of a plan call (each will be replaced)."""
    by_seq = {row.seq: row for row in rows}
    done: list[list[Receipt]] = []
    superseded: dict[int, dict[str, Any]] = {}
    for first, length in zip(accumulate(chains, initial=0), chains, strict=False):
        kept: list[Receipt] = []
        for seq in range(first, first + length):
            row = by_seq.get(seq)
            if row is None or row.status != Status.SUCCEEDED or len(kept) < seq - first:
                if row is not None:
                    superseded[seq] = _superseded_event(row, caller)
                continue
            kept.append(_receipt(row, tools[row.tool].definition_hash))
        done.append(kept)
    planned = sum(chains)
    next_seq = max(planned, max(by_seq, default=-1) + 1)
    return ResumePoint(done, next_seq), superseded


def _receipt(row: StoredReceipt, definition_hash: str) -> Receipt:
    """A stored (redacted) succeeded receipt, as the engine reports it."""
    return Receipt(
        row.id,
        row.run_id,
        row.seq,
        row.owner,
        row.tool,
        row.call_key,
        row.item_key,
        row.parallel_batch_id,
        Status.SUCCEEDED,
        row.output,
        None,
        row.attempts,
        row.cache_hit,
        row.cache_source_receipt_id,
        row.fingerprint,
        definition_hash,
        row.idempotency_key,
        row.parent_receipt_id,
        row.control,
        row.admission_wait_ms,
        row.started_at,
        row.finished_at or row.started_at,
        row.duration_ms or 0.0,
    )


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _superseded_event(row: StoredReceipt, caller: str | None) -> dict[str, Any]:
    event = _superseded_row(row, caller)
    entry = stored_entry(row)
    if entry is not None:  # the replaced row's place in the run's chain stays verifiable
        event["detail"]["chain"] = entry
    return event


def _superseded_row(row: StoredReceipt, caller: str | None) -> dict[str, Any]:
    return {
        "run_id": row.run_id,
        "at": datetime.now(UTC),
        "kind": "receipt.superseded",
        "caller": caller,
        "tool": row.tool,
        "call_key": row.call_key,
        "item_key": row.item_key,
        "detail": {
            "seq": row.seq,
            "receipt_id": row.id,
            "status": row.status,
            "error": row.error,
            "attempts": row.attempts,
            "idempotency_key": row.idempotency_key,
            "started_at": _iso(row.started_at),
            "finished_at": _iso(row.finished_at),
            "duration_ms": row.duration_ms,
        },
    }


def _resumed_event(
    run: Run, caller: str | None, point: ResumePoint, replaced: int
) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "at": datetime.now(UTC),
        "kind": "run.resumed",
        "caller": caller,
        "tool": None,
        "call_key": None,
        "item_key": None,
        "detail": {
            "plan_kind": run.kind,
            "kept": sum(len(chain) for chain in point.done),
            "replaced": replaced,
            "next_seq": point.next_seq,
        },
    }
