"""Cancelling a run: its running calls are cancelled, the rest skipped, the run ends `cancelled`.

Only the process executing a run can stop it. On PostgreSQL a cancel arriving
elsewhere is sent there (`stop_elsewhere`, `app.service.runs.replicas`) and
answered alike; without that channel (SQLite) a run executing in another
process is refused (409) rather than left half-stopped. A run kind that can
pause (a router run waiting for confirmation) registers how to cancel a paused
run: it is only rows, so any process can.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.service.errors import (
    CancelForbidden,
    RunAlreadyEnded,
    RunNotFound,
    RunRunningElsewhere,
    StorageUnavailable,
)
from app.service.runs.reads import RunViewer
from app.service.runs.tasks import CANCELLED, INTERRUPTED, RunSupervisor
from app.store.repositories.runs import RUNNING, RunRepository

# (run kind, the run's creator) -> may this caller cancel it?
CancelRule = Callable[[str, str | None], bool]
# (run id) -> the status a paused run was cancelled with; None when it is not paused.
CancelPaused = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class RemoteStop:
    """A cancel's outcome in the process executing the run: the run's status once it
    ended, and whether the cancel stopped it (False: it was already finishing)."""

    status: str
    stopping: bool


# (run id, the instance executing it) -> its outcome there.
StopElsewhere = Callable[[str, str], Awaitable[RemoteStop]]


@dataclass(frozen=True, slots=True)
class RunControl:
    sessions: async_sessionmaker[AsyncSession]
    supervisor: RunSupervisor
    # By run kind.
    cancel_paused: Mapping[str, CancelPaused] = field(default_factory=dict)
    # None: no channel to the other processes (SQLite).
    stop_elsewhere: StopElsewhere | None = None

    async def cancel(self, run_id: str, viewer: RunViewer, may_cancel: CancelRule) -> str:
        """Cancel the run and wait until it recorded its end; returns its final status."""
        # Looked up before the row: a run leaves the supervisor only after its end is stored.
        handle = self.supervisor.get(run_id)
        try:
            async with self.sessions() as session:
                run = await RunRepository(session).get(run_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run could not be read: {exc}") from exc
        if run is None:
            raise RunNotFound(run_id)
        if not may_cancel(run.kind, run.caller):
            if viewer.can_see_run(run.caller):
                raise CancelForbidden(run_id)
            raise RunNotFound(run_id)
        stopping = False
        if handle is not None:
            stopping = handle.request_stop(CANCELLED)
            try:
                status = (await handle.wait()).status
            except Exception:
                status = INTERRUPTED
        elif run.status == RUNNING:
            if self.stop_elsewhere is None:
                raise RunRunningElsewhere(run_id)
            stopped = await self.stop_elsewhere(run_id, run.instance_id)
            stopping, status = stopped.stopping, stopped.status
        else:
            status = run.status
        cancel_paused = self.cancel_paused.get(run.kind)
        if cancel_paused is not None and status not in (CANCELLED, INTERRUPTED):
            # The run ended by itself; if it only paused, it can still be cancelled.
            cancelled = await cancel_paused(run_id)
            if cancelled is not None:
                return cancelled
        if stopping:
            return status
        raise RunAlreadyEnded(run_id, status)
