"""The activities of a router run's workflow, run by `toolloop worker` with its own runtime.

Each activity is one stretch of the router's own loop (`RouterRun`, unchanged),
restored from the checkpoint the previous stretch left: `begin` runs the
request's deterministic steps; `turn` asks the router model once and does what
the reply leads to (the calls through the worker's engine, or the final answer
and the completion gate). Budgets hold across stretches: the turns, tokens,
cost and time spent travel in the checkpoint's state. The worker holds the
model client: its profiles and prompts are the ones that answer.

A stretch Temporal runs again after its worker was lost goes on from the same
checkpoint: the receipts the lost stretch committed stay, counted in the run's
state, and the engine numbers the new calls after them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from app.engine import RunIdentity
from app.router.loop import Paused, RouterRun
from app.router.loop import RunResult as LoopResult
from app.router.pause import Checkpoint
from app.router.ports import RouterKit
from app.router.request import RouterRequest
from app.router.request_checks import RunPlan, admit
from app.router.state import RouterState
from app.router.transcript import load as load_transcript
from app.service.router.recorded import recorded_request
from app.service.router.records import (
    AuditDecisions,
    StretchRecording,
    closed_outcome,
    receipt_from_store,
    record_router_result,
    record_router_stopped,
)
from app.service.runs.reads import receipt_view
from app.service.runs.records import stored_receipts
from app.service.runtime import Runtime
from app.store.repositories.runs import RUNNING, RunRepository
from app.temporal.router_messages import (
    ROUTER_BEGIN,
    ROUTER_LOST,
    ROUTER_TURN,
    RouterLostInput,
    RouterRunInput,
    RouterStep,
    RouterTurnInput,
)


class RouterActivities:
    def __init__(self, runtime: Runtime, heartbeat_every_s: float) -> None:
        self._runtime = runtime
        self._heartbeat_every_s = heartbeat_every_s

    def all(self) -> list[Callable[..., Any]]:
        return [self.begin, self.turn, self.lost]

    @activity.defn(name=ROUTER_BEGIN)
    async def begin(self, given: RouterRunInput) -> RouterStep:
        ended = await self._ended(given.run_id)
        if ended is not None:
            return RouterStep(None, ended)
        kit, plan, identity = self._admitted(given, resuming=False)
        state = RouterState(plan.budgets.deadline_s)
        next_seq = await self._carry_lost(given.run_id, state, 0)
        run = RouterRun(
            kit, plan, identity, self._sink(given), state=state, messages=[], next_seq=next_seq
        )
        return await self._stretch(run, run.begin)

    @activity.defn(name=ROUTER_TURN)
    async def turn(self, given: RouterTurnInput) -> RouterStep:
        ended = await self._ended(given.run.run_id)
        if ended is not None:
            return RouterStep(None, ended)
        kit, plan, identity = self._admitted(given.run, resuming=True)
        checkpoint = Checkpoint.from_json(given.checkpoint)
        state = RouterState.load(checkpoint.state)
        next_seq = await self._carry_lost(given.run.run_id, state, checkpoint.next_seq)
        run = RouterRun(
            kit,
            plan,
            identity,
            self._sink(given.run),
            state=state,
            messages=load_transcript(checkpoint.transcript),
            next_seq=next_seq,
        )
        run.reopen()
        return await self._stretch(run, run.turn)

    @activity.defn(name=ROUTER_LOST)
    async def lost(self, given: RouterLostInput) -> None:
        """End the run `given.status` from its stored receipts (no stretch is running)."""
        run_id = given.run.run_id
        if await self._ended(run_id) is not None:
            return
        runtime = self._runtime
        self._sink(given.run).record("router.run_stopped", {"status": given.status})
        await runtime.writer.flush()
        rows = await stored_receipts(runtime.sessions, run_id)
        so_far: dict[str, Any] = {"run_id": run_id, "attempts": 0, "turns": 0}
        if given.checkpoint is not None:
            state = RouterState.load(Checkpoint.from_json(given.checkpoint).state)
            so_far.update(attempts=state.attempts, turns=state.turns, state=state.to_public())
        outcome = closed_outcome(so_far, given.reason, status=given.status, stopped_by=given.status)
        outcome["receipts"] = [receipt_from_store(row) for row in rows]
        await record_router_stopped(
            runtime.sessions, run_id, status=given.status, outcome=outcome, call_count=len(rows)
        )

    async def _stretch(
        self, run: RouterRun, step: Callable[[], Awaitable[LoopResult | None]]
    ) -> RouterStep:
        with self._heartbeats():
            result = await step()
        runtime = self._runtime
        recording = StretchRecording(
            recorded_request(run.plan, run.kit.redactors), run.session.replies
        )
        if result is None:
            checkpoint = run.carried_on()
            await runtime.writer.flush()
            if recording.replies:
                async with runtime.sessions.begin() as session:
                    await recording.keep(session, run.identity.run_id)
            return RouterStep(checkpoint.to_json(), None)
        if isinstance(result, Paused):  # the executor refuses such runs at admission
            raise ApplicationError("router runs on Temporal do not pause", non_retryable=True)
        await record_router_result(runtime.sessions, runtime.writer, result, recording)
        return RouterStep(None, result.outcome.status.value)

    def _admitted(
        self, given: RouterRunInput, *, resuming: bool
    ) -> tuple[RouterKit, RunPlan, RunIdentity]:
        """The run's plan as this worker admits it. A worker without a router (no
        profiles or prompts) or of another contract fails the run for good."""
        service = self._runtime.router
        kit, profiles = service.kit, service.setup.profiles
        if kit is None or profiles is None:
            why = "; ".join(service.setup.problems)
            raise ApplicationError(f"this worker cannot run router runs: {why}", non_retryable=True)
        contract = service.contract.hash
        if given.contract_hash != contract:
            raise ApplicationError(
                f"run {given.run_id} was admitted against contract {given.contract_hash}, "
                f"but this worker runs {contract}: start workers with serve's registries",
                non_retryable=True,
            )
        request = RouterRequest.from_json(given.request)
        if resuming:
            request = replace(request, steps=())
        problems, plan = admit(
            request, service.contract, profiles, service.limits, resuming=resuming
        )
        if plan is None:
            listed = "; ".join(f"{p.pointer}: {p.message}" for p in problems)
            raise ApplicationError(
                f"this worker does not admit the run: {listed}", non_retryable=True
            )
        identity = RunIdentity(
            given.run_id, plan.owner.name, given.caller, request.context, given.contract_hash
        )
        return kit, plan, identity

    def _sink(self, given: RouterRunInput) -> AuditDecisions:
        return AuditDecisions(self._runtime.writer, given.run_id, given.caller)

    async def _carry_lost(self, run_id: str, state: RouterState, next_seq: int) -> int:
        """Count in `state` the receipts a lost attempt of this stretch committed (from
        `next_seq` on); the sequence number the stretch's calls start from."""
        for row in await stored_receipts(self._runtime.sessions, run_id):
            if row.seq >= next_seq:
                state.add_receipt(receipt_view(row), None)
                next_seq = row.seq + 1
        return next_seq

    async def _ended(self, run_id: str) -> str | None:
        """The run's status once it ended (a lost worker recorded it); None while running."""
        async with self._runtime.sessions() as session:
            run = await RunRepository(session).get(run_id)
        if run is None:
            raise ApplicationError(f"run {run_id} is not recorded", non_retryable=True)
        return None if run.status == RUNNING else run.status

    @contextmanager
    def _heartbeats(self) -> Iterator[None]:
        """Tell Temporal this worker still runs the stretch (and learn of a cancel)."""
        beating = asyncio.ensure_future(self._heartbeat())
        try:
            yield
        finally:
            beating.cancel()

    async def _heartbeat(self) -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(self._heartbeat_every_s)
