"""A router run under the run supervisor (`runs.tasks`): its first stretch, or a resume.

`execute` drives the loop and is the only part a cancel or shutdown interrupts:
the engine gives the calls in flight `cancelled` receipts and flushes them
before the cancellation gets here. `finish` keeps how the stretch ended
(finished, or paused for confirmation). `stop` ends the run `cancelled` or
`interrupted`, answering from its stored (redacted) receipts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.engine import Receipt, ReceiptWriteFailed
from app.router.loop import RouterRun
from app.router.loop import RunResult as LoopResult
from app.router.pause import Decision
from app.service.errors import StorageUnavailable
from app.service.router.recorded import recorded_request
from app.service.router.records import (
    AuditDecisions,
    StretchRecording,
    closed_outcome,
    receipt_from_store,
    record_router_result,
    record_router_stopped,
)
from app.service.runs.records import stored_receipts
from app.service.runs.tasks import RunResult
from app.store.journal.writer import GroupCommitWriter

# Builds the run to drive, or says why it cannot be (the run is then closed `incomplete`).
Prepare = Callable[[], RouterRun | str]
# What becomes of a stretch's result before it is kept (a replay adds its report).
Review = Callable[[RouterRun, LoopResult], LoopResult]


class RouterTask:
    kind = "router"

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        writer: GroupCommitWriter,
        run_id: str,
        sink: AuditDecisions,
        prepare: Prepare,
        decisions: Mapping[str, Decision] | None = None,
        last_outcome: Mapping[str, Any] | None = None,
        review: Review | None = None,
    ) -> None:
        self._sessions = sessions
        self._writer = writer
        self._run_id = run_id
        self._sink = sink
        self._prepare = prepare
        # None: the first stretch; otherwise the decisions a resume settles first.
        self._decisions = decisions
        self._last_outcome = last_outcome
        self._review = review
        self._run: RouterRun | None = None
        self._result: LoopResult | None = None
        self._closed: str | None = None

    @classmethod
    def started(
        cls,
        sessions: async_sessionmaker[AsyncSession],
        writer: GroupCommitWriter,
        run: RouterRun,
        review: Review | None = None,
    ) -> RouterTask:
        sink = AuditDecisions(writer, run.identity.run_id, run.identity.caller)
        return cls(sessions, writer, run.identity.run_id, sink, lambda: run, review=review)

    @property
    def run_id(self) -> str:
        return self._run_id

    async def execute(self) -> None:
        prepared = self._prepare()
        if isinstance(prepared, str):
            self._closed = prepared
            return
        self._run = prepared
        try:
            if self._decisions is None:
                self._result = await prepared.start()
            else:
                self._result = await prepared.resume(self._decisions)
        except ReceiptWriteFailed as exc:
            raise StorageUnavailable(str(exc)) from exc
        if self._review is not None:
            self._result = self._review(prepared, self._result)

    async def finish(self) -> RunResult:
        if self._closed is not None:
            closed = closed_outcome(self._last_outcome, self._closed)
            await record_router_stopped(
                self._sessions,
                self.run_id,
                status=closed["status"],
                outcome=closed,
                writer=self._writer,
            )
            return RunResult(self.run_id, closed["status"], closed, lambda: closed)
        result, run = self._result, self._run
        assert result is not None
        assert run is not None
        await record_router_result(self._sessions, self._writer, result, _recording(run))

        def redacted() -> dict[str, Any]:
            receipts = sorted(run.session.receipts, key=lambda receipt: receipt.seq)
            return {**result.stored, "receipts": [_redacted(receipt) for receipt in receipts]}

        status = result.outcome.status.value
        return RunResult(self.run_id, status, result.outcome.to_dict(), redacted)

    async def stop(self, status: str) -> RunResult:
        self._sink.record("router.run_stopped", {"status": status})
        await self._writer.flush()
        rows = await stored_receipts(self._sessions, self.run_id)
        outcome = closed_outcome(
            self._so_far(), f"the run was {status}", status=status, stopped_by=status
        )
        outcome["receipts"] = [receipt_from_store(row) for row in rows]
        await record_router_stopped(
            self._sessions,
            self.run_id,
            status=status,
            outcome=outcome,
            call_count=len(rows),
            recording=None if self._run is None else _recording(self._run),
            writer=self._writer,
        )
        return RunResult(self.run_id, status, outcome, lambda: outcome)

    def _so_far(self) -> dict[str, Any]:
        """The run's counters as far as it got (the last stored outcome before it resumed)."""
        run = self._run
        if run is None:
            return {"run_id": self.run_id, "attempts": 0, "turns": 0, **(self._last_outcome or {})}
        with suppress(RuntimeError):  # not started: no time spent
            run.session.freeze_time()
        state = run.state
        return {
            "run_id": self.run_id,
            "attempts": state.attempts,
            "turns": state.turns,
            "state": state.to_public(),
        }


def _recording(run: RouterRun) -> StretchRecording | None:
    try:
        session = run.session
    except RuntimeError:  # not started: nothing was asked
        return None
    return StretchRecording(recorded_request(run.plan, run.kit.redactors), session.replies)


def _redacted(receipt: Receipt) -> dict[str, Any]:
    """The stored (redacted) copy, in the response's shape."""
    stored = receipt.to_stored()
    return {key: stored[key] for key in receipt.to_response()}
