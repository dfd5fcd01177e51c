"""Where a preflighted, recorded plan runs: the executor port and its local implementation.

`PlanService` preflights a plan and records its run, then hands it to its executor,
which gives back the `SupervisedRun` the supervisor runs. The local executor runs
the calls in this process's engine (`plans.runs`); another executor (Temporal's,
`app.temporal`) implements the same port and is chosen where the service is wired.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from app.engine import ParallelPlan, PlanProblem, RunIdentity, SequentialPlan
from app.service.idempotency import IdempotencyClaim
from app.service.plans.continuation import ContinuationPorts, continued_run
from app.service.plans.mcp_call import McpCallRun
from app.service.plans.runs import ParallelRun, PlanPorts, SequentialRun
from app.service.router.executor import RouterExecutor
from app.service.runs.control import RemoteStop
from app.service.runs.tasks import SupervisedRun
from app.store.models import Confirmation, Run
from app.store.models import Receipt as StoredReceipt

Args = Sequence[Mapping[str, Any]]


class PlanExecutor(Protocol):
    @property
    def defers_start(self) -> bool:
        """Whether a plan of read tools may run before its start commits (the local
        executor's calls wait for it in this process; a remote one's cannot)."""

    def run_instance(self, instance_id: str) -> str:
        """The instance recorded as running the plan's run (this process: `instance_id`)."""

    def problems(self, plan: SequentialPlan | ParallelPlan) -> list[PlanProblem]:
        """What this executor cannot run in a plan preflight admitted (empty: all)."""

    async def problem(self) -> str | None:
        """Why the executor cannot run plans now (readiness; None: it can)."""

    async def stop_orchestrated(self, run_id: str, instance_id: str) -> RemoteStop | None:
        """Cancel a run recorded with `instance_id` that no process here executes, when
        this executor runs it (None: not one of its runs)."""

    async def closed_while_waiting(self, run_id: str, instance_id: str) -> None:
        """Tell the executor running a paused run recorded with `instance_id` that the
        run was closed while it waited for confirmations (nothing when none runs it)."""

    def router_executor(self) -> RouterExecutor | None:
        """Where router runs go with this executor's plans (None: this process)."""

    def continued(
        self,
        ports: ContinuationPorts,
        run: Run,
        checkpoint: Mapping[str, Any] | None,
        decided: Sequence[Confirmation],
        rows: Sequence[StoredReceipt],
    ) -> SupervisedRun:
        """The run paused for confirmations (`checkpoint`, what its pause kept), going on
        now that `decided` were; raises ConfirmationConflict when this executor cannot
        continue it."""

    def sequential(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: SequentialPlan,
        admitted: Args,
        started: asyncio.Future[None] | None,
        claim: IdempotencyClaim | None,
    ) -> SupervisedRun: ...

    def parallel(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: ParallelPlan,
        admitted: Sequence[Args],
        batch_id: str,
        started: asyncio.Future[None] | None,
        claim: IdempotencyClaim | None,
    ) -> SupervisedRun: ...

    def mcp_call(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: SequentialPlan,
        admitted: Args,
        started: asyncio.Future[None] | None,
    ) -> SupervisedRun:
        """An MCP client's one-call run (kind `mcp`), as `sequential` runs a plan."""


class LocalExecutor:
    """The calls run in this process's engine."""

    defers_start = True

    def run_instance(self, instance_id: str) -> str:
        return instance_id

    def problems(self, plan: SequentialPlan | ParallelPlan) -> list[PlanProblem]:
        return []

    async def problem(self) -> str | None:
        return None

    async def stop_orchestrated(self, run_id: str, instance_id: str) -> RemoteStop | None:
        return None

    async def closed_while_waiting(self, run_id: str, instance_id: str) -> None:
        return None

    def router_executor(self) -> None:
        return None

    def continued(
        self,
        ports: ContinuationPorts,
        run: Run,
        checkpoint: Mapping[str, Any] | None,
        decided: Sequence[Confirmation],
        rows: Sequence[StoredReceipt],
    ) -> SequentialRun | ParallelRun:
        return continued_run(ports, run, checkpoint, decided, rows)

    def sequential(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: SequentialPlan,
        admitted: Args,
        started: asyncio.Future[None] | None,
        claim: IdempotencyClaim | None,
    ) -> SequentialRun:
        return SequentialRun(ports, identity, plan, admitted, started=started, claim=claim)

    def parallel(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: ParallelPlan,
        admitted: Sequence[Args],
        batch_id: str,
        started: asyncio.Future[None] | None,
        claim: IdempotencyClaim | None,
    ) -> ParallelRun:
        return ParallelRun(ports, identity, plan, admitted, batch_id, started=started, claim=claim)

    def mcp_call(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: SequentialPlan,
        admitted: Args,
        started: asyncio.Future[None] | None,
    ) -> McpCallRun:
        return McpCallRun(ports, identity, plan, admitted, started=started)
