"""The engine: the only place registered callables run.

One Engine per process and event loop. It owns the worker-thread pool for
sync callables and the process-wide admission gates; the service gives it the
ports (receipt sink, audit sink, cache store) and closes it on shutdown.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar
from uuid import uuid4

from app.contract.compiled import Contract
from app.engine.audit import Auditor
from app.engine.cache import ResultCache
from app.engine.confirmation import CallPlace, ConfirmationDecision, ConfirmationRequired
from app.engine.errors import CallRejected
from app.engine.evidence import EvidenceHooks
from app.engine.failures import CANCELLED_SKIP
from app.engine.invocation import Invoker
from app.engine.parallel import LaneOutcome, ParallelOutcome, run_lanes
from app.engine.pipeline import CallPipeline
from app.engine.plan import ParallelPlan, SequentialPlan
from app.engine.ports import AuditSink, Backpressure, CacheStore, ReceiptSink, SharedLimits
from app.engine.receipt import CallError, ErrorKind, Receipt, SettledCall
from app.engine.resume import ResumePoint
from app.engine.run import RunIdentity, RunKind, RunState
from app.engine.sequential import SequentialOutcome, run_chain
from app.engine.settled import Settled
from app.engine.watchdog import Deadlines

# A partial of the C classmethod, not a function: two are read per call.
utc_now: Callable[[], datetime] = partial(datetime.now, UTC)

Outcome = TypeVar("Outcome", SequentialOutcome, ParallelOutcome)


class Engine:
    def __init__(
        self,
        contract: Contract,
        *,
        receipts: ReceiptSink,
        audit: AuditSink,
        cache: CacheStore | None = None,
        backpressure: Backpressure | None = None,
        worker_threads: int = 32,
        max_cached_output_bytes: int | None = None,
        evidence_timeout_s: float = 30.0,
        clock: Callable[[], datetime] = utc_now,
        rng: random.Random | None = None,
        pipeline_factory: Callable[..., CallPipeline] = CallPipeline,
        shared_limits: SharedLimits | None = None,
    ) -> None:
        """`pipeline_factory`: builds the call pipeline (`CallPipeline`'s arguments);
        a subclass adds to every call (`app.observability.traced_calls`).
        `shared_limits`: the tools' admission limits are held with the other processes
        sharing it (`CallPipeline`)."""
        self._contract = contract
        self._invoker = Invoker(worker_threads)
        self._deadlines: Deadlines | None = None
        auditor = Auditor(audit)
        self._pipeline = pipeline_factory(
            contract,
            invoker=self._invoker,
            receipts=receipts,
            auditor=auditor,
            cache=None
            if cache is None
            else ResultCache(cache, clock, max_output_bytes=max_cached_output_bytes),
            evidence=EvidenceHooks(
                contract.evidence_hooks, self._invoker, auditor, evidence_timeout_s, clock
            ),
            clock=clock,
            rng=rng if rng is not None else random.Random(),
            backpressure=backpressure,
            shared_limits=shared_limits,
        )

    @property
    def contract(self) -> Contract:
        return self._contract

    async def run_sequential(
        self,
        run: RunIdentity,
        plan: SequentialPlan,
        admitted_args: Sequence[Mapping[str, Any]],
        *,
        resume: ResumePoint | None = None,
        started: asyncio.Future[None] | None = None,
        decisions: Mapping[CallPlace, ConfirmationDecision] | None = None,
    ) -> SequentialOutcome:
        """Run a preflighted plan (`settle_sequential`); returns once every receipt is
        durable."""
        settled = await self.settle_sequential(
            run, plan, admitted_args, resume=resume, started=started, decisions=decisions
        )
        return await settled.durable()

    async def settle_sequential(
        self,
        run: RunIdentity,
        plan: SequentialPlan,
        admitted_args: Sequence[Mapping[str, Any]],
        *,
        resume: ResumePoint | None = None,
        started: asyncio.Future[None] | None = None,
        decisions: Mapping[CallPlace, ConfirmationDecision] | None = None,
    ) -> Settled[SequentialOutcome]:
        """Run a preflighted plan; returns once every call settled, in the step of the
        loop that submitted the last receipt: the outcome and what its durability
        waits on (`Settled`).

        If the task is cancelled, the running call gets a `cancelled` receipt and
        the rest `skipped` ones; they are flushed, then the cancellation propagates.
        With `resume`, the calls it holds as done are reported, not run.
        `started`: the run's start, queued on the receipt sink before this call and
        not yet durable; calls of tools with effects wait for it (`RunState`), and
        the run fails with ReceiptWriteFailed if it fails.
        `decisions`: what deciders answered for calls that require a confirmation
        (`app.engine.confirmation`); a call without one waits, and the outcome's
        `waiting` holds it.
        """
        self._check(run, plan.owner)
        if len(admitted_args) != len(plan.calls):
            raise ValueError("admitted_args must hold one argument mapping per call")
        state = self._open_plan_run(
            run,
            RunKind.SEQUENTIAL,
            plan.deadline_s,
            len(plan.calls),
            resume=resume,
            started=started,
            decisions=decisions,
        )
        done = () if resume is None else resume.done[0]
        receipts: list[Receipt] = []
        await _ran(
            state,
            run_chain(self._pipeline, state, plan.calls, admitted_args, 0, None, receipts, done),
        )
        outcome = SequentialOutcome(
            run.run_id,
            run.contract_hash,
            tuple(receipts),
            tuple(state.dispatched),
            tuple(state.waiting),
        )
        return _as_settled(state, outcome)

    async def run_parallel(
        self,
        run: RunIdentity,
        plan: ParallelPlan,
        admitted_args: Sequence[Sequence[Mapping[str, Any]]],
        *,
        parallel_batch_id: str | None = None,
        resume: ResumePoint | None = None,
        started: asyncio.Future[None] | None = None,
        decisions: Mapping[CallPlace, ConfirmationDecision] | None = None,
    ) -> ParallelOutcome:
        """Run a preflighted parallel plan (`settle_parallel`); returns once every
        receipt is durable."""
        settled = await self.settle_parallel(
            run,
            plan,
            admitted_args,
            parallel_batch_id=parallel_batch_id,
            resume=resume,
            started=started,
            decisions=decisions,
        )
        return await settled.durable()

    async def settle_parallel(
        self,
        run: RunIdentity,
        plan: ParallelPlan,
        admitted_args: Sequence[Sequence[Mapping[str, Any]]],
        *,
        parallel_batch_id: str | None = None,
        resume: ResumePoint | None = None,
        started: asyncio.Future[None] | None = None,
        decisions: Mapping[CallPlace, ConfirmationDecision] | None = None,
    ) -> Settled[ParallelOutcome]:
        """Run a preflighted parallel plan; returns once every call settled, one turn of
        the loop after the last receipt was submitted (`run_lanes`). Cancellation,
        `resume`, `started` and `decisions` behave as in `settle_sequential`
        (`resume.done` holds one entry per lane). A lane waiting for a confirmation
        does not hold up the others."""
        self._check(run, plan.owner)
        if len(admitted_args) != len(plan.lanes) or any(
            len(args) != len(lane.calls)
            for args, lane in zip(admitted_args, plan.lanes, strict=True)
        ):
            raise ValueError("admitted_args must hold one argument mapping per call of each lane")
        batch_id = parallel_batch_id if parallel_batch_id is not None else str(uuid4())
        state = self._open_plan_run(
            run,
            RunKind.PARALLEL,
            plan.deadline_s,
            sum(len(lane.calls) for lane in plan.lanes),
            resume=resume,
            started=started,
            decisions=decisions,
            parallel_batch_id=batch_id,
        )
        done = None if resume is None else resume.done
        try:
            results = await run_lanes(self._pipeline, state, plan, admitted_args, done)
        except BaseException:
            with suppress(Exception):
                await state.flush()
            raise
        waiting = {call.item_key: call for call in state.waiting}
        outcome = ParallelOutcome(
            run.run_id,
            run.contract_hash,
            batch_id,
            tuple(
                LaneOutcome(lane.item_key, tuple(receipts), waiting.get(lane.item_key))
                for lane, receipts in zip(plan.lanes, results, strict=True)
            ),
            tuple(state.dispatched),
        )
        return _as_settled(state, outcome)

    def _open_plan_run(
        self,
        run: RunIdentity,
        kind: RunKind,
        deadline_s: float | None,
        planned_calls: int,
        *,
        resume: ResumePoint | None,
        started: asyncio.Future[None] | None,
        decisions: Mapping[CallPlace, ConfirmationDecision] | None,
        parallel_batch_id: str | None = None,
    ) -> RunState:
        """A plan's run state: dispatched calls numbered after the planned ones (or after
        every receipt a resumed run stored), the deciders' answers at the confirmation
        gate, and the calls a resumed run already settled counted for `requires`."""
        state = self.open_run(
            run,
            kind,
            deadline_s=deadline_s,
            first_seq=planned_calls if resume is None else resume.next_seq,
            parallel_batch_id=parallel_batch_id,
            started=started,
        )
        if decisions:
            state.decisions.update(decisions)
        for chain_done in () if resume is None else resume.done:
            self._pipeline.recall(state, chain_done)
        return state

    def open_run(
        self,
        run: RunIdentity,
        kind: RunKind = RunKind.ROUTER,
        *,
        deadline_s: float | None = None,
        first_seq: int = 0,
        parallel_batch_id: str | None = None,
        started: asyncio.Future[None] | None = None,
    ) -> RunState:
        """State for calls made one at a time with `run_call` (the router's way)."""
        self._check(run, run.owner)
        loop = asyncio.get_running_loop()
        deadline = None if deadline_s is None else loop.time() + deadline_s
        deadlines = self._deadlines
        if deadlines is None or deadlines.loop is not loop:
            deadlines = self._deadlines = Deadlines(loop)
        return RunState(
            run,
            kind,
            self._pipeline,
            deadline=deadline,
            next_seq=first_seq,
            parallel_batch_id=parallel_batch_id,
            deadlines=deadlines,
            started=started,
        )

    async def run_call(
        self,
        state: RunState,
        tool_id: str,
        args: Mapping[str, Any],
        *,
        call_key: str,
        item_key: str | None = None,
        checked_fingerprint: str | None = None,
        confirmed: ConfirmationDecision | None = None,
        seq: int | None = None,
    ) -> Receipt:
        """Run one call in an open run; returns once its receipt (and children's) is durable.

        Raises CallRejected when the run's owner may not call `tool_id`. Arguments
        that fail the input schema give a `failed` receipt (kind input_schema).
        `checked_fingerprint`: the caller (the router's proposal check) already
        validated `args` with the tool's input schema and fingerprinted them; the
        engine does not do either again.
        `confirmed`: the decision on this call, for a tool that requires a confirmation;
        without one (or one for other arguments) such a call raises CallRejected and
        nothing runs.
        `seq`: the call's place in the run, when the caller fixed it (a plan's call run
        alone, by a worker); by default the run's next.
        """
        reasons = self._pipeline.target_problems(state.identity.owner, tool_id)
        if reasons:
            raise CallRejected(tool_id, reasons)
        out: list[Receipt] = []
        tool = self._contract.tools[tool_id]
        if confirmed is not None:
            state.decisions[(item_key, call_key)] = confirmed
        if seq is None:
            seq = state.allocate_seq()
        try:
            await _settled(
                state,
                self._pipeline.execute(
                    state,
                    tool,
                    args,
                    seq,
                    call_key,
                    item_key,
                    out,
                    checked_fingerprint=checked_fingerprint,
                ),
            )
        except ConfirmationRequired as exc:
            raise CallRejected(tool_id, [str(exc) + " that was not given"]) from exc
        return out[0]

    async def record_denied(
        self,
        state: RunState,
        tool_id: str,
        args: Mapping[str, Any],
        *,
        call_key: str,
        reason: str,
        kind: ErrorKind = ErrorKind.GUARDRAIL,
    ) -> Receipt:
        """Record a call a guardrail (or a decider: kind confirmation) refused: a durable
        `denied` receipt and its audit event. The callable never runs.

        Raises CallRejected when the run's owner may not call `tool_id`.
        """
        reasons = self._pipeline.target_problems(state.identity.owner, tool_id)
        if reasons:
            raise CallRejected(tool_id, reasons)
        out: list[Receipt] = []
        tool = self._contract.tools[tool_id]
        self._pipeline.deny(state, tool, args, state.allocate_seq(), call_key, reason, out, kind)
        await state.flush()
        return out[0]

    def record_not_started(
        self, state: RunState, tool_id: str, args: Mapping[str, Any], *, call_key: str
    ) -> Receipt:
        """Record an admitted call the run's cancellation stopped before it started: a
        `skipped` receipt (error kind cancelled), submitted like any other; the run's
        flush makes it durable. The callable never runs."""
        out: list[Receipt] = []
        tool = self._contract.tools[tool_id]
        self._pipeline.skip(
            state, tool, args, state.allocate_seq(), call_key, None, CANCELLED_SKIP, out
        )
        return out[0]

    async def record_settled_elsewhere(
        self,
        state: RunState,
        calls: Sequence[tuple[int, str, str, Mapping[str, Any]]],
        item_key: str | None,
        *,
        error: CallError | None,
    ) -> list[Receipt]:
        """Durable receipts for a plan's calls run one at a time (by workers) that will
        not run: `calls` as (seq, call_key, tool id, args); `skipped` with `error`, or,
        when `error` is None, `failed` as calls whose worker was lost mid-call."""
        return await self.record_chains_settled_elsewhere(state, [(item_key, calls)], error=error)

    async def record_chains_settled_elsewhere(
        self,
        state: RunState,
        chains: Sequence[tuple[str | None, Sequence[tuple[int, str, str, Mapping[str, Any]]]]],
        *,
        error: CallError | None,
    ) -> list[Receipt]:
        """`record_settled_elsewhere` for the calls of several chains (item key, calls),
        durable together."""
        out: list[Receipt] = []
        tools = self._contract.tools
        for item_key, calls in chains:
            for seq, call_key, tool_id, args in calls:
                tool = tools[tool_id]
                if error is None:
                    self._pipeline.settle_lost(state, tool, args, seq, call_key, item_key, out)
                else:
                    self._pipeline.skip(state, tool, args, seq, call_key, item_key, error, out)
        await state.flush()
        return out

    def recall(self, state: RunState, settled: Sequence[SettledCall]) -> None:
        """Count, for `requires`, calls of the run settled before `state` was opened."""
        self._pipeline.recall(state, settled)

    async def drain(self) -> None:
        """Wait for pending evidence hooks."""
        await self._pipeline.drain()

    async def aclose(self) -> None:
        """Drain, then stop the worker threads. Close the receipt sink after this:
        pending evidence hooks and cache writes wait for its durability futures."""
        await self.drain()
        self._invoker.shutdown()

    def _check(self, run: RunIdentity, owner: str) -> None:
        if run.contract_hash != self._contract.hash:
            raise ValueError(
                f"the run was admitted against contract {run.contract_hash}, "
                f"but this engine runs {self._contract.hash}"
            )
        if run.owner != owner:
            raise ValueError(f"the run's owner {run.owner!r} differs from the plan's {owner!r}")
        if owner not in self._contract.owners:
            raise ValueError(f"unknown owner {owner!r}")


async def _settled(state: RunState, work: Awaitable[Any]) -> None:
    """Await `work`, then every receipt it submitted; on error or cancellation flush first."""
    await _ran(state, work)
    await state.flush()


async def _ran(state: RunState, work: Awaitable[Any]) -> None:
    """Await `work`; on error or cancellation, flush what it submitted, then raise."""
    try:
        await work
    except BaseException:
        with suppress(Exception):
            await state.flush()
        raise


def _as_settled(state: RunState, outcome: Outcome) -> Settled[Outcome]:
    """The outcome and the futures it waits on, taken from the run's state."""
    pending, state.pending = state.pending, []
    start = state.unconfirmed_start
    receipts = tuple(future for future in pending if future is not start)
    return Settled(outcome, receipts, start if start in pending else None)
