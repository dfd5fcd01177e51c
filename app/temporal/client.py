"""The API side of Temporal: the executor that starts a plan's workflow and reads its end.

`serve` runs no tool: `TemporalExecutor` turns a preflighted, recorded plan
into a `PlanInput` and starts the plan's workflow; the run's supervised task
waits for the workflow's result, then answers from the stored receipts (the
redacted copies: the real outputs never enter Temporal's history). The run is
recorded with the `ORCHESTRATED` instance: no ToolLoop process's end interrupts
it, and the workflow records its end (`activities.end_run`), so a run whose API
process died goes on and is readable afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.service import RPCError

from app.contract import Contract, Effect, Tool
from app.engine import ParallelPlan, PlannedCall, PlanProblem, RunIdentity, SequentialPlan
from app.service.errors import ConfirmationConflict
from app.service.idempotency import IdempotencyClaim
from app.service.plans.mcp_call import MCP
from app.service.plans.runs import PlanPorts, stored_parallel_answer, stored_sequential_answer
from app.service.runs.control import RemoteStop
from app.service.runs.records import stored_receipts
from app.service.runs.tasks import CANCELLED, RunResult
from app.settings import Settings
from app.store.models import Confirmation, Run
from app.store.models import Receipt as StoredReceipt
from app.store.repositories.runs import ORCHESTRATED
from app.temporal.confirmation_messages import RESUME, SETTLED, WaitingSpec
from app.temporal.converter import DATA_CONVERTER
from app.temporal.handles import RUNNING, ExecutorUnavailable, cancel_workflow, workflow_id
from app.temporal.messages import (
    PLAN_WORKFLOW,
    CallSpec,
    Chain,
    PlanInput,
    PlanResult,
    RunRef,
)
from app.temporal.pauses import PENDING, is_temporal_plan_checkpoint, plan_shape, with_pending
from app.temporal.updates import settlement

if TYPE_CHECKING:
    from app.temporal.router_client import TemporalRouterExecutor

logger = logging.getLogger("toolloop.temporal")

Args = Sequence[Mapping[str, Any]]
# The part of an activity attempt's bound beyond the tool's own timeouts and backoff.
ATTEMPT_MARGIN_S = 30.0
# How long `/readyz` waits for Temporal's answer.
HEALTH_TIMEOUT = timedelta(seconds=2)


async def open_executor(settings: Settings, contract: Contract) -> TemporalExecutor:
    return TemporalExecutor(await connect(settings), settings, contract)


async def connect(settings: Settings) -> Client:
    """A client of the configured Temporal frontend, connecting on first use (so that
    the service starts, not ready, while Temporal is down)."""
    assert settings.temporal_address is not None  # `worker.settings_problem` said so
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=DATA_CONVERTER,
        lazy=True,
    )


class TemporalExecutor:
    """Plans as Temporal workflows on `settings.temporal_task_queue`."""

    defers_start = False

    def __init__(self, client: Client, settings: Settings, contract: Contract) -> None:
        self._client = client
        self._settings = settings
        self._task_queue = settings.temporal_task_queue
        self._heartbeat_timeout_s = settings.temporal_heartbeat_timeout_s
        self._contract = contract

    def run_instance(self, instance_id: str) -> str:
        return ORCHESTRATED

    def problems(self, plan: SequentialPlan | ParallelPlan) -> list[PlanProblem]:
        return []

    def continued(
        self,
        plans: PlanPorts,
        run: Run,
        checkpoint: Mapping[str, Any] | None,
        decided: Sequence[Confirmation],
        rows: Sequence[StoredReceipt],
    ) -> TemporalPlanRun:
        """The paused run's workflow, told its waiting calls were decided (`RESUME`)."""
        if not is_temporal_plan_checkpoint(checkpoint):
            raise ConfirmationConflict("the paused run was not paused on the temporal executor")
        assert checkpoint is not None
        plan = plan_shape(run, checkpoint)
        ref = RunRef(
            run_id=run.id,
            owner=run.owner,
            caller=run.caller,
            contract_hash=run.contract_hash,
            kind=run.kind,
            context={},
            planned_calls=0,
            parallel_batch_id=run.parallel_batch_id,
        )
        given = PlanInput(ref, [], 1, self._heartbeat_timeout_s)
        return TemporalPlanRun(self._client, self._task_queue, plans, plan, given, resuming=True)

    def router_executor(self) -> TemporalRouterExecutor:
        # Imported here: the router's client builds on this module's.
        from app.temporal.router_client import TemporalRouterExecutor

        return TemporalRouterExecutor(self._client, self._settings, self._contract)

    async def problem(self) -> str | None:
        try:
            await self._client.service_client.check_health(timeout=HEALTH_TIMEOUT)
        except (RPCError, RuntimeError) as exc:
            return f"Temporal does not answer: {exc}"
        return None

    async def stop_orchestrated(self, run_id: str, instance_id: str) -> RemoteStop | None:
        """Cancel the run's workflow and wait for its end (the workflow records it)."""
        if instance_id != ORCHESTRATED:
            return None
        status = await cancel_workflow(self._client, run_id)
        return RemoteStop(status or RUNNING, stopping=status == CANCELLED)

    async def closed_while_waiting(self, run_id: str, instance_id: str) -> None:
        """Nudge the run's workflow to look at the store, where it finds the run ended and
        ends as it stands (a cancel would record the workflow's own end over it). When
        Temporal does not answer, the workflow's own next look finds it."""
        if instance_id != ORCHESTRATED:
            return
        handle = self._client.get_workflow_handle(workflow_id(run_id))
        try:
            await settlement(handle, RESUME)
        except ExecutorUnavailable as exc:
            logger.warning("run %s: its workflow was not told the run closed: %s", run_id, exc)

    def sequential(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: SequentialPlan,
        admitted: Args,
        started: asyncio.Future[None] | None,
        claim: IdempotencyClaim | None,
    ) -> TemporalPlanRun:
        return self._sequential(ports, identity, plan, admitted, "sequential")

    def mcp_call(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: SequentialPlan,
        admitted: Args,
        started: asyncio.Future[None] | None,
    ) -> TemporalPlanRun:
        return self._sequential(ports, identity, plan, admitted, MCP)

    def _sequential(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: SequentialPlan,
        admitted: Args,
        kind: str,
    ) -> TemporalPlanRun:
        chains = [Chain(None, self._specs(plan.calls, admitted, 0))]
        run = self._ref(identity, kind, None, plan.deadline_s, len(plan.calls))
        return TemporalPlanRun(
            self._client,
            self._task_queue,
            ports,
            plan,
            PlanInput(run, chains, 1, self._heartbeat_timeout_s),
            may_pause=self._may_pause(chains),
        )

    def parallel(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: ParallelPlan,
        admitted: Sequence[Args],
        batch_id: str,
        started: asyncio.Future[None] | None,
        claim: IdempotencyClaim | None,
    ) -> TemporalPlanRun:
        chains = []
        first = 0
        for lane, lane_args in zip(plan.lanes, admitted, strict=True):
            chains.append(Chain(lane.item_key, self._specs(lane.calls, lane_args, first)))
            first += len(lane.calls)
        run = self._ref(identity, "parallel", batch_id, plan.deadline_s, first)
        return TemporalPlanRun(
            self._client,
            self._task_queue,
            ports,
            plan,
            PlanInput(run, chains, plan.max_concurrency, self._heartbeat_timeout_s),
            may_pause=self._may_pause(chains),
        )

    def _may_pause(self, chains: Sequence[Chain]) -> bool:
        """Whether a call of the plan may wait for a confirmation."""
        tools = self._contract.tools
        return any(
            tools[call.tool].requires_confirmation for chain in chains for call in chain.calls
        )

    def _ref(
        self,
        identity: RunIdentity,
        kind: str,
        batch_id: str | None,
        deadline_s: float | None,
        planned_calls: int,
    ) -> RunRef:
        return RunRef(
            run_id=identity.run_id,
            owner=identity.owner,
            caller=identity.caller,
            contract_hash=identity.contract_hash,
            kind=kind,
            context=dict(identity.context),
            planned_calls=planned_calls,
            parallel_batch_id=batch_id,
            deadline_at=None if deadline_s is None else time.time() + deadline_s,
        )

    def _specs(
        self, calls: Sequence[PlannedCall], admitted: Args, first_seq: int
    ) -> list[CallSpec]:
        tools = self._contract.tools
        return [
            CallSpec(
                seq=first_seq + index,
                call_key=call.call_key,
                tool=call.tool,
                args=dict(args),
                rerunnable=tools[call.tool].effect is not Effect.NON_IDEMPOTENT,
                attempt_timeout_s=attempt_bound_s(tools[call.tool]),
            )
            for index, (call, args) in enumerate(zip(calls, admitted, strict=True))
        ]


