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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime
from time import perf_counter
from typing import Any

import orjson

from app.contract.compiled import Contract, Effect, Tool
from app.engine.admission import ToolGate, build_gates
from app.engine.audit import Auditor, error_detail
from app.engine.cache import ResultCache
from app.engine.call import Call, new_call
from app.engine.confirmation import ConfirmationRequired, gate
from app.engine.context import CURRENT_CALL
from app.engine.control_envelope import evaluate_control
from app.engine.errors import DispatchRejected
from app.engine.evidence import EvidenceHooks
from app.engine.failures import (
    BAD_ARGS,
    BAD_OUTPUT,
    DEADLINE_SKIP,
    NOT_JSON_OUTPUT,
    START_NOT_RECORDED,
    cancelled,
    deadline_stop,
    describe_problems,
    failure_status,
    fingerprint_or_blank,
    lost_runner,
    not_started_in_time,
    timed_out,
)
from app.engine.invocation import Invoker, when_thread_ends
from app.engine.json_output import JSON_CHECK_OPTIONS, json_problem
from app.engine.ports import (
    AuditEvent,
    AuditKind,
    Backpressure,
    CachedOutput,
    ReceiptSink,
    SharedLimits,
)
from app.engine.preflight import key_problem
from app.engine.receipt import CallError, ErrorKind, Receipt, SettledCall, Status
from app.engine.retry import backoff_delay, is_retryable
from app.engine.run import RunState
from app.engine.storable import NUL_ESCAPE, UNSTORABLE_OUTPUT, unstorable_problem
from app.engine.watchdog import Watchdog, WatchdogExpired
from app.foundation.canonical import fingerprint
from app.foundation.redaction import DEFAULT_REDACTOR, Redactor
from app.foundation.waiting import wait_all

_dumps = orjson.dumps
_wrap_future = asyncio.wrap_future

# Builds a NamedTuple (Receipt, AuditEvent) from a tuple of all its fields in
# order, skipping the generated `__new__`'s Python frame: three per call.
_new = tuple.__new__


# `Status.value` is a Python-level property; a dict lookup is a fifth of it.
_STATUS_TEXT = {status: status.value for status in Status}

# Enum members read once: in Python 3.11, `Status.SUCCEEDED` goes through the enum
# metaclass's attribute hooks, about fifteen times the cost of reading a global.
_SUCCEEDED = Status.SUCCEEDED
_FAILED = Status.FAILED
_SKIPPED = Status.SKIPPED
# Receipts of calls that never started: not counted against a tool's `max_per_run`.
_NEVER_RAN = frozenset((Status.DENIED, Status.SKIPPED))
_CALL_STARTED = AuditKind.CALL_STARTED
_CALL_FINISHED = AuditKind.CALL_FINISHED
_OUTPUT_SCHEMA = ErrorKind.OUTPUT_SCHEMA
_CancelledError = asyncio.CancelledError

# 1.5 * 2**52: a sum this large has no fractional bits, so IEEE arithmetic rounds
# x + _ROUNDER to an integer, half to even, exactly, for |x| < 2**51.
_ROUNDER = 6755399441055744.0

_set_current = CURRENT_CALL.set
_reset_current = CURRENT_CALL.reset


