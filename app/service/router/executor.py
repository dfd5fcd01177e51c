"""Where an admitted, recorded router run runs when not in this process: the port.

`RouterService` runs a run here (`RouterTask`) unless it was given a
`RouterExecutor`; Temporal's (`app.temporal`) implements this port and is chosen
where the service is wired, with the plans' executor.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.engine import PlanProblem, RunIdentity
from app.router.request_checks import RunPlan
from app.service.runs.tasks import SupervisedRun


class RouterExecutor(Protocol):
    def run_instance(self, instance_id: str) -> str:
        """The instance recorded as running the run."""

    def problems(self, plan: RunPlan) -> list[PlanProblem]:
        """What this executor cannot run of an admitted request (empty: all)."""

    def router_run(
        self,
        sessions: async_sessionmaker[AsyncSession],
        plan: RunPlan,
        identity: RunIdentity,
    ) -> SupervisedRun: ...

    def resumed_run(self, sessions: async_sessionmaker[AsyncSession], run_id: str) -> SupervisedRun:
        """The run that waited for confirmations, going on now that every one is decided.
        The decisions, and the calls' arguments kept with them, stay in the store: the
        executor reads them there, and drops the kept arguments once the run no longer
        needs them."""

    async def stop_waiting(self, run_id: str) -> None:
        """End the executor's part of a run that ended while it waited for confirmations."""
