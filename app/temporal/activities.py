"""The activities of a plan's workflow, run by `toolloop worker` with its own runtime.

`run_call` runs ONE call through the worker's engine: the same call pipeline as
a local plan (admission across every process, timeout, the tool's own retries,
cache, redaction, audit, evidence), its receipt durable in the shared database
through the worker's journal before the activity returns. The receipt's
idempotency key (`run_id:seq`) is the activity's id, so a call Temporal runs
again after its worker was lost keeps its key, and a call whose receipt a lost
worker already committed is answered from that receipt, never run twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from app.engine import CallError, CallRejected, Engine, RunIdentity
from app.engine.failures import NOT_RUN_CANCELLED, NOT_RUN_DEADLINE, not_run_after
from app.engine.run import RunKind, RunState
from app.observability.plans import record_plan_finished
from app.service.plans.mcp_call import MCP
from app.service.runs.records import (
    record_run_end,
    stored_receipts,
    stored_receipts_at,
    stored_receipts_below,
    stored_seqs_below,
)
from app.service.runtime import Runtime
from app.store.models import Receipt as StoredReceipt
from app.temporal.confirmation_activities import ConfirmationActivities, waiting_of
from app.temporal.messages import (
    END_RUN,
    RECORD_LOST_CALL,
    RUN_CALL,
    SKIP_CALLS,
    CallInput,
    CallResult,
    EndInput,
    RunRef,
    SkipInput,
)

# Sequence numbers of the calls a running tool dispatches: each plan call's own
# stretch after the plan's calls, since its worker cannot know another's.
DISPATCH_STRIDE = 1000
# A call's activity's status when the call waits at the confirmation gate.
WAITING = "waiting"


class PlanActivities:
    def __init__(self, runtime: Runtime, heartbeat_every_s: float) -> None:
        self._runtime = runtime
        self._engine: Engine = runtime.engine
        self._heartbeat_every_s = heartbeat_every_s
        self._confirmations = ConfirmationActivities(runtime)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.run_call,
            self.skip_calls,
            self.record_lost_call,
            self.end_run,
            *self._confirmations.all(),
        ]

    @activity.defn(name=RUN_CALL)
    async def run_call(self, given: CallInput) -> CallResult:
        call = given.call
        done = await self._stored_at(given.run.run_id, call.seq)
        if done is not None:  # a lost worker committed it before it was lost
            return CallResult(done.id, done.status)
        state = self._open(given.run, first_dispatch_seq(given.run, call.seq))
        tool = self._engine.contract.tools[call.tool]
        if tool.requires is not None:
            rows = await stored_receipts(self._runtime.sessions, given.run.run_id)
            self._engine.recall(state, rows)
        decided = None
        if tool.requires_confirmation:
            decided = await self._confirmations.decision(
                given.run.run_id, given.item_key, call.call_key
            )
        beating = asyncio.create_task(self._heartbeat())
        try:
            receipt = await self._engine.run_call(
                state,
                call.tool,
                call.args,
                call_key=call.call_key,
                item_key=given.item_key,
                confirmed=decided,
                seq=call.seq,
            )
        except CallRejected as exc:
            waiting = waiting_of(exc)
            if waiting is None:
                raise
            return CallResult("", WAITING, waiting)
        finally:
            beating.cancel()
            with suppress(asyncio.CancelledError):
                await beating
        return CallResult(receipt.receipt_id, receipt.status.value)

    @activity.defn(name=SKIP_CALLS)
    async def skip_calls(self, given: SkipInput) -> list[str]:
        """`skipped` receipts for the calls of `given` that have none yet, durable together."""
        run = given.run
        sessions = self._runtime.sessions
        error: CallError
        if given.after_call_key is None:  # every call of the cancelled run
            error = NOT_RUN_CANCELLED
            stored = await stored_seqs_below(sessions, run.run_id, run.planned_calls)
        else:  # the rest of one chain
            if run.deadline_at is not None and time.time() >= run.deadline_at:
                error = NOT_RUN_DEADLINE
            else:
                error = not_run_after(given.after_call_key)
            seqs = [call.seq for chain in given.chains for call in chain.calls]
            stored = {row.seq for row in await stored_receipts_at(sessions, run.run_id, seqs)}
        chains = [
            (
                chain.item_key,
                [
                    (call.seq, call.call_key, call.tool, call.args)
                    for call in chain.calls
                    if call.seq not in stored
                ],
            )
            for chain in given.chains
        ]
        if not any(calls for _, calls in chains):
            return []
        state = self._open(run, run.planned_calls)
        receipts = await self._engine.record_chains_settled_elsewhere(state, chains, error=error)
        return [receipt.receipt_id for receipt in receipts]

    @activity.defn(name=RECORD_LOST_CALL)
    async def record_lost_call(self, given: CallInput) -> CallResult:
        """The receipt of a call whose worker was lost and that is not run again."""
        call = given.call
        done = await self._stored_at(given.run.run_id, call.seq)
        if done is not None:
            return CallResult(done.id, done.status)
        state = self._open(given.run, given.run.planned_calls)
        (receipt,) = await self._engine.record_settled_elsewhere(
            state, [(call.seq, call.call_key, call.tool, call.args)], given.item_key, error=None
        )
        return CallResult(receipt.receipt_id, receipt.status.value)

    @activity.defn(name=END_RUN)
    async def end_run(self, given: EndInput) -> None:
        run = given.run
        runtime = self._runtime
        call_count = await stored_receipts_below(runtime.sessions, run.run_id, run.planned_calls)
        await record_run_end(
            runtime.sessions,
            run.run_id,
            status=given.status,
            call_count=call_count,
            writer=runtime.writer,
        )
        runtime.relay_run_end(run.run_id, given.status)
        record_plan_finished(run.kind, given.status)

    def _open(self, run: RunRef, first_seq: int) -> RunState:
        """The run's state in this worker's engine. A worker of another contract fails the
        activity for good: no attempt anywhere could run the call as admitted."""
        contract = self._engine.contract.hash
        if run.contract_hash != contract:
            raise ApplicationError(
                f"run {run.run_id} was admitted against contract {run.contract_hash}, but "
                f"this worker runs {contract}: start workers with serve's registries",
                non_retryable=True,
            )
        identity = RunIdentity(
            run_id=run.run_id,
            owner=run.owner,
            caller=run.caller,
            context=run.context,
            contract_hash=run.contract_hash,
        )
        deadline_s = None if run.deadline_at is None else run.deadline_at - time.time()
        return self._engine.open_run(
            identity,
            engine_run_kind(run.kind),
            deadline_s=deadline_s,
            first_seq=first_seq,
            parallel_batch_id=run.parallel_batch_id,
        )

    async def _stored_at(self, run_id: str, seq: int) -> StoredReceipt | None:
        """The call's own stored receipt, if any (one indexed row, not the run's)."""
        rows = await stored_receipts_at(self._runtime.sessions, run_id, [seq])
        return rows[0] if rows else None

    async def _heartbeat(self) -> None:
        """Tell Temporal this worker still runs the call (and learn of a cancel), once a
        period has passed and every period after: a call that ends sooner sends none,
        and Temporal is asked one request less per call."""
        while True:
            await asyncio.sleep(self._heartbeat_every_s)
            activity.heartbeat()


def first_dispatch_seq(run: RunRef, seq: int) -> int:
    return run.planned_calls + seq * DISPATCH_STRIDE


def engine_run_kind(kind: str) -> RunKind:
    """The engine's kind of a plan's run: an MCP call runs as the one call of a
    sequential plan, as it does locally."""
    return RunKind.SEQUENTIAL if kind == MCP else RunKind(kind)
