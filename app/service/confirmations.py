"""Confirmations on every path: list them, decide one, expire those nobody decided.

One concept for plan runs and router runs: a paused run (`pending`) with one
confirmation row per waiting call. A decision is recorded under the run's row
lock; the last one moves the run back to `running` in this process, which
continues it under the supervisor (so an approval after a restart resumes the
run wherever it arrives). A rejection, and an expiry after the TTL, act alike:
the call gets a `denied` receipt. Each request, decision and expiry is audited
with the decider's key name.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from app.foundation.redaction import redact_text
from app.observability.confirmations import record_confirmation
from app.service.errors import (
    ConfirmationConflict,
    ConfirmationContractChanged,
    ConfirmationNotFound,
    StorageUnavailable,
)
from app.service.plans.pause import redacted_args
from app.service.plans.service import PlanService
from app.service.router.service import RouterService
from app.service.runs.tasks import RunSupervisor, SupervisedRun
from app.store.models import Confirmation, Run
from app.store.repositories.confirmations import ConfirmationRepository
from app.store.repositories.pagination import Keyset, Page
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.router_runs import PENDING, RouterRunRepository
from app.store.repositories.runs import RunRepository

logger = logging.getLogger("toolloop.confirmations")

APPROVED = "approved"
REJECTED = "rejected"
EXPIRED = "expired"
REFUSED = "refused"
ROUTER = "router"
CANCELLED = "cancelled"
EXPIRY_BATCH = 100


@dataclass(frozen=True, slots=True)
class Decided:
    answer: dict[str, Any]
    # The run's next stretch, to launch under the supervisor; None while calls still wait.
    resume: SupervisedRun | None


@dataclass(frozen=True, slots=True)
class ConfirmationService:
    plans: PlanService
    router: RouterService
    runs: RunSupervisor
    ttl_s: float

    async def list_page(
        self, *, limit: int, after: Keyset | None, status: str | None, caller: str | None
    ) -> Page[dict[str, Any]]:
        """Confirmations newest first; `caller`: only the runs that caller created."""
        try:
            async with self.plans.sessions() as session:
                page = await ConfirmationRepository(session).list_page(
                    limit=limit, after=after, status=status, caller=caller
                )
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the confirmations could not be read: {exc}") from exc
        return Page([self._view(c, run) for c, run in page.items], page.next)

    async def decide(
        self,
        run_id: str,
        confirmation_id: str,
        *,
        approve: bool,
        reason: str,
        decided_by: str | None,
        expired: bool = False,
    ) -> Decided:
        """Record a decision (`expired`: the TTL's, a rejection); once none is pending,
        the run's continuation, to launch. Raises ConfirmationNotFound,
        ConfirmationConflict, RouterUnavailable, StorageUnavailable."""
        decision = EXPIRED if expired else APPROVED if approve else REJECTED
        shown_reason = redact_text(reason)
        contract = self.plans.contract
        try:
            async with self.plans.sessions.begin() as session:
                repo = RouterRunRepository(session)
                run = await repo.lock_run(run_id)
                if run is None:
                    raise ConfirmationNotFound(f"no run {run_id!r}")
                if run.kind == ROUTER:
                    self.router.require_ready()
                executed_by = run.instance_id
                target = next(
                    (c for c in await repo.confirmations(run_id) if c.id == confirmation_id), None
                )
                if target is None:
                    raise ConfirmationNotFound(f"no confirmation {confirmation_id!r} in this run")
                if target.status != PENDING:
                    raise ConfirmationConflict(f"the confirmation is already {target.status}")
                if run.status != PENDING:
                    raise ConfirmationConflict(f"the run is {run.status}, not waiting")
                changed = target.contract_hash != contract.hash
                resume: SupervisedRun | None = None
                if changed:
                    why = "the contract changed while the run waited for confirmation"
                    await self._close(session, run, why, decided_by)
                else:
                    await repo.decide(
                        confirmation_id,
                        status=decision,
                        reason=shown_reason,
                        decided_by=decided_by,
                    )
                    resume = await self._claim(session, repo, run)
                kind = run.kind
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the decision could not be recorded: {exc}") from exc
        record_confirmation(REFUSED if changed else decision)
        self._audit(
            run_id,
            decided_by,
            _event(kind, decision),
            target,
            {"decision": REFUSED if changed else decision, "reason": shown_reason},
        )
        if changed:
            self.plans.writer.run_ended(run_id)  # closed in the decision's transaction
            await self._closed_while_waiting(kind, run_id, executed_by)
            raise ConfirmationContractChanged(
                "the contract changed since this confirmation was requested "
                f"({target.contract_hash} -> {contract.hash}); the approval is refused "
                "and the run is closed"
            )
        answer = {
            "run_id": run_id,
            "confirmation_id": confirmation_id,
            "decision": decision,
            "run_status": "running" if resume is not None else PENDING,
        }
        return Decided(answer, resume)

    async def cancel_paused(self, run_id: str, cancelled_by: str | None) -> str | None:
        """End a plan run that waits for confirmations `cancelled`: its waiting calls are
        refused and every kept argument dropped. None when the run is not waiting."""
        reason = "the run was cancelled while it waited for confirmation"
        refused: list[Confirmation] = []
        try:
            async with self.plans.sessions.begin() as session:
                repo = RouterRunRepository(session)
                run = await repo.lock_run(run_id)
                if run is None or run.kind == ROUTER or run.status != PENDING:
                    return None
                executed_by = run.instance_id
                if not await repo.claim(run_id, self.plans.instance_id):
                    return None
                for confirmation in await repo.confirmations(run_id):
                    if await repo.decide(
                        confirmation.id, status=REFUSED, reason=reason, decided_by=cancelled_by
                    ):
                        refused.append(confirmation)
                await RunRepository(session).finish(run_id, status=CANCELLED)
                await repo.release(run_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the cancel could not be recorded: {exc}") from exc
        record_confirmation(REFUSED, len(refused))
        for confirmation in refused:
            self._audit(
                run_id,
                cancelled_by,
                "confirmation.decided",
                confirmation,
                {"decision": REFUSED, "reason": reason},
            )
        self.plans.writer.run_ended(run_id)
        # An orchestrator's run waits there too: its end there is the cancel's.
        await self.plans.executor.stop_orchestrated(run_id, executed_by)
        return CANCELLED

    async def expire(self, now: datetime | None = None) -> int:
        """Turn the confirmations pending for longer than the TTL into `expired` (each a
        rejection, audited); continue the runs that no longer wait. How many expired."""
        cutoff = (now or datetime.now(UTC)) - timedelta(seconds=self.ttl_s)
        try:
            async with self.plans.sessions() as session:
                due = await ConfirmationRepository(session).pending_before(cutoff, EXPIRY_BATCH)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the confirmations could not be read: {exc}") from exc
        expired = 0
        for run_id, confirmation_id in due:
            try:
                decided = await self.decide(
                    run_id,
                    confirmation_id,
                    approve=False,
                    reason=f"nobody decided within {self.ttl_s:g}s",
                    decided_by=None,
                    expired=True,
                )
            except (ConfirmationNotFound, ConfirmationConflict):
                continue  # decided meanwhile, or closed
            expired += 1
            if decided.resume is not None:
                self.runs.launch(decided.resume)
        return expired

    async def expire_forever(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.expire()
            except Exception as exc:  # the next round tries again
                logger.warning("confirmation expiry failed: %s", exc)

    # -- internals ------------------------------------------------------------

    async def _claim(
        self, session: AsyncSession, repo: RouterRunRepository, run: Run
    ) -> SupervisedRun | None:
        if run.kind == ROUTER:
            return await self.router.claim_resume(repo, run)
        executor = self.plans.executor
        instance = executor.run_instance(self.plans.instance_id)
        if await repo.count_pending(run.id) or not await repo.claim(run.id, instance):
            return None
        checkpoint = await repo.checkpoint(run.id)
        decided = [c for c in await repo.confirmations(run.id) if c.args is not None]
        rows = await ReceiptRepository(session).list_for_run(run.id)
        continued = executor.continued(self.plans, run, checkpoint, decided, rows)
        await repo.release(run.id)
        return continued

    async def _close(
        self, session: AsyncSession, run: Run, reason: str, decided_by: str | None
    ) -> None:
        """Refuse every waiting call of the run and end it without continuing."""
        if run.kind == ROUTER:
            await self.router.close_paused(session, run, reason, decided_by)
            return
        repo = RouterRunRepository(session)
        if not await repo.claim(run.id, self.plans.instance_id):
            return
        for confirmation in await repo.confirmations(run.id):
            await repo.decide(confirmation.id, status=REFUSED, reason=reason, decided_by=decided_by)
        await RunRepository(session).finish(run.id, status="failed")
        await repo.release(run.id)

    async def _closed_while_waiting(self, kind: str, run_id: str, executed_by: str) -> None:
        """An orchestrator's workflow waits for the closed run too: let it end."""
        if kind == ROUTER:
            await self.router.closed_while_waiting(run_id)
        else:
            await self.plans.executor.closed_while_waiting(run_id, executed_by)

    def _audit(
        self,
        run_id: str,
        decided_by: str | None,
        kind: str,
        target: Confirmation,
        detail: dict[str, Any],
    ) -> None:
        self.plans.writer.emit_row(
            {
                "run_id": run_id,
                "at": datetime.now(UTC),
                "kind": kind,
                "caller": decided_by,
                "tool": target.tool,
                "call_key": target.call_key,
                "item_key": target.item_key,
                "detail": {"confirmation_id": target.id, "decided_by": decided_by, **detail},
            }
        )

    def _view(self, confirmation: Confirmation, run: Run) -> dict[str, Any]:
        args = confirmation.args
        return {
            "confirmation_id": confirmation.id,
            "run_id": run.id,
            "kind": run.kind,
            "requested_by": run.caller,
            "call_key": confirmation.call_key,
            "item_key": confirmation.item_key,
            "tool": confirmation.tool,
            "args_digest": confirmation.args_digest,
            "args": None
            if args is None
            else redacted_args(self.plans.contract, confirmation.tool, args),
            "status": confirmation.status,
            "requested_at": confirmation.created_at.isoformat(),
            "decided_at": None
            if confirmation.decided_at is None
            else confirmation.decided_at.isoformat(),
            "decided_by": confirmation.decided_by,
            "reason": confirmation.reason,
        }


def _event(run_kind: str, decision: str) -> str:
    """The audit event of a decision (a router run's keeps the name it always had)."""
    if decision == EXPIRED:
        return "confirmation.expired"
    return "router.confirmation_decided" if run_kind == ROUTER else "confirmation.decided"