class _ToolSpec:
    """What running one tool needs, looked up once when the engine is built."""

    __slots__ = (
        "args_valid",
        "before_start",
        "cached",
        "capped",
        "confirm",
        "function",
        "gate",
        "gated",
        "has_effects",
        "is_async",
        "output_valid",
        "redactor",
        "release",
        "required",
        "take_slot",
    )

    def __init__(
        self,
        tool: Tool,
        gate: ToolGate | None,
        *,
        cached: bool,
        backpressure: bool,
        required: bool,
    ) -> None:
        self.gate = gate
        # The gate's uncontended take, raising IndexError when it must wait, and its
        # release (`ToolGate.take_now`, `ToolGate.give`).
        self.take_slot: Callable[[], object] | None = None
        self.release: Callable[[], None] | None = None
        if gate is not None:
            self.take_slot = gate.take_now
            self.release = gate.give
        self.redactor = Redactor(tool.redact) if tool.redact else DEFAULT_REDACTOR
        self.args_valid = tool.input_schema.is_valid
        self.output_valid = tool.output_schema.is_valid
        # Runs only once a decider approved the exact call (`app.engine.confirmation`).
        self.confirm = tool.requires_confirmation
        self.function = tool.target.function
        self.is_async = tool.target.is_async
        # Waits for its run's start to be durable before it starts (`RunState`).
        self.has_effects = tool.effect is not Effect.READ
        # Looked up in the cache before it runs.
        self.cached = tool.cacheable and cached
        # Its `requires` is checked before it starts; its calls are counted when capped.
        self.gated = tool.requires is not None
        self.capped = tool.requires is not None and tool.requires.max_per_run is not None
        # Something to do before the call starts whatever the run: its `requires`,
        # its confirmation, a cache lookup or waiting for room (`_before_start`).
        self.before_start = self.gated or self.confirm or self.cached or backpressure
        # Another tool's `requires.after` names it: its successes are recorded.
        self.required = required


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
        shared_limits: SharedLimits | None = None,
    ) -> None:
        """`shared_limits`: the tools' admission limits are held with the other
        processes sharing it; without, in this process alone."""
        self.contract = contract
        self._backpressure = backpressure
        self._invoker = invoker
        self._receipts = receipts
        self._submit = receipts.submit
        self._auditor = auditor
        self._cache = cache
        self._evidence = evidence
        self._has_evidence = bool(evidence)
        self._emit = auditor.emit
        self._clock = clock
        self._rng = rng
        gates = build_gates(contract.tools, shared_limits)
        required = {
            needed
            for tool in contract.tools.values()
            if tool.requires is not None
            for needed in tool.requires.after
        }
        self._specs = {
            tool_id: _ToolSpec(
                tool,
                gates.get(tool_id),
                cached=cache is not None,
                backpressure=backpressure is not None,
                required=tool_id in required,
            )
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
        *,
        checked_fingerprint: str | None = None,
    ) -> Receipt:
        """Run one call; its receipt is appended to `out`, even when cancelled.

        `checked_fingerprint`: the caller already checked `args` against the tool's
        input schema (the same compiled validator) and this is their fingerprint.

        One coroutine frame for the whole call, attempts included: this runs once
        per call, and what only rare paths need (the checks and waits before the
        start, retries, failures, results to look at twice) is in helpers, entered
        only when needed. Its locals are kept few: with seven more, the coroutine would
        outgrow CPython's small-object allocator (512 bytes) and cost a malloc.
        """
        spec = self._specs[tool.id]
        call = new_call(
            state, tool, args, seq, call_key, item_key, parent_receipt_id, self._clock()
        )
        if checked_fingerprint is None and not spec.args_valid(args):
            return self._reject_args(call, out)
        call.fingerprint = (
            fingerprint(tool.id, args) if checked_fingerprint is None else checked_fingerprint
        )
        deadline = state.deadline
        output: Any  # bound by the attempt that succeeds
        try:
            # What may settle or hold the call before it starts, in `_before_start`,
            # entered only when one of them applies.
            if (
                spec.before_start
                or (deadline is not None and state.loop.time() >= deadline)
                or (
                    state.unconfirmed_start is not None
                    and (spec.has_effects or state.unconfirmed_start.done())
                )
            ) and (settled := await self._before_start(call, spec, out)) is not None:
                return settled
            self._emit(
                _new(
                    AuditEvent,
                    (
                        _CALL_STARTED,
                        call.started_at,
                        state.identity.run_id,
                        state.identity.caller,
                        tool.id,
                        call_key,
                        item_key,
                        {
                            "receipt_id": call.receipt_id,
                            "seq": seq,
                            "parent_receipt_id": parent_receipt_id,
                        },
                    ),
                )
            )
            while True:
                if spec.take_slot is not None:
                    try:
                        spec.take_slot()
                    except IndexError:
                        if not await self._admit(call, spec.gate):
                            return self._settle(call, out, *deadline_stop(call))
                # A sync attempt's thread work: its slot is held until the thread ends.
                work: Future[Any] | None = None
                try:
                    timeout_s = (
                        tool.timeout_s
                        if deadline is None
                        else min(tool.timeout_s, deadline - state.loop.time())
                    )
                    if timeout_s <= 0.0:
                        return self._settle(call, out, *deadline_stop(call))
                    attempt = call.attempts = call.attempts + 1
                    call.running_attempt = attempt
                    token = _set_current((call, attempt))
                    watchdog: Watchdog | None = None
                    try:
                        # The callable starts inside the watchdog: what it raises at once
                        # is its failure, like what it raises later. The watchdog is
                        # disarmed here or in `_attempt_failed`, not by `with` (a
                        # `with` block costs as much as all the rest of the watchdog).
                        watchdog = state.deadlines.arm(state.deadlines.now() + timeout_s)
                        work = None if spec.is_async else self._invoker.submit(tool.target, args)
                        output = await (
                            spec.function(**args) if work is None else _wrap_future(work)
                        )
                        watchdog.disarm(False)
                        break  # succeeded: on to the output checks
                    except BaseException as exc:
                        # Raises again what must propagate. A thread's work cancels here
                        # only while still queued: it never started. (Inline, not a
                        # local: the coroutine's size, above.)
                        error = self._attempt_failed(
                            call, exc, timeout_s, watchdog, work is None or not work.cancel()
                        )
                    finally:
                        _reset_current(token)
                        call.running_attempt = 0
                finally:
                    if spec.release is not None:
                        if work is None or work.done():
                            spec.release()
                        else:
                            # A sync callable runs on after its timeout: the slot counts it.
                            when_thread_ends(work, spec.release)
                if not await self._retried(call, error):
                    return self._settle(call, out, failure_status(error), None, error)
        except _CancelledError:
            self._settle(call, out, *cancelled(call))
            raise
        # The result must be JSON, storable and valid: `_settle_output` checks each in
        # turn; written here first, most results need none of it.
        try:
            written: bytes | None = _dumps(output, option=JSON_CHECK_OPTIONS)
        except TypeError:
            written = None
        if (
            written is None
            or written.partition(b"null")[1]
            or written.partition(NUL_ESCAPE)[1]
            or not spec.output_valid(output)
            or tool.control_envelope is not None
        ):
            return self._settle_output(call, out, output, written)
        return self._settle(call, out, _SUCCEEDED, output, None)

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
        call = new_call(state, tool, args, seq, call_key, item_key, None, self._clock())
        call.fingerprint = fingerprint_or_blank(tool.id, args)
        return self._settle(call, out, Status.SKIPPED, None, error)

    def settle_lost(
        self,
        state: RunState,
        tool: Tool,
        args: Mapping[str, Any],
        seq: int,
        call_key: str,
        item_key: str | None,
        out: list[Receipt],
    ) -> Receipt:
        """Settle a call whose runner (a remote worker) was lost and that will not run
        again: `failed` (kind interrupted), its outcome unknown unless the tool only reads."""
        call = new_call(state, tool, args, seq, call_key, item_key, None, self._clock())
        call.fingerprint = fingerprint_or_blank(tool.id, args)
        return self._settle(call, out, Status.FAILED, None, lost_runner(tool))

    def recall(self, state: RunState, receipts: Sequence[SettledCall]) -> None:
        """Count, for `requires`, calls an earlier stretch of the run settled (the
        completed calls a resumed run reports again), as if they settled here; a
        denied or skipped call never ran and takes no run of its tool."""
        requirements = state.requirements
        for receipt in receipts:
            spec = self._specs.get(receipt.tool)
            if spec is None:
                continue
            if spec.capped and receipt.status not in _NEVER_RAN:
                requirements.record_call(receipt.tool)
            if spec.required and receipt.status == _SUCCEEDED:
                requirements.record_success(receipt.item_key, receipt.tool)

    def deny(
        self,
        state: RunState,
        tool: Tool,
        args: Mapping[str, Any],
        seq: int,
        call_key: str,
        reason: str,
        out: list[Receipt],
        kind: ErrorKind = ErrorKind.GUARDRAIL,
    ) -> Receipt:
        """Settle a call a guardrail (or a decider) refused: a `denied` receipt, audited;
        nothing runs."""
        call = new_call(state, tool, args, seq, call_key, None, None, self._clock())
        call.fingerprint = fingerprint_or_blank(tool.id, args)
        return self._settle(call, out, Status.DENIED, None, CallError(kind, reason))

    async def dispatch(
        self, parent: Call, tool_id: str, args: Mapping[str, Any], call_key: str
    ) -> Receipt:
        """A call made by a running callable through its execution context."""
        state = parent.state
        reasons = self.target_problems(state.identity.owner, tool_id)
        tool = self.contract.tools.get(tool_id)
        if tool is not None and not reasons and not tool.input_schema.is_valid(args):
            reasons = [describe_problems(BAD_ARGS, tool.input_schema, args)]
        if tool is not None and not reasons and tool.requires is not None:
            reasons = state.requirements.unmet(tool, parent.item_key, self.contract.tools)
        malformed_key = key_problem("call_key", call_key)
        if malformed_key is not None:
            reasons = [*reasons, malformed_key]
        if tool is None or reasons:
            self._auditor.call_event(
                AuditKind.DISPATCH_REJECTED,
                self._clock(),
                state,
                tool_id,
                parent.call_key,
                parent.item_key,
                {"parent_receipt_id": parent.receipt_id, "reasons": list(reasons)},
            )
            raise DispatchRejected(tool_id, reasons)
        try:
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
        except ConfirmationRequired as exc:
            # The parent is running: its dispatch cannot wait for a person.
            reason = (
                f"tool {tool_id!r} requires a confirmation, which a call dispatched "
                "by a running tool cannot wait for"
            )
            self._auditor.call_event(
                AuditKind.DISPATCH_REJECTED,
                self._clock(),
                state,
                tool_id,
                parent.call_key,
                parent.item_key,
                {"parent_receipt_id": parent.receipt_id, "reasons": [reason]},
            )
            raise DispatchRejected(tool_id, [reason]) from exc

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
            # Not await: cancelling this call must not cancel the shared future.
            await wait_all((room,))
        finally:
            call.wait_ms += (perf_counter() - waited_from) * 1000.0

    def _unmet_requirements(self, call: Call) -> CallError | None:
        """Why the call may not start (its tool's `requires`), or None."""
        reasons = call.state.requirements.unmet(call.tool, call.item_key, self.contract.tools)
        if reasons:
            return CallError(ErrorKind.REQUIRES, "not started: " + "; ".join(reasons))
        return None

    def _refused(self, call: Call, out: list[Receipt]) -> bool:
        """The confirmation gate: raises ConfirmationRequired without a decision for the
        call; True once a rejection settled it `denied`; False when approved."""
        decision = gate(
            call.state.decisions,
            seq=call.seq,
            call_key=call.call_key,
            item_key=call.item_key,
            tool=call.tool.id,
            args=call.args,
        )
        if decision.approve:
            return False
        reason = decision.reason or "no reason given"
        refused = CallError(ErrorKind.CONFIRMATION, f"confirmation rejected: {reason}")
        self._settle(call, out, Status.DENIED, None, refused)
        return True

    def _reject_args(self, call: Call, out: list[Receipt]) -> Receipt:
        schema = call.tool.input_schema
        call.fingerprint = fingerprint_or_blank(call.tool.id, call.args)
        invalid = CallError(ErrorKind.INPUT_SCHEMA, describe_problems(BAD_ARGS, schema, call.args))
        return self._settle(call, out, Status.FAILED, None, invalid)

    async def _before_start(
        self, call: Call, spec: _ToolSpec, out: list[Receipt]
    ) -> Receipt | None:
        """What may settle or hold a call before it starts, in this order: its tool's
        `requires`, the confirmation gate (raising ConfirmationRequired without a
        decision), the run's deadline, the run's start record, room in the writer's
        backlog, the cache. The call's receipt when one of them settled it."""
        state = call.state
        if spec.gated:
            error = self._unmet_requirements(call)
            if error is not None:
                return self._settle(call, out, _SKIPPED, None, error)
        if spec.confirm and self._refused(call, out):
            return out[-1]
        if spec.capped:
            # Counted once the gate let it through (a denied call never runs), with no
            # await since the check: concurrent lanes cannot both take a last slot.
            state.requirements.record_call(call.tool.id)
        deadline = state.deadline
        if deadline is not None and state.loop.time() >= deadline:
            return self._settle(call, out, _SKIPPED, None, DEADLINE_SKIP)
        started = state.unconfirmed_start
        if (
            started is not None
            and (spec.has_effects or started.done())
            and not await state.start_recorded()
        ):
            return self._settle(call, out, _SKIPPED, None, START_NOT_RECORDED)
        backpressure = self._backpressure
        if backpressure is not None and (room := backpressure.room()) is not None:
            await self._wait_for_room(call, room)
        if spec.cached and self._cache is not None:
            hit = await self._cache.lookup(call.tool, call.fingerprint)
            if hit is not None:
                return self._settle_hit(call, out, hit)
        return None

    async def _admit(self, call: Call, gate: ToolGate | None) -> bool:
        """Wait for the tool's admission gate; False when the run's deadline passed first."""
        if gate is None:  # never: only a tool with a gate has `admit_now`
            return True
        waited_from = perf_counter()
        try:
            return await gate.acquire(call.state.deadline)
        finally:
            call.wait_ms += (perf_counter() - waited_from) * 1000.0

    def _attempt_failed(
        self,
        call: Call,
        exc: BaseException,
        timeout_s: float,
        watchdog: Watchdog | None,
        started: bool = True,
    ) -> CallError:
        """What an attempt's exception means for the call, once its watchdog (None:
        not armed) is disarmed and the attempt's dispatches ended; raises `exc` again
        when it must propagate (the run itself is being cancelled). `started`: False
        for a sync callable still waiting for a worker thread (it never ran)."""
        if call.threaded:
            call.end_attempt()
        tool = call.tool
        expired = watchdog is not None and watchdog.disarm(type(exc) is _CancelledError)
        if expired or isinstance(exc, WatchdogExpired):
            by_deadline = timeout_s < tool.timeout_s
            self._audit(
                AuditKind.CALL_TIMED_OUT,
                self._clock(),
                call,
                {
                    "attempt": call.attempts,
                    "timeout_s": timeout_s,
                    "limit": "deadline" if by_deadline else "tool",
                    "started": started,
                },
            )
            if not started:
                return not_started_in_time(tool, timeout_s, by_deadline)
            return timed_out(tool, timeout_s, by_deadline)
        if isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                if started:
                    call.interrupted = True
                else:
                    # Never began: the call reads as not started (or stopped between attempts).
                    call.attempts -= 1
                raise exc
            return CallError(ErrorKind.EXCEPTION, "CancelledError raised by the callable")
        # A callable's SystemExit or KeyboardInterrupt is its own failure too.
        return CallError(ErrorKind.EXCEPTION, f"{type(exc).__name__}: {exc}")

    async def _retried(self, call: Call, error: CallError) -> bool:
        """Whether the call gets another attempt after `error`; True once the backoff
        delay (audited) has passed."""
        call.last_error = error
        tool = call.tool
        if call.attempts >= tool.retry.max_attempts or not is_retryable(error, tool.effect):
            return False
        delay = backoff_delay(tool.retry, call.attempts, self._rng)
        deadline = call.state.deadline
        if deadline is not None and call.state.loop.time() + delay >= deadline:
            return False
        self._audit(
            AuditKind.CALL_RETRIED,
            self._clock(),
            call,
            {
                "next_attempt": call.attempts + 1,
                "delay_s": delay,
                "error": error_detail(error, self._call_redactor(call)),
            },
        )
        if delay > 0.0:
            await asyncio.sleep(delay)
        return True

    def _settle_output(
        self, call: Call, out: list[Receipt], output: Any, written: bytes | None
    ) -> Receipt:
        """Settle a call whose callable returned `output` (`written`: orjson's text of
        it, None when orjson refused it), checking it in turn: a JSON value, storable,
        valid against the output schema; then its control envelope, if any."""
        tool = call.tool
        # `json_problem`'s first step is the writing already done.
        if (written is None or written.partition(b"null")[1]) and (
            not_json := json_problem(output)
        ) is not None:
            error = CallError(_OUTPUT_SCHEMA, f"{NOT_JSON_OUTPUT}: {not_json}")
            return self._settle(call, out, _FAILED, None, error)
        # JSON, but not storable: failed here, so that no row ever holds it.
        if (written is None or written.partition(NUL_ESCAPE)[1]) and (
            unstorable := unstorable_problem(output)
        ) is not None:
            error = CallError(_OUTPUT_SCHEMA, f"{UNSTORABLE_OUTPUT}: {unstorable}")
            return self._settle(call, out, _FAILED, None, error)
        if not tool.output_schema.is_valid(output):
            error = CallError(
                _OUTPUT_SCHEMA, describe_problems(BAD_OUTPUT, tool.output_schema, output)
            )
            return self._settle(call, out, _FAILED, None, error)
        envelope = tool.control_envelope
        control = None if envelope is None else evaluate_control(envelope, output).to_dict()
        return self._settle(call, out, _SUCCEEDED, output, None, control)

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
        tool_id = tool.id
        state = call.state
        identity = state.identity
        run_id = identity.run_id
        # Read once each: they go to the receipt and to the audit event.
        receipt_id = call.receipt_id
        seq = call.seq
        call_key = call.call_key
        item_key = call.item_key
        parent_receipt_id = call.parent_receipt_id
        attempts = call.attempts
        finished_at = self._clock()
        # The attempt's dispatches still running end with the call (a failed attempt's
        # ended in `_attempt_failed`).
        if call.threaded:
            call.end_attempt()
        spec = self._specs[tool_id]
        if status is _SUCCEEDED and spec.required:
            state.requirements.record_success(item_key, tool_id)
        # Milliseconds to 3 decimals: microseconds rounded to an integer (half to
        # even), then divided. Adding and taking away _ROUNDER rounds a float to an
        # integer exactly as round() does (below 2**51 µs), a tenth of its cost;
        # round(x, 3) on a float goes through a decimal conversion, thirty times.
        duration_ms = ((perf_counter() - call.t0) * 1e6 + _ROUNDER - _ROUNDER) / 1000.0
        redactor = self._specs[tool_id].redactor
        if redactor is not DEFAULT_REDACTOR:  # the tool declares `redact`
            redactor = redactor.for_arguments(call.args)
        # Positional, in field order: this runs once per call.
        receipt = _new(
            Receipt,
            (
                receipt_id,
                run_id,
                seq,
                identity.owner,
                tool_id,
                call_key,
                item_key,
                state.parallel_batch_id,
                status,
                output,
                error,
                attempts,
                cache_source is not None,
                cache_source,
                call.fingerprint,
                tool.definition_hash,
                f"{run_id}:{seq}",
                parent_receipt_id,
                control,
                round(call.wait_ms * 1000.0) / 1000.0 if call.wait_ms else 0.0,
                call.started_at,
                finished_at,
                duration_ms,
                redactor,
            ),
        )
        out.append(receipt)
        if status is not _SKIPPED and cache_source is None:
            self._emit(
                _new(
                    AuditEvent,
                    (
                        _CALL_FINISHED,
                        finished_at,
                        run_id,
                        identity.caller,
                        tool_id,
                        call_key,
                        item_key,
                        {
                            "receipt_id": receipt_id,
                            "seq": seq,
                            "parent_receipt_id": parent_receipt_id,
                            "status": _STATUS_TEXT[status],
                            "attempts": attempts,
                            "duration_ms": duration_ms,
                            "error": None if error is None else error_detail(error, redactor),
                        },
                    ),
                )
            )
        cache = self._cache
        if (
            cache is None
            or cache_source is not None
            or status is not _SUCCEEDED
            or not tool.cacheable
        ):
            durable = self._submit(receipt, None)
        else:
            entry = cache.entry_for(tool, receipt)
            durable = self._submit(receipt, entry)
            if entry is not None:
                cache.remember_when_durable(entry, durable)
        pending = state.pending
        if not pending or pending[-1] is not durable:  # a sink may share one future per batch
            pending.append(durable)
        if self._has_evidence:
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
        # Not await: cancelling this task must not cancel the sink's future.
        await wait_all((durable,))
        if durable.cancelled() or durable.exception() is not None:
            return  # not durable: the run's flush reports the write failure
        await self._evidence.deliver(state, receipt)

    def _call_redactor(self, call: Call) -> Redactor:
        """The redactor of `call`'s tool, for its arguments (`Receipt.redactor`)."""
        return self._specs[call.tool.id].redactor.for_arguments(call.args)

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
        self._emit(
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