def attempt_bound_s(tool: Tool) -> float:
    """The most one activity attempt may take: every engine-level attempt of the tool
    with its timeout and largest backoff, and a margin for the bookkeeping."""
    retry = tool.retry
    return retry.max_attempts * (tool.timeout_s + retry.backoff_max_s) + ATTEMPT_MARGIN_S


class TemporalPlanRun:
    """A plan run under this process's supervisor whose calls run in Temporal."""

    def __init__(
        self,
        client: Client,
        task_queue: str,
        ports: PlanPorts,
        plan: SequentialPlan | ParallelPlan,
        given: PlanInput,
        *,
        may_pause: bool = True,
        resuming: bool = False,
    ) -> None:
        """`resuming`: the run's workflow waits for its confirmations' decisions, which
        were all recorded; else the workflow starts. `may_pause`: a call of the plan may
        wait for a confirmation; when none may, the run's end is all there is to wait for,
        and asking the workflow where it stands (an update, a workflow task of its own)
        is left out."""
        self._client = client
        self._task_queue = task_queue
        self._ports = ports
        self._plan = plan
        self._input = given
        self._resuming = resuming
        self._may_pause = may_pause
        self._status: str | None = None
        self._pending: list[WaitingSpec] = []

    @property
    def run_id(self) -> str:
        return self._input.run.run_id

    async def execute(self) -> None:
        """Until the run ended, or paused for confirmations (the workflow's answer to
        `SETTLED`, or to `RESUME` for a run that waited)."""
        if self._resuming:
            handle = self._client.get_workflow_handle(
                workflow_id(self.run_id), result_type=PlanResult
            )
        else:
            handle = await self._start()
        if self._resuming or self._may_pause:
            settled = await settlement(handle, RESUME if self._resuming else SETTLED)
            if settled is not None and settled.status == PENDING:
                self._status = PENDING
                self._pending = settled.pending
                return
        try:
            result = await handle.result()
        except (RPCError, WorkflowFailureError) as exc:
            raise ExecutorUnavailable(f"the plan's workflow did not end: {exc}") from exc
        self._status = result.status

    async def _start(self) -> WorkflowHandle[Any, PlanResult]:
        try:
            return await self._client.start_workflow(
                PLAN_WORKFLOW,
                self._input,
                id=workflow_id(self.run_id),
                task_queue=self._task_queue,
                result_type=PlanResult,
            )
        except (RPCError, RuntimeError) as exc:
            raise ExecutorUnavailable(f"the plan's workflow could not start: {exc}") from exc

    async def finish(self) -> RunResult:
        status = self._status
        assert status is not None
        return await self._answer(status)

    async def stop(self, status: str) -> RunResult:
        """A caller's cancel cancels the workflow and waits for its end (the workflow
        records it); a shutdown leaves the run to Temporal, still running."""
        if status != CANCELLED:
            return await self._answer(RUNNING)
        ended = await cancel_workflow(self._client, self.run_id)
        return await self._answer(status if ended is not None else RUNNING)

    async def _answer(self, status: str) -> RunResult:
        rows = await stored_receipts(self._ports.sessions, self.run_id)
        run = self._input.run
        head = {
            "plan_id": run.run_id,
            "kind": run.kind,
            "status": status,
            "contract_hash": run.contract_hash,
        }
        plan = self._plan
        if isinstance(plan, SequentialPlan):
            response = stored_sequential_answer(head, plan, rows)
        else:
            assert run.parallel_batch_id is not None
            response = stored_parallel_answer(head, plan, run.parallel_batch_id, rows)
        if status == PENDING:
            with_pending(response, self._pending)
        return RunResult(self.run_id, status, response, lambda: response)
