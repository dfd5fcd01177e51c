"""One call, end to end, always ending in exactly one receipt.

    input schema gate -> (cache) -> admission -> watchdog -> invoke -> output schema gate
    -> receipt (audited, submitted to the sink; cache write and evidence hooks
       run once the sink reports it durable)

Admission, watchdog and invocation repeat per attempt under the tool's retry
policy. Nothing here raises for a failing call; only cancellation propagates,
after the cancelled call's receipt is submitted.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from datetime import datetime
from time import perf_counter
from typing import Any

from app.contract.canonical import fingerprint
from app.contract.compiled import Contract, Tool
from app.engine.admission import build_gates
from app.engine.audit import Auditor, error_detail
from app.engine.cache import ResultCache
from app.engine.call import Call
from app.engine.context import ExecutionContext, enter_call, leave_call
from app.engine.control import evaluate_control
from app.engine.errors import DispatchRejected
from app.engine.evidence import EvidenceHooks
from app.engine.failures import (
    BAD_ARGS,
    BAD_OUTPUT,
    DEADLINE_SKIP,
    NOT_JSON_OUTPUT,
    Outcome,
    cancelled,
    deadline_stop,
    describe_problems,
    failure_status,
    fingerprint_or_blank,
    timed_out,
)
from app.engine.invocation import Invoker
from app.engine.json_output import json_problem
from app.engine.ports import AuditEvent, AuditKind, Backpressure, CachedOutput, ReceiptSink
from app.engine.receipt import CallError, ErrorKind, Receipt, Status
from app.engine.redaction import DEFAULT_REDACTOR, Redactor, redact_text
from app.engine.retry import backoff_delay, is_retryable
from app.engine.run import RunState
from app.engine.watchdog import WatchdogExpired, effective_timeout


class CallPipeline:
    def __init__(
        self,
        contract: Contract,
        *,
        invoker: Invoker,
        receipts: ReceiptSink,
        auditor: Auditor,
        cache: ResultCache | None,
        evidence: EvidenceHooks,
        clock: Callable[[], datetime],
        rng: random.Random,
        backpressure: Backpressure | None = None,
    ) -> None:
        self.contract = contract
        self._backpressure = backpressure
        self._invoker = invoker
        self._receipts = receipts
        self._auditor = auditor
        self._cache = cache
        self._evidence = evidence
        self._clock = clock
        self._rng = rng
        self._gates = build_gates(contract.tools)
        self._redactors = {
            tool_id: Redactor(tool.redact) if tool.redact else DEFAULT_REDACTOR
            for tool_id, tool in contract.tools.items()
        }
        self._background: set[asyncio.Task[None]] = set()

    async def execute(
        self,
        state: RunState,
        tool: Tool,
        args: Mapping[str, Any],
        seq: int,
        call_key: str,
        item_key: str | None,
        out: list[Receipt],
        parent_receipt_id: str | None = None,
    ) -> Receipt:
        """Run one call; its receipt is appended to `out`, even when cancelled."""
        call = Call(state, tool, args, seq, call_key, item_key, parent_receipt_id, self._clock())
        if not tool.input_schema.is_valid(args):
            call.fingerprint = fingerprint_or_blank(tool.id, args)
            found = describe_problems(BAD_ARGS, tool.input_schema, args)
            invalid = CallError(ErrorKind.INPUT_SCHEMA, found)
            return self._settle(call, out, Status.FAILED, None, invalid)
        call.fingerprint = fingerprint(tool.id, args)
        deadline = state.deadline
        if deadline is not None and state.loop.time() >= deadline:
            return self._settle(call, out, Status.SKIPPED, None, DEADLINE_SKIP)
        try:
            backpressure = self._backpressure
            if backpressure is not None and (room := backpressure.room()) is not None:
                await self._wait_for_room(call, room)
            if tool.cacheable and self._cache is not None:
                hit = await self._cache.lookup(tool, call.fingerprint)
                if hit is not None:
                    return self._settle_hit(call, out, hit)
            self._audit(AuditKind.CALL_STARTED, call.started_at, call, None)
            status, output, error = await self._attempts(call)
        except asyncio.CancelledError:
            self._settle(call, out, *cancelled(call))
            raise
        control = None
        if status is Status.SUCCEEDED:
            if (not_json := json_problem(output)) is not None:
                status, output = Status.FAILED, None
                error = CallError(ErrorKind.OUTPUT_SCHEMA, f"{NOT_JSON_OUTPUT}: {not_json}")
            elif not tool.output_schema.is_valid(output):
                found = describe_problems(BAD_OUTPUT, tool.output_schema, output)
                status, output = Status.FAILED, None
                error = CallError(ErrorKind.OUTPUT_SCHEMA, found)
            elif tool.control_envelope is not None:
                control = evaluate_control(tool.control_envelope, output).to_dict()
        return self._settle(call, out, status, output, error, control)

    def skip(
        self,
        state: RunState,
        tool: Tool,
        args: Mapping[str, Any],
        seq: int,
        call_key: str,
        item_key: str | None,
        error: CallError,
        out: list[Receipt],
    ) -> Receipt:
        """Settle a call that will not run."""
        call = Call(state, tool, args, seq, call_key, item_key, None, self._clock())
        call.fingerprint = fingerprint_or_blank(tool.id, args)
        return self._settle(call, out, Status.SKIPPED, None, error)

    def deny(
        self,
        state: RunState,
        tool: Tool,
        args: Mapping[str, Any],
        seq: int,
        call_key: str,
        reason: str,
        out: list[Receipt],
    ) -> Receipt:
        """Settle a call a guardrail refused: a `denied` receipt, audited; nothing runs."""
        call = Call(state, tool, args, seq, call_key, None, None, self._clock())
        call.fingerprint = fingerprint_or_blank(tool.id, args)
        return self._settle(call, out, Status.DENIED, None, CallError(ErrorKind.GUARDRAIL, reason))

    async def dispatch(
        self, parent: Call, tool_id: str, args: Mapping[str, Any], call_key: str
    ) -> Receipt:
        """A call made by a running callable through its execution context."""
        state = parent.state
        reasons = self.target_problems(state.identity.owner, tool_id)
        tool = self.contract.tools.get(tool_id)
        if tool is not None and not reasons and not tool.input_schema.is_valid(args):
            reasons = [describe_problems(BAD_ARGS, tool.input_schema, args)]
        if tool is None or reasons:
            self._auditor.call_event(
                AuditKind.DISPATCH_REJECTED,
                self._clock(),
                state,
                tool_id,
                parent.call_key,
                parent.item_key,
                {
                    "parent_receipt_id": parent.receipt_id,
                    "reasons": [redact_text(reason) for reason in reasons],
                },
            )
            raise DispatchRejected(tool_id, reasons)
        return await self.execute(
            state,
            tool,
            dict(args),
            state.allocate_seq(),
            call_key,
            parent.item_key,
            state.dispatched,
            parent.receipt_id,
        )

    def target_problems(self, owner_name: str, tool_id: str) -> list[str]:
        """Why the run's owner may not call `tool_id` (empty when it may)."""
        tool = self.contract.tools.get(tool_id)
        if tool is None:
            return [f"unknown tool {tool_id!r}"]
        if tool.owner != owner_name:
            return [f"tool {tool_id!r} belongs to owner {tool.owner!r}, not {owner_name!r}"]
        owner = self.contract.owners.get(owner_name)
        if owner is None or tool_id not in owner.runner_defaults.allowed_tools:
            return [f"tool {tool_id!r} is not in the allowed_tools of {owner_name!r}"]
        return []

    async def drain(self) -> None:
        """Wait for every pending evidence delivery."""
        while self._background:
            await asyncio.wait(tuple(self._background))

    async def _wait_for_room(self, call: Call, room: asyncio.Future[None]) -> None:
        """Hold the call until the receipt writer's backlog is back under its bound."""
        waited_from = perf_counter()
        try:
            # wait(), not await: cancelling this call must not cancel the shared future.
            await asyncio.wait((room,))
        finally:
            call.wait_ms += (perf_counter() - waited_from) * 1000.0

    async def _attempts(self, call: Call) -> Outcome:
        tool = call.tool
        gate = self._gates.get(tool.id)
        deadline = call.state.deadline
        loop = call.state.loop
        while True:
            if gate is not None and not gate.try_acquire():
                waited_from = perf_counter()
                try:
                    admitted = await gate.acquire(deadline)
                finally:
                    call.wait_ms += (perf_counter() - waited_from) * 1000.0
                if not admitted:
                    return deadline_stop(call)
            try:
                timeout_s = effective_timeout(tool.timeout_s, deadline, loop.time())
                if timeout_s <= 0.0:
                    return deadline_stop(call)
                ok, value = await self._invoke(call, timeout_s)
            finally:
                if gate is not None:
                    gate.release()
            if ok:
                return Status.SUCCEEDED, value, None
            error: CallError = value
            call.last_error = error
            status = failure_status(error)
            if call.attempts >= tool.retry.max_attempts or not is_retryable(error, tool.effect):
                return status, None, error
            delay = backoff_delay(tool.retry, call.attempts, self._rng)
            if deadline is not None and loop.time() + delay >= deadline:
                return status, None, error
            self._audit(
                AuditKind.CALL_RETRIED,
                self._clock(),
                call,
                {
                    "next_attempt": call.attempts + 1,
                    "delay_s": delay,
                    "error": error_detail(error),
                },
            )
            if delay > 0.0:
                await asyncio.sleep(delay)

    async def _invoke(self, call: Call, timeout_s: float) -> tuple[bool, Any]:
        """One attempt under the watchdog: (True, output) or (False, CallError)."""
        tool = call.tool
        loop = call.state.loop
        token = enter_call(ExecutionContext(call, call.begin_attempt()))
        try:
            with call.state.deadlines.arm(loop.time() + timeout_s):
                output = await self._invoker.start(tool.target, call.args)
            return True, output
        except WatchdogExpired:
            by_deadline = timeout_s < tool.timeout_s
            self._audit(
                AuditKind.CALL_TIMED_OUT,
                self._clock(),
                call,
                {
                    "attempt": call.attempts,
                    "timeout_s": timeout_s,
                    "limit": "deadline" if by_deadline else "tool",
                },
            )
            return False, timed_out(tool, timeout_s, by_deadline)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                call.interrupted = True
                raise
            return False, CallError(ErrorKind.EXCEPTION, "CancelledError raised by the callable")
        except BaseException as exc:  # a callable's SystemExit or KeyboardInterrupt is its failure
            return False, CallError(ErrorKind.EXCEPTION, f"{type(exc).__name__}: {exc}")
        finally:
            leave_call(token)
            call.end_attempt()

    def _settle_hit(self, call: Call, out: list[Receipt], hit: CachedOutput) -> Receipt:
        envelope = call.tool.control_envelope
        control = None if envelope is None else evaluate_control(envelope, hit.output).to_dict()
        self._audit(
            AuditKind.CALL_CACHE_HIT,
            call.started_at,
            call,
            {"source_receipt_id": hit.source_receipt_id, "fingerprint": hit.fingerprint},
        )
        return self._settle(
            call, out, Status.SUCCEEDED, hit.output, None, control, hit.source_receipt_id
        )

    def _settle(
        self,
        call: Call,
        out: list[Receipt],
        status: Status,
        output: Any,
        error: CallError | None,
        control: Mapping[str, Any] | None = None,
        cache_source: str | None = None,
    ) -> Receipt:
        tool = call.tool
        state = call.state
        identity = state.identity
        # Positional, in field order: this runs once per call.
        receipt = Receipt(
            call.receipt_id,
            identity.run_id,
            call.seq,
            identity.owner,
            tool.id,
            call.call_key,
            call.item_key,
            state.parallel_batch_id,
            status,
            output,
            error,
            call.attempts,
            cache_source is not None,
            cache_source,
            call.fingerprint,
            tool.definition_hash,
            call.idempotency_key,
            call.parent_receipt_id,
            control,
            round(call.wait_ms, 3),
            call.started_at,
            self._clock(),
            round((perf_counter() - call.t0) * 1000.0, 3),
            self._redactors[tool.id],
        )
        out.append(receipt)
        if status is not Status.SKIPPED and cache_source is None:
            self._audit(
                AuditKind.CALL_FINISHED,
                receipt.finished_at,
                call,
                {
                    "status": status.value,
                    "attempts": call.attempts,
                    "duration_ms": receipt.duration_ms,
                    "error": error_detail(error),
                },
            )
        entry = None
        cache = self._cache
        if tool.cacheable and cache is not None and cache_source is None and receipt.succeeded:
            entry = cache.entry_for(tool, receipt)
        durable = self._receipts.submit(receipt, entry)
        if entry is not None and cache is not None:
            cache.remember_when_durable(entry, durable)
        pending = state.pending
        if not pending or pending[-1] is not durable:  # a sink may share one future per batch
            pending.append(durable)
        if self._evidence:
            task = asyncio.create_task(self._after_commit(state, durable, receipt))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return receipt

    async def _after_commit(
        self,
        state: RunState,
        durable: asyncio.Future[None],
        receipt: Receipt,
    ) -> None:
        # wait(), not await: cancelling this task must not cancel the sink's future.
        await asyncio.wait((durable,))
        if durable.cancelled() or durable.exception() is not None:
            return  # not durable: the run's flush reports the write failure
        await self._evidence.deliver(state, receipt)

    def _audit(
        self, kind: AuditKind, at: datetime, call: Call, detail: dict[str, Any] | None
    ) -> None:
        full: dict[str, Any] = {
            "receipt_id": call.receipt_id,
            "seq": call.seq,
            "parent_receipt_id": call.parent_receipt_id,
        }
        if detail:
            full.update(detail)
        identity = call.state.identity
        self._auditor.emit(
            AuditEvent(
                kind,
                at,
                identity.run_id,
                identity.caller,
                call.tool.id,
                call.call_key,
                call.item_key,
                full,
            )
        )
