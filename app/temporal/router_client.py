"""The API side of router runs on Temporal: start the run's workflow, read its end.

`serve` admits and records the run, then starts its workflow; the run's
supervised task waits for the workflow's result and answers from the stored
outcome (redacted: no tool output or model reply passes through Temporal). The
run is recorded with the `ORCHESTRATED` instance, so no ToolLoop process's end
interrupts it: the workflow's activities record its end.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.service import RPCError

from app.contract import Contract, Effect
from app.engine import PlanProblem, RunIdentity
from app.router.request_checks import RunPlan
from app.service.router.records import receipt_from_store
from app.service.runs.records import stored_receipts
from app.service.runs.tasks import CANCELLED, RunResult
from app.settings import Settings
from app.store.repositories.runs import ORCHESTRATED, RunRepository
from app.temporal.confirmation_messages import RESUME, SETTLED
from app.temporal.handles import RUNNING, ExecutorUnavailable, cancel_workflow, workflow_id
from app.temporal.router_messages import PAUSED, ROUTER_WORKFLOW, RouterRunInput
from app.temporal.updates import settlement

# What one stretch may take beyond the run's own deadline (its bookkeeping).
STRETCH_MARGIN_S = 30.0
# Keys of a stored receipt that a router response's receipts do not have.
_STORED_ONLY = ("run_id", "seq", "owner", "definition_hash")


class TemporalRouterExecutor:
    """Router runs as Temporal workflows on `settings.temporal_task_queue`."""

    def __init__(self, client: Client, settings: Settings, contract: Contract) -> None:
        self._client = client
        self._task_queue = settings.temporal_task_queue
        self._heartbeat_timeout_s = settings.temporal_heartbeat_timeout_s
        self._contract = contract

    def run_instance(self, instance_id: str) -> str:
        return ORCHESTRATED

    def problems(self, plan: RunPlan) -> list[PlanProblem]:
        return []

    def resumed_run(
        self, sessions: async_sessionmaker[AsyncSession], run_id: str
    ) -> TemporalRouterRun:
        """The paused run's workflow, nudged to look at its decisions (`RESUME`): its next
        stretch reads them from the store with the calls' exact arguments, so they never
        enter Temporal's history."""
        return TemporalRouterRun(
            self._client, self._task_queue, sessions, run_id, None, resumed=True
        )

    async def stop_waiting(self, run_id: str) -> None:
        """Cancel the workflow of a run closed while it waited (its lost stretch sees the
        run ended and records nothing)."""
        await cancel_workflow(self._client, run_id)

    def router_run(
        self,
        sessions: async_sessionmaker[AsyncSession],
        plan: RunPlan,
        identity: RunIdentity,
    ) -> TemporalRouterRun:
        tools = self._contract.tools
        given = RouterRunInput(
            run_id=identity.run_id,
            caller=identity.caller,
            contract_hash=identity.contract_hash,
            request=plan.request.to_json(),
            rerunnable=all(
                tools[tool_id].effect is not Effect.NON_IDEMPOTENT for tool_id in plan.tools
            ),
            turn_timeout_s=plan.budgets.deadline_s + STRETCH_MARGIN_S,
            heartbeat_timeout_s=self._heartbeat_timeout_s,
        )
        may_pause = any(tools[tool_id].requires_confirmation for tool_id in plan.tools)
        return TemporalRouterRun(
            self._client,
            self._task_queue,
            sessions,
            identity.run_id,
            given,
            may_pause=may_pause,
        )


class TemporalRouterRun:
    """A router run under this process's supervisor whose loop runs in Temporal."""

    def __init__(
        self,
        client: Client,
        task_queue: str,
        sessions: async_sessionmaker[AsyncSession],
        run_id: str,
        given: RouterRunInput | None,
        *,
        resumed: bool = False,
        may_pause: bool = True,
    ) -> None:
        """`given`: the run to start; None with `resumed`: its waiting workflow goes on
        (the run's pause was decided). `may_pause`: a tool the run may call waits for a
        confirmation; when none does, the run's end is all there is to wait for."""
        self._client = client
        self._task_queue = task_queue
        self._sessions = sessions
        self._run_id = run_id
        self._input = given
        self._resumed = resumed
        self._may_pause = may_pause

    @property
    def run_id(self) -> str:
        return self._run_id

    async def execute(self) -> None:
        """Until the run ended, or paused for confirmations."""
        if self._input is None:
            handle = self._client.get_workflow_handle(workflow_id(self.run_id), result_type=str)
        else:
            handle = await self._start(self._input)
        if self._resumed:
            settled = await settlement(handle, RESUME)
        elif self._may_pause:
            settled = await settlement(handle, SETTLED)
        else:
            settled = None
        if settled is not None and settled.status == PAUSED:
            return
        try:
            await handle.result()
        except (RPCError, WorkflowFailureError) as exc:
            raise ExecutorUnavailable(f"the run's workflow did not end: {exc}") from exc

    async def _start(self, given: RouterRunInput) -> WorkflowHandle[Any, str]:
        try:
            return await self._client.start_workflow(
                ROUTER_WORKFLOW,
                given,
                id=workflow_id(self.run_id),
                task_queue=self._task_queue,
                result_type=str,
            )
        except (RPCError, RuntimeError) as exc:
            raise ExecutorUnavailable(f"the run's workflow could not start: {exc}") from exc

    async def finish(self) -> RunResult:
        return await self._answer()

    async def stop(self, status: str) -> RunResult:
        """A caller's cancel cancels the workflow and waits for its end (the workflow
        records it); a shutdown leaves the run to Temporal, still running."""
        if status == CANCELLED:
            await cancel_workflow(self._client, self.run_id)
        return await self._answer()

    async def _answer(self) -> RunResult:
        """The stored outcome once the run ended; while it goes on, its receipts so far."""
        async with self._sessions() as session:
            run = await RunRepository(session).get(self.run_id)
        if run is not None and run.status != RUNNING and run.outcome is not None:
            response = _caller_shape(run.outcome)
            return RunResult(self.run_id, run.status, response, lambda: response)
        rows = await stored_receipts(self._sessions, self.run_id)
        going_on: dict[str, Any] = {
            "run_id": self.run_id,
            "status": RUNNING,
            "receipts": [receipt_from_store(row) for row in rows],
        }
        return RunResult(self.run_id, RUNNING, going_on, lambda: going_on)


def _caller_shape(outcome: dict[str, Any]) -> dict[str, Any]:
    """The stored outcome with its receipts in a router response's shape."""
    shaped = dict(outcome)
    shaped["receipts"] = [
        {key: value for key, value in receipt.items() if key not in _STORED_ONLY}
        for receipt in outcome.get("receipts", [])
    ]
    return shaped
