"""The activities of a router run's workflow, run by `toolloop worker` with its own runtime.

Each activity is one stretch of the router's own loop (`RouterRun`, unchanged),
restored from the checkpoint the previous stretch left: `begin` runs the
request's deterministic steps; `turn` asks the router model once and does what
the reply leads to (the calls through the worker's engine, or the final answer
and the completion gate). Budgets hold across stretches: the turns, tokens,
cost and time spent travel in the checkpoint's state. The worker holds the
model client: its profiles and prompts are the ones that answer.

The checkpoint in Temporal's history is redacted; what a turn sends the model is
the exact conversation, which each stretch keeps in the store
(`RouterExactStateRepository`) and the run forgets when it ends. So the model
sees what a local run of the same script shows it.

A stretch Temporal runs again after its worker was lost goes on from the same
checkpoint: the receipts the lost stretch committed stay, counted in the run's
state, and the engine numbers the new calls after them; the model requests it
made count against the budgets (the usage ledger holds each one). A run that
may call a `non_idempotent` tool is not run again: the calls of such tools its
lost stretch started (kept before each started, `StartsKeptEngine`) get
`outcome_unknown` receipts when the run ends `interrupted`. A stretch whose lost
attempt had recorded a pause does not run again: the pause stands (decided since or
not), and the workflow waits for its decisions, whether the run may run again or not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession
from temporalio import activity
from temporalio.exceptions import ApplicationError

from app.engine import RunIdentity
from app.engine.run import RunKind
from app.router.loop import Paused, RouterRun
from app.router.loop import RunResult as LoopResult
from app.router.pause import Checkpoint, Decision
from app.router.ports import RouterKit
from app.router.request import RouterRequest
from app.router.request_checks import RunPlan, admit
from app.router.state import RouterState
from app.router.transcript import dump as dump_transcript
from app.router.transcript import dump_exact
from app.router.transcript import load as load_transcript
from app.service.confirmations import APPROVED
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
from app.store.repositories.router_exact_state import RouterExactStateRepository
from app.store.repositories.router_runs import PENDING, RouterRunRepository
from app.store.repositories.runs import INTERRUPTED, RUNNING, RunRepository
from app.store.repositories.usage import UsageRepository
from app.temporal.router_messages import (
    PAUSED,
    ROUTER_BEGIN,
    ROUTER_LOST,
    ROUTER_RESUME,
    ROUTER_TURN,
    RouterLostInput,
    RouterResumeInput,
    RouterRunInput,
    RouterStep,
    RouterTurnInput,
)
from app.temporal.router_started_calls import StartsKeptEngine

logger = logging.getLogger("toolloop.temporal")


class RouterActivities:
    def __init__(self, runtime: Runtime, heartbeat_every_s: float) -> None:
        self._runtime = runtime
        self._heartbeat_every_s = heartbeat_every_s

    def all(self) -> list[Callable[..., Any]]:
        return [self.begin, self.turn, self.resume, self.lost]

    @activity.defn(name=ROUTER_BEGIN)
    async def begin(self, given: RouterRunInput) -> RouterStep:
        status = await self._status(given.run_id)
        if status != RUNNING:
            return RouterStep(None, status)
        kit, plan, identity = self._admitted(given, resuming=False)
        state = RouterState(plan.budgets.deadline_s)
        next_seq = await self._carry_lost(given.run_id, state, 0)
        run = RouterRun(
            kit, plan, identity, self._sink(given), state=state, messages=[], next_seq=next_seq
        )
        return await self._stretch(run, run.begin)

    @activity.defn(name=ROUTER_TURN)
    async def turn(self, given: RouterTurnInput) -> RouterStep:
        """One turn from `given.checkpoint`; the pause a lost attempt of it recorded, if one
        did (the turn is not asked again)."""
        opened = await self._opened(given.run.run_id, given.checkpoint)
        if opened is not None:
            return opened
        run = await self._restored(given.run, given.checkpoint)
        return await self._stretch(run, run.turn)

    @activity.defn(name=ROUTER_RESUME)
    async def resume(self, given: RouterResumeInput) -> RouterStep:
        """Settle the calls the run paused for with their decisions, read from the store
        with the calls' kept arguments (as a local resume). The next stretch, or the
        run's end, drops the kept arguments: until then a lost attempt can be run again."""
        run_id = given.run.run_id
        status = await self._status(run_id)
        if status != RUNNING:
            return RouterStep(None, status)
        run = await self._restored(given.run, given.checkpoint)
        decisions = await self._decisions(run_id, given.checkpoint)
        return await self._stretch(run, lambda: run.settle_waiting(decisions))

    @activity.defn(name=ROUTER_LOST)
    async def lost(self, given: RouterLostInput) -> RouterStep:
        """End the run `given.status` from its stored receipts (no stretch is running);
        or, when the lost stretch had recorded a pause, that pause: the run waits for
        its decisions rather than ending."""
        run_id = given.run.run_id
        status = await self._status(run_id)
        if status not in (RUNNING, PENDING):
            return RouterStep(None, status)
        # A cancelled run's pause stays as it is: `cancel_paused` ends a waiting run.
        if status == PENDING or given.status == INTERRUPTED:
            async with self._runtime.sessions.begin() as session:
                paused = await _recorded_pause(session, run_id, given.checkpoint)
            if paused is not None:
                return paused
        runtime = self._runtime
        self._sink(given.run).record("router.run_stopped", {"status": given.status})
        await runtime.writer.flush()
        await self._settle_started_calls(given.run)
        rows = await stored_receipts(runtime.sessions, run_id)
        so_far: dict[str, Any] = {"run_id": run_id, "attempts": 0, "turns": 0}
        if given.checkpoint is not None:
            state = RouterState.load(Checkpoint.from_json(given.checkpoint).state)
            await self._carry_lost_usage(run_id, state)
            so_far.update(attempts=state.attempts, turns=state.turns, state=state.to_public())
        outcome = closed_outcome(so_far, given.reason, status=given.status, stopped_by=given.status)
        outcome["receipts"] = [receipt_from_store(row) for row in rows]
        await record_router_stopped(
            runtime.sessions, run_id, status=given.status, outcome=outcome, call_count=len(rows)
        )
        await self._forget_exact_state(run_id)
        return RouterStep(None, given.status)

    async def _restored(self, given: RouterRunInput, data: dict[str, Any]) -> RouterRun:
        """The run as the checkpoint `data` left it, opened for a stretch: what a lost
        attempt of the stretch committed (receipts, model requests) counted in."""
        run_id = given.run_id
        kit, plan, identity = self._admitted(given, resuming=True)
        checkpoint = Checkpoint.from_json(data)
        state = RouterState.load(checkpoint.state)
        next_seq = await self._carry_lost(run_id, state, checkpoint.next_seq)
        if activity.info().attempt > 1:
            await self._carry_lost_usage(run_id, state)
        conversation = await self._conversation(run_id, kit, checkpoint)
        run = RouterRun(
            kit,
            plan,
            identity,
            self._sink(given),
            state=state,
            messages=load_transcript(conversation),
            next_seq=next_seq,
            pending=checkpoint.pending,
        )
        run.reopen()
        return run

    async def _decisions(self, run_id: str, pause: dict[str, Any]) -> dict[str, Decision]:
        """The decisions on the pause's calls, with the arguments the store kept for them."""
        waiting = {entry["confirmation_id"] for entry in Checkpoint.from_json(pause).pending}
        async with self._runtime.sessions() as session:
            rows = await RouterRunRepository(session).confirmations(run_id)
        return {
            row.id: Decision(row.id, row.status == APPROVED, row.reason or "", row.args)
            for row in rows
            if row.id in waiting and row.status != PENDING
        }

    async def _stretch(
        self, run: RouterRun, step: Callable[[], Awaitable[LoopResult | None]]
    ) -> RouterStep:
        with self._heartbeats():
            result = await step()
        runtime = self._runtime
        recording = StretchRecording(
            recorded_request(run.plan, run.kit.redactors), run.session.replies
        )
        run_id = run.identity.run_id
        if result is None:
            checkpoint = run.carried_on()
            await runtime.writer.flush()
            async with runtime.sessions.begin() as session:
                if recording.replies:
                    await recording.keep(session, run_id)
                await RouterExactStateRepository(session).keep_conversation(
                    run_id, dump_exact(run.messages)
                )
            return RouterStep(checkpoint.to_json(), None)
        if isinstance(result, Paused):  # the workflow waits for the decisions
            async with runtime.sessions.begin() as session:
                await RouterExactStateRepository(session).keep_conversation(
                    run_id, dump_exact(run.messages)
                )
            await record_router_result(runtime.sessions, runtime.writer, result, recording)
            return RouterStep(result.checkpoint.to_json(), PAUSED)
        await record_router_result(runtime.sessions, runtime.writer, result, recording)
        await self._forget_exact_state(run_id)
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
        kept = StartsKeptEngine(kit.engine, self._runtime.sessions, given.run_id)
        return replace(kit, engine=kept), plan, identity

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

    async def _carry_lost_usage(self, run_id: str, state: RouterState) -> None:
        """Count in `state` the model requests a lost attempt of this turn made: the usage
        ledger holds every request of the run, committed before the run went on."""
        async with self._runtime.sessions() as session:
            spent = await UsageRepository(session).run_totals(run_id)
        state.add_unseen_usage(
            spent.requests, spent.input_tokens, spent.output_tokens, spent.cost_nanos
        )

    async def _conversation(
        self, run_id: str, kit: RouterKit, checkpoint: Checkpoint
    ) -> list[dict[str, Any]]:
        """The conversation the turn goes on with, exact as the model saw it: the kept
        copy, whose redacted form is the checkpoint's (a later stretch's lost attempt may
        have kept a longer one: the conversation only grows)."""
        redacted = [dict(message) for message in checkpoint.transcript]
        async with self._runtime.sessions() as session:
            exact = await RouterExactStateRepository(session).conversation(run_id)
        if exact is not None:
            kept = exact[: len(redacted)]
            if dump_transcript(load_transcript(kept), kit.redactors) == redacted:
                return kept
        logger.warning(
            "router run %s: no exact conversation matches its checkpoint; the turn goes on "
            "with the redacted one",
            run_id,
        )
        return redacted

    async def _settle_started_calls(self, run: RouterRunInput) -> None:
        """The `outcome_unknown` receipts of the non-idempotent calls a lost stretch started
        and did not settle (`StartsKeptEngine` kept them before they started)."""
        run_id = run.run_id
        sessions = self._runtime.sessions
        async with sessions() as session:
            started = await RouterExactStateRepository(session).started_calls(run_id)
        if not started:
            return
        rows = await stored_receipts(sessions, run_id)
        settled = {row.seq for row in rows}
        lost = [
            (int(call["seq"]), str(call["call_key"]), str(call["tool"]), call["args"])
            for call in started
            if call["seq"] not in settled
        ]
        if not lost:
            return
        engine = self._runtime.engine
        request = RouterRequest.from_json(run.request)
        identity = RunIdentity(
            run_id, request.owner, run.caller, request.context, run.contract_hash
        )
        next_seq = max([*settled, *(seq for seq, *_ in lost)]) + 1
        state = engine.open_run(identity, RunKind.ROUTER, first_seq=next_seq)
        await engine.record_settled_elsewhere(state, lost, None, error=None)

    async def _forget_exact_state(self, run_id: str) -> None:
        async with self._runtime.sessions.begin() as session:
            await RouterExactStateRepository(session).forget(run_id)

    async def _status(self, run_id: str) -> str:
        """The run's status (once it ended, its exact state is forgotten: a lost worker
        may have ended it before)."""
        async with self._runtime.sessions() as session:
            run = await RunRepository(session).get(run_id)
        if run is None:
            raise ApplicationError(f"run {run_id} is not recorded", non_retryable=True)
        if run.status not in (RUNNING, PENDING):
            await self._forget_exact_state(run_id)
        return run.status

    async def _opened(self, run_id: str, since: dict[str, Any]) -> RouterStep | None:
        """How a turn from `since` finds the run: None when it goes on; the pause a lost
        attempt of the turn recorded (decided since or not); or the run's end."""
        async with self._runtime.sessions.begin() as session:
            run = await RunRepository(session).get(run_id)
            if run is None:
                raise ApplicationError(f"run {run_id} is not recorded", non_retryable=True)
            if run.status in (RUNNING, PENDING):
                return await _recorded_pause(session, run_id, since)
        await self._forget_exact_state(run_id)
        return RouterStep(None, run.status)

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


async def _recorded_pause(
    session: AsyncSession, run_id: str, since: dict[str, Any] | None
) -> RouterStep | None:
    """The pause recorded after the checkpoint `since` (by a stretch that went on from
    it and was lost), decided since or not; None when there is none. A pause recorded
    before `since` was settled: its checkpoint and kept arguments are dropped."""
    repo = RouterRunRepository(session)
    stored = await repo.checkpoint(run_id)
    if stored is None:
        return None
    # The conversation only grows: a later pause's is longer than the one it went on from.
    if since is None or len(stored["transcript"]) > len(since["transcript"]):
        return RouterStep(stored, PAUSED)
    await repo.release(run_id)
    return None
