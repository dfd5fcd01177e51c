"""Every run executes in its own task, registered by run id, under one supervisor.

A use-case records the run (preflight passed; its row is committed, or queued
for a plan of read tools: `app.service.plans.service`) and hands the supervisor a
`SupervisedRun`. A synchronous request then waits for the
task, shielded: a client that goes away does not stop the run. A
`Prefer: respond-async` request answers at once and the run goes on alone.

Stopping a run cancels its task while `execute` runs: the engine gives the
running calls `cancelled` receipts and the calls not started `skipped` ones,
flushes them and lets the cancellation propagate; the run then records its end
with `stop`. A caller's cancel ends a run `cancelled`; shutdown ends every run
`interrupted`, as a crash would (the service, not the caller, stopped it).
Once `execute` has returned, the run is finishing and can no longer be
stopped: `finish` records its natural end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.foundation.waiting import wait_all
from app.service.runs.records import record_run_end

logger = logging.getLogger("toolloop.runs")

CANCELLED = "cancelled"
INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: str
    status: str
    # The caller's own copy (real outputs).
    response: dict[str, Any]
    # The copy that may be stored (stored receipts' redaction), built on demand.
    redacted: Callable[[], dict[str, Any]]
    # Whether the run's idempotency key was answered (its final response stored)
    # with the run's end.
    key_answered: bool = False


class SupervisedRun(Protocol):
    """A recorded run, ready to execute; what any use-case that starts a run provides."""

    @property
    def run_id(self) -> str: ...

    async def execute(self) -> None:
        """Run the calls; the only part that is cancelled. Keep what `finish` needs."""

    async def finish(self) -> RunResult:
        """Record the run's natural end after `execute` returned."""

    async def stop(self, status: str) -> RunResult:
        """Record the end as `status` after `execute` was cancelled (or never began)."""


RunEnded = Callable[[RunResult | None, BaseException | None], Awaitable[None]]


class RunEnds(Protocol):
    """Who hears of every run's end (`RunEventHub`, or what relays it to other processes)."""

    def end(self, run_id: str, status: str) -> None: ...


class _Phase(Enum):
    PENDING = "pending"
    EXECUTING = "executing"
    FINISHING = "finishing"


class RunHandle:
    __slots__ = ("_phase", "_task", "error", "result", "run_id", "stop_reason")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.stop_reason: str | None = None
        self.result: RunResult | None = None
        self.error: BaseException | None = None
        self._phase = _Phase.PENDING
        self._task: asyncio.Task[None] | None = None

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    async def wait(self) -> RunResult:
        """The run's result once it ended (raises its error); cancelling the waiter
        does not cancel the run."""
        task = self._task
        assert task is not None
        await wait_all((task,))
        task.result()  # what shielding it would raise: its cancellation, an escaped error
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def request_stop(self, reason: str) -> bool:
        """Ask the run to stop; False when it is already finishing (too late)."""
        if self._phase is _Phase.FINISHING:
            return False
        if self.stop_reason is None:
            self.stop_reason = reason
            if self._phase is _Phase.EXECUTING and self._task is not None:
                self._task.cancel()
        return True


def _as_is(run: SupervisedRun) -> SupervisedRun:
    return run


class RunSupervisor:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        events: RunEnds,
        *,
        wrap_run: Callable[[SupervisedRun], SupervisedRun] = _as_is,
    ) -> None:
        """`wrap_run`: what every launched run runs inside (a trace's span)."""
        self._sessions = sessions
        self._events = events
        self._wrap_run = wrap_run
        self._runs: dict[str, RunHandle] = {}
        self._closing = False

    def launch(self, run: SupervisedRun, *, on_end: RunEnded | None = None) -> RunHandle:
        """Start the run's task. `on_end` runs inside it after the run ended, so it
        completes even when the request that launched the run is gone."""
        handle = RunHandle(run.run_id)
        if self._closing:
            handle.stop_reason = INTERRUPTED
        handle._task = asyncio.create_task(
            self._supervise(handle, self._wrap_run(run), on_end), name=f"toolloop-run-{run.run_id}"
        )
        self._runs[run.run_id] = handle
        return handle

    def get(self, run_id: str) -> RunHandle | None:
        return self._runs.get(run_id)

    def is_active(self, run_id: str) -> bool:
        return run_id in self._runs

    @property
    def active_count(self) -> int:
        return len(self._runs)

    async def aclose(self) -> None:
        """Stop every run as `interrupted` and wait until each recorded its end."""
        self._closing = True
        while self._runs:
            handles = list(self._runs.values())
            for handle in handles:
                handle.request_stop(INTERRUPTED)
            await asyncio.gather(
                *(h._task for h in handles if h._task is not None), return_exceptions=True
            )

    async def _supervise(
        self, handle: RunHandle, run: SupervisedRun, on_end: RunEnded | None
    ) -> None:
        try:
            try:
                handle.result = await self._run(handle, run)
            except Exception as exc:
                logger.error("run %s failed: %s", run.run_id, exc, exc_info=exc)
                handle.error = exc
                await self._record_interrupted(run.run_id)
            result = handle.result
            self._events.end(run.run_id, INTERRUPTED if result is None else result.status)
            if on_end is not None:
                try:
                    await on_end(result, handle.error)
                except Exception as exc:
                    logger.error("after run %s: %s", run.run_id, exc, exc_info=exc)
        finally:
            self._runs.pop(run.run_id, None)

    async def _run(self, handle: RunHandle, run: SupervisedRun) -> RunResult:
        task = handle._task  # the current task (set before it first ran)
        assert task is not None
        handle._phase = _Phase.EXECUTING
        if handle.stop_reason is not None:
            # Stopped before it began: still run the engine, cancelled from its
            # first step, so that every call gets its receipt.
            task.cancel()
        try:
            await run.execute()
        except asyncio.CancelledError:
            if handle.stop_reason is None:
                raise
            task.uncancel()
            handle._phase = _Phase.FINISHING
            return await run.stop(handle.stop_reason)
        handle._phase = _Phase.FINISHING
        if handle.stop_reason is not None and task.cancelling():
            # A stop that found nothing left to cancel: absorb it before finishing.
            task.uncancel()
            with suppress(asyncio.CancelledError):
                await asyncio.sleep(0)
        return await run.finish()

    async def _record_interrupted(self, run_id: str) -> None:
        try:
            await record_run_end(self._sessions, run_id, status=INTERRUPTED)
        except Exception as exc:
            logger.error("run %s could not be marked interrupted: %s", run_id, exc)
