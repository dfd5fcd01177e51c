"""Where an admitted, recorded router run runs when not in this process: the port.

`RouterService` runs a run here (`RouterTask`) unless it was given a
`RouterExecutor`; Temporal's (`app.temporal`) implements this port and is chosen
where the service is wired, with the plans' executor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.engine import PlanProblem, RunIdentity
from app.router.pause import Decision
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

    def resumed_run(
        self,
        sessions: async_sessionmaker[AsyncSession],
        run_id: str,
        decisions: Mapping[str, Decision],
    ) -> SupervisedRun:
        """The run that waited for confirmations, going on with their `decisions`."""

    async def stop_waiting(self, run_id: str) -> None:
        """End the executor's part of a run that ended while it waited for confirmations."""
