"""Use-cases for router runs: admit and record a run, drive it, pause it for a
confirmation, and resume it in the background once every pending call is decided.

Each run is driven in its own task; the request waits for it shielded, so a
client that goes away does not stop the run half-way. Shutdown cancels the
tasks: the engine settles the calls in flight and the run is recorded
`interrupted`. A paused run is only rows (`pending`), so it survives restarts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol
from uuid import uuid4

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.contract import Contract
from app.engine.errors import ReceiptWriteFailed
from app.engine.preflight import PlanProblem
from app.engine.redaction import redact_text
from app.engine.run import RunIdentity
from app.router.admission import admit
from app.router.checkpoint import Checkpoint, Decision
from app.router.limits import RouterLimits
from app.router.loop import RouterRun, RunResult
from app.router.ports import RouterKit
from app.router.request import RouterRequest
from app.router.setup import RouterSetup
from app.service.errors import StorageUnavailable
from app.service.router_errors import (
    ConfirmationConflict,
    ConfirmationNotFound,
    RouterRequestRejected,
    RouterUnavailable,
)
from app.service.router_records import (
    AuditDecisions,
    closed_outcome,
    record_router_interrupted,
    record_router_result,
    record_router_start,
)
from app.service.writer import GroupCommitWriter
from app.store.repositories.router_runs import RouterRunRepository
from app.store.repositories.runs import RunRepository

logger = logging.getLogger("toolloop.router")


class Decider(Protocol):
    """Who decides a confirmation; `app.api.auth.Principal` is one."""

    @property
    def name(self) -> str | None: ...

    @property
    def can_read_all_runs(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class _Resume:
    checkpoint: dict[str, Any]
    decisions: dict[str, Decision]
    caller: str | None


@dataclass
class RouterService:
    """`kit` is None when the router failed closed at startup (`setup.problems` say why)."""

    contract: Contract
    sessions: async_sessionmaker[AsyncSession]
    writer: GroupCommitWriter
    instance_id: str
    limits: RouterLimits
    setup: RouterSetup
    kit: RouterKit | None
    _tasks: set[asyncio.Task[dict[str, Any]]] = field(default_factory=set)

    def require_ready(self) -> RouterKit:
        if self.kit is None or self.setup.profiles is None:
            raise RouterUnavailable(self.setup.problems)
        return self.kit

    async def start(
        self, request: RouterRequest, caller: str | None, request_digest: str | None
    ) -> dict[str, Any]:
        """Admit, record and drive a run; the outcome once it ended or paused."""
        kit = self.require_ready()
        assert self.setup.profiles is not None
        problems, plan = admit(request, self.contract, self.setup.profiles, self.limits)
        if plan is None:
            self._reject(request.owner, caller, problems)
        run_id = str(uuid4())
        await record_router_start(
            self.sessions,
            run_id=run_id,
            owner=plan.owner.name,
            contract_hash=self.contract.hash,
            instance_id=self.instance_id,
            caller=caller,
            request_digest=request_digest,
        )
        identity = RunIdentity(run_id, plan.owner.name, caller, request.context, self.contract.hash)
        run = RouterRun.new(kit, plan, identity, AuditDecisions(self.writer, run_id, caller))
        task = self._spawn(run_id, run.start())
        return await asyncio.shield(task)

    async def decide(
        self,
        run_id: str,
        confirmation_id: str,
        *,
        approve: bool,
        reason: str,
        decider: Decider,
    ) -> dict[str, Any]:
        """Record a decision; once none is pending, resume the run in the background."""
        self.require_ready()
        decision = "approved" if approve else "rejected"
        shown_reason = redact_text(reason)
        try:
            async with self.sessions.begin() as session:
                repo = RouterRunRepository(session)
                run = await repo.lock_run(run_id)
                if run is None or run.kind != "router" or not _may_decide(decider, run.caller):
                    raise ConfirmationNotFound(f"no router run {run_id!r}")
                target = next(
                    (c for c in await repo.confirmations(run_id) if c.id == confirmation_id), None
                )
                if target is None:
                    raise ConfirmationNotFound(f"no confirmation {confirmation_id!r} in this run")
                if target.status != "pending":
                    raise ConfirmationConflict(f"the confirmation is already {target.status}")
                if run.status != "pending":
                    raise ConfirmationConflict(f"the run is {run.status}, not waiting")
                changed = target.contract_hash != self.contract.hash
                if changed:
                    await self._close_changed(session, run_id, run.outcome, decider.name)
                    resume = None
                else:
                    await repo.decide(
                        confirmation_id,
                        status=decision,
                        reason=shown_reason,
                        decided_by=decider.name,
                    )
                    resume = await self._claim(repo, run_id, run.caller)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the decision could not be recorded: {exc}") from exc
        AuditDecisions(self.writer, run_id, decider.name).record(
            "router.confirmation_decided",
            {
                "confirmation_id": confirmation_id,
                "decision": "refused" if changed else decision,
                "reason": shown_reason,
            },
            tool=target.tool,
            call_key=target.call_key,
        )
        if changed:
            raise ConfirmationConflict(
                "the contract changed since this confirmation was requested "
                f"({target.contract_hash} -> {self.contract.hash}); the approval is refused "
                "and the run is closed",
                slug="contract-changed",
            )
        if resume is not None:
            self._spawn(run_id, self._resume(run_id, resume))
        return {
            "run_id": run_id,
            "confirmation_id": confirmation_id,
            "decision": decision,
            "run_status": "running" if resume is not None else "pending",
        }

    async def drain(self) -> None:
        """Wait for every run task of this process (tests; shutdown uses `aclose`)."""
        while self._tasks:
            await asyncio.wait(tuple(self._tasks))

    async def aclose(self) -> None:
        for task in tuple(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- internals ------------------------------------------------------------

    def _reject(self, owner: str, caller: str | None, problems: list[PlanProblem]) -> NoReturn:
        AuditDecisions(self.writer, None, caller).record(
            "router.rejected",
            {
                "owner": redact_text(owner),
                "problems": [
                    {"pointer": redact_text(p.pointer), "message": redact_text(p.message)}
                    for p in problems
                ],
            },
        )
        raise RouterRequestRejected(problems)

    async def _claim(
        self, repo: RouterRunRepository, run_id: str, caller: str | None
    ) -> _Resume | None:
        if await repo.count_pending(run_id) or not await repo.claim(run_id, self.instance_id):
            return None
        checkpoint = await repo.checkpoint(run_id)
        decisions = {
            c.id: Decision(c.id, c.status == "approved", c.reason or "", c.args)
            for c in await repo.confirmations(run_id)
        }
        await repo.release(run_id)
        return _Resume(checkpoint or {}, decisions, caller)

    async def _close_changed(
        self,
        session: AsyncSession,
        run_id: str,
        pending_outcome: dict[str, Any] | None,
        decided_by: str | None,
    ) -> None:
        repo = RouterRunRepository(session)
        reason = "the contract changed while the run waited for confirmation"
        for confirmation in await repo.confirmations(run_id):
            await repo.decide(
                confirmation.id, status="refused", reason=reason, decided_by=decided_by
            )
        await RunRepository(session).finish(
            run_id, status="incomplete", outcome=closed_outcome(pending_outcome, reason)
        )
        await repo.release(run_id)

    async def _resume(self, run_id: str, resume: _Resume) -> RunResult:
        kit = self.require_ready()
        assert self.setup.profiles is not None
        sink = AuditDecisions(self.writer, run_id, resume.caller)
        checkpoint = Checkpoint.from_json(resume.checkpoint)
        request = RouterRequest.from_json(checkpoint.request)
        problems, plan = admit(
            request, self.contract, self.setup.profiles, self.limits, resuming=True
        )
        if plan is None:
            reason = "the run cannot resume: " + "; ".join(
                f"{p.pointer}: {p.message}" for p in problems
            )
            sink.record("router.resume_failed", {"reason": reason})
            await self._close(run_id, reason)
            raise _Closed()
        identity = RunIdentity(
            run_id, plan.owner.name, resume.caller, request.context, self.contract.hash
        )
        run = RouterRun.restore(kit, plan, identity, sink, checkpoint)
        return await run.resume(resume.decisions)

    async def _close(self, run_id: str, reason: str) -> None:
        async with self.sessions.begin() as session:
            run = await RunRepository(session).get(run_id)
            await RunRepository(session).finish(
                run_id,
                status="incomplete",
                outcome=closed_outcome(None if run is None else run.outcome, reason),
            )

    def _spawn(
        self, run_id: str, work: Coroutine[Any, Any, RunResult]
    ) -> asyncio.Task[dict[str, Any]]:
        task = asyncio.create_task(self._carry(run_id, work), name=f"toolloop-router-{run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._forget)
        return task

    def _forget(self, task: asyncio.Task[dict[str, Any]]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            if not isinstance(error, _Closed):
                logger.error("router run task %s failed: %s", task.get_name(), error)

    async def _carry(self, run_id: str, work: Coroutine[Any, Any, RunResult]) -> dict[str, Any]:
        try:
            result = await work
        except asyncio.CancelledError:
            await self._interrupted(run_id)
            raise
        except _Closed:
            raise
        except Exception as exc:
            # Whatever broke, the run must not stay `running` on a live process.
            await self._interrupted(run_id)
            if isinstance(exc, ReceiptWriteFailed):
                raise StorageUnavailable(str(exc)) from exc
            raise
        await record_router_result(self.sessions, self.writer, result)
        return result.outcome.to_dict()

    async def _interrupted(self, run_id: str) -> None:
        try:
            await record_router_interrupted(self.sessions, run_id)
        except StorageUnavailable as exc:
            logger.error("router run %s could not be marked interrupted: %s", run_id, exc)


class _Closed(Exception):
    """A resume that closed the run instead (already recorded)."""


def _may_decide(decider: Decider, created_by: str | None) -> bool:
    if decider.can_read_all_runs:
        return True
    return decider.name is not None and decider.name == created_by
