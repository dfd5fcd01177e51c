"""The router loop: deterministic steps first, then the model, fail closed.

    1. run the request's deterministic steps through the engine;
    2. build the prompt from the prompt files, the goal and context, the visible
       tools, the observations so far and the budgets left;
    3. ask the router model, with native tool calling;
    4. check every proposed call (`decision_contract.py`), run the guardrails in order
       (first deny wins), pause where a tool requires confirmation, and run the
       admitted calls through the engine as one bounded parallel batch;
    5. a reply without tool calls ends the turns: the final profile writes the
       answer from the goal and the observations only (`closeout.py`);
    6. the completion gate judges the accumulated receipts; a failure re-prompts
       the router model with the reason, up to `max_attempts`.

Every bound is checked before it is spent and every stop names itself; a stop
never fabricates an answer. The router decides and the engine executes: no
tool runs anywhere but in `Engine.run_call`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import uuid4

from app.contract.compiled import Tool
from app.engine.confirmation import ConfirmationDecision
from app.engine.receipt import ErrorKind
from app.engine.run import RunIdentity
from app.foundation.canonical import fingerprint
from app.foundation.redaction import DEFAULT_REDACTOR
from app.llm.messages import Message, ModelReply, ToolCall, WireCache
from app.observability.router import record_shadow_verdict
from app.router import assembly, closeout, transcript
from app.router.calls import MAX_SHOWN_ARGS, Admitted, deny, execute, shown_args
from app.router.decision_contract import Batch, Candidate, Rejected, Rejection, check_proposal
from app.router.gating import gate_problem
from app.router.guardrails import Verdict, first_denial
from app.router.model import ask
from app.router.outcome import Outcome, RunStatus, Stop, completion_stop, status_of
from app.router.pause import Checkpoint, Decision, PendingCall, args_digest
from app.router.policies import short
from app.router.ports import DecisionSink, RouterKit
from app.router.request_checks import RunPlan
from app.router.session import RunSession
from app.router.state import RouterState

logger = logging.getLogger("toolloop.router")


@dataclass(frozen=True, slots=True)
class Finished:
    outcome: Outcome
    stored: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Paused:
    outcome: Outcome
    stored: dict[str, Any]
    checkpoint: Checkpoint
    calls: tuple[PendingCall, ...]


RunResult = Finished | Paused


class RouterRun:
    def __init__(
        self,
        kit: RouterKit,
        plan: RunPlan,
        identity: RunIdentity,
        sink: DecisionSink,
        *,
        state: RouterState,
        messages: list[Message],
        next_seq: int,
        pending: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.kit = kit
        self.plan = plan
        self.identity = identity
        self.sink = sink
        self.state = state
        self.messages = messages
        self._next_seq = next_seq
        self._pending = tuple(pending)
        self._session: RunSession | None = None
        # The history's encodings for the model client, and the last tools offered.
        self._wire = WireCache()
        self._last_offer: assembly.Offer | None = None
        self._gated = any(tool.requires is not None for tool in plan.tools.values())

    @classmethod
    def new(
        cls, kit: RouterKit, plan: RunPlan, identity: RunIdentity, sink: DecisionSink
    ) -> RouterRun:
        state = RouterState(plan.budgets.deadline_s)
        return cls(kit, plan, identity, sink, state=state, messages=[], next_seq=0)

    @classmethod
    def restore(
        cls,
        kit: RouterKit,
        plan: RunPlan,
        identity: RunIdentity,
        sink: DecisionSink,
        checkpoint: Checkpoint,
    ) -> RouterRun:
        return cls(
            kit,
            plan,
            identity,
            sink,
            state=RouterState.load(checkpoint.state),
            messages=transcript.load(checkpoint.transcript),
            next_seq=checkpoint.next_seq,
            pending=checkpoint.pending,
        )

    @property
    def session(self) -> RunSession:
        if self._session is None:
            raise RuntimeError("the run is not started")
        return self._session

    async def start(self) -> RunResult:
        await self.begin()
        return await self._drive()

    async def begin(self) -> None:
        """Open the run's first stretch: its deterministic steps and the task message."""
        session = self._open()
        session.record("router.run_started", assembly.started_detail(session))
        await self._run_steps()
        self.messages.append(assembly.task_message(session))

    def reopen(self) -> None:
        """Open a stretch that goes on from a `carried_on` checkpoint (another process's)."""
        self._open()

    def carried_on(self) -> Checkpoint:
        """Where the run stands between two turns, redacted like a pause's checkpoint, for
        another stretch (in another process) to go on with `restore`, `reopen` and `turn`."""
        session = self.session
        session.freeze_time()
        request = replace(self.plan.request, steps=())
        return Checkpoint(
            request=DEFAULT_REDACTOR.redact(request.to_json()),
            transcript=transcript.dump(self.messages, self.kit.redactors),
            state=self.state.dump(),
            next_seq=session.engine_state.next_seq,
            pending=(),
        )

    async def resume(self, decisions: Mapping[str, Decision]) -> RunResult:
        """Settle the calls that waited for confirmation, then continue the loop."""
        self._open()
        stopped = await self.settle_waiting(decisions)
        if stopped is not None:
            return stopped
        return await self._drive()

    async def settle_waiting(self, decisions: Mapping[str, Decision]) -> RunResult | None:
        """In an open stretch (`reopen`): settle the calls that waited for confirmation
        with their decisions; the run's end when a budget stops it, else None."""
        session = self.session
        session.record(
            "router.run_resumed",
            {
                "decisions": [
                    {"confirmation_id": d.confirmation_id, "approve": d.approve}
                    for d in decisions.values()
                ]
            },
        )
        batch = Batch()
        admitted: list[Admitted] = []
        results: dict[str, str] = {}
        for entry in self._pending:
            call_id, call_key = entry["call_id"], entry["call_key"]
            decision = decisions.get(entry["confirmation_id"])
            tool = self.plan.tools.get(entry["tool"])
            if decision is None or decision.args is None or tool is None:
                results[call_id] = "rejected: confirmation: no decision was recorded for this call"
            elif args_digest(decision.args) != entry["args_digest"]:
                results[call_id] = "rejected: confirmation: the kept arguments do not match"
                results[call_id] += " their digest"
            elif not decision.approve:
                reason = f"confirmation rejected: {short(decision.reason) or 'no reason given'}"
                results[call_id] = await deny(
                    session,
                    tool,
                    decision.args,
                    call_key,
                    reason,
                    call_id=call_id,
                    kind=ErrorKind.CONFIRMATION,
                )
            else:
                blocked = gate_problem(tool, self.state, session.registered, batch.per_tool)
                if blocked is not None:
                    why = f"tool {tool.id!r} may not run now: {blocked}"
                    results[call_id] = Rejection(Rejected.BLOCKED, why).observation()
                    continue
                batch.per_tool[tool.id] = batch.per_tool.get(tool.id, 0) + 1
                confirmed = ConfirmationDecision(entry["args_digest"], approve=True)
                admitted.append(
                    Admitted(call_id, call_key, tool, decision.args, confirmed=confirmed)
                )
        results.update(await execute(session, admitted))
        for entry in self._pending:
            self.messages.append(Message.tool_result(entry["call_id"], results[entry["call_id"]]))
        self._pending = ()
        stop = self._turn_stop()
        if stop is not None:
            return self._stop(stop)
        return None

    # -- the loop -------------------------------------------------------------

    async def _drive(self) -> RunResult:
        while True:
            result = await self.turn()
            if result is not None:
                return result

    async def turn(self) -> RunResult | None:
        """One turn of the loop: the router model's reply and what it leads to (the
        calls, or the final answer and its judgement); None: the run goes on."""
        session = self.session
        stop = session.budget_stop(router_turn=True)
        if stop is not None:
            return self._stop(stop)
        offer = self._offer()
        messages = assembly.router_messages(session, offer, self.messages, self._wire)
        reply = await ask(
            session,
            self.plan.router_profile,
            messages,
            offer.definitions,
            "router",
            budgets_checked=True,
        )
        if isinstance(reply, str):
            return self._stop(reply)
        if reply is None:
            stop = self._turn_stop()
            return None if stop is None else self._stop(stop)
        if reply.tool_calls:
            return await self._act(reply, offer.tools)
        self.messages.append(Message.assistant(reply.text))
        return await self._close_attempt()

    async def _act(self, reply: ModelReply, offered: Mapping[str, Tool]) -> RunResult | None:
        session, state, limits = self.session, self.state, self.kit.limits
        turn = state.turns
        calls = _distinct_ids(reply.tool_calls)
        self.messages.append(Message.assistant(reply.text, calls))
        batch = Batch()
        results: dict[str, str] = {}
        denials: list[tuple[ToolCall, str, Candidate, str, str]] = []
        admitted: list[Admitted] = []
        pending: list[PendingCall] = []
        streak_stop = False
        for index, call in enumerate(calls):
            call_key = f"t{turn}c{index}"
            verdict = check_proposal(
                call,
                tools=self.plan.tools,
                offered=offered,
                registered=session.registered,
                state=state,
                batch=batch,
                max_calls=self.plan.budgets.max_calls,
            )
            if isinstance(verdict, Candidate):
                guardrails = self.plan.guardrails
                denial = (
                    await first_denial(
                        guardrails,
                        self._policy_call(verdict),
                        limits.policy_timeout_s,
                        self._shadowed(verdict, call_key, call.id),
                    )
                    if guardrails
                    else None
                )
                if denial is not None:
                    batch.fingerprints.add(verdict.fingerprint)
                    state.remember(verdict.fingerprint)
                    denials.append((call, call_key, verdict, denial.reason, denial.guardrail))
                    continue
                streak = state.next_streak(verdict.tool.id)
                if streak > limits.max_same_tool_streak:
                    verdict = Rejection(
                        Rejected.SAME_TOOL_STREAK,
                        f"{verdict.tool.id!r} would be called {streak} times in a row; "
                        f"the limit is {limits.max_same_tool_streak}",
                    )
            if isinstance(verdict, Rejection):
                self._reject(turn, call, call_key, verdict)
                results[call.id] = verdict.observation()
                streak_stop = streak_stop or verdict.kind is Rejected.SAME_TOOL_STREAK
                continue
            batch.take(verdict)
            batch.fingerprints.add(verdict.fingerprint)
            state.remember(verdict.fingerprint)
            state.advance_streak(verdict.tool.id, streak)  # (computed for this candidate)
            if verdict.tool.requires_confirmation:
                pending.append(self._pending_call(call, call_key, verdict))
                continue
            admitted.append(
                Admitted(
                    call.id,
                    call_key,
                    verdict.tool,
                    verdict.args,
                    session.checked(verdict.tool, verdict.fingerprint),
                )
            )
            session.record(
                "router.call_admitted",
                {
                    "turn": turn,
                    "call_id": call.id,
                    "fingerprint": verdict.fingerprint,
                    "args": self._shown_args(call, verdict.args),
                },
                tool=verdict.tool.id,
                call_key=call_key,
            )
        for call, call_key, candidate, reason, guardrail in denials:
            results[call.id] = await deny(
                session,
                candidate.tool,
                candidate.args,
                call_key,
                reason,
                call_id=call.id,
                guardrail=guardrail,
            )
        results.update(await execute(session, admitted))
        for call in calls:
            if call.id in results:
                self.messages.append(Message.tool_result(call.id, results[call.id]))
        stop = Stop.SAME_TOOL_STREAK.value if streak_stop else self._turn_stop()
        if stop is not None:
            for entry in pending:
                session.record(
                    "router.confirmation_dropped",
                    {"call_id": entry.call_id, "confirmation_id": entry.confirmation_id},
                    tool=entry.tool,
                    call_key=entry.call_key,
                )
            return self._stop(stop)
        if pending:
            return self._pause(pending)
        return None

    async def _close_attempt(self) -> RunResult | None:
        session = self.session
        answer = await closeout.write_final(session, self._turn_stop)
        if isinstance(answer, str):
            return self._stop(answer)
        self.state.attempts += 1
        verdict = await closeout.judge(session, answer)
        if verdict is None or verdict.ok:
            return self._done(answer)
        completion = self.plan.completion
        assert completion is not None
        if self.state.attempts >= completion.max_attempts:
            return self._stop(completion_stop(short(verdict.reason)))
        self.messages.append(
            assembly.completion_retry(session, verdict.reason, completion.max_attempts)
        )
        return None

    async def _run_steps(self) -> None:
        session = self.session
        for step in self.plan.request.steps:
            tool = self.plan.tools[step.tool]
            args = dict(step.args)
            blocked = gate_problem(tool, self.state, session.registered)
            if blocked is not None:
                why = f"tool {tool.id!r} may not run now: {blocked}"
                rejection = Rejection(Rejected.BLOCKED, why)
                session.record(
                    "router.call_rejected",
                    {"step": True, "kind": rejection.kind.value, "reason": rejection.reason},
                    tool=tool.id,
                    call_key=step.call_key,
                )
                self.state.observations.append(
                    {
                        "call_key": step.call_key,
                        "tool": tool.id,
                        "status": "rejected",
                        "summary": rejection.observation(),
                        "truncated": False,
                    }
                )
                continue
            candidate = Candidate(tool, args, fingerprint(tool.id, args))
            self.state.remember(candidate.fingerprint)
            denial = await first_denial(
                self.plan.guardrails,
                self._policy_call(candidate),
                self.kit.limits.policy_timeout_s,
                self._shadowed(candidate, step.call_key, None),
            )
            if denial is not None:
                await deny(
                    session,
                    tool,
                    args,
                    step.call_key,
                    denial.reason,
                    call_id=None,
                    guardrail=denial.guardrail,
                )
                continue
            session.record(
                "router.call_admitted",
                {
                    "step": True,
                    "fingerprint": candidate.fingerprint,
                    "args": shown_args(session, tool.id, args),
                },
                tool=tool.id,
                call_key=step.call_key,
            )
            self.state.advance_streak(tool.id)
            # Admission validated the step's arguments with this tool's input schema.
            checked = (
                session.checked(tool, candidate.fingerprint) if self.plan.steps_checked else None
            )
            await execute(session, [Admitted("", step.call_key, tool, args, checked)])

    # -- decisions ------------------------------------------------------------

    def _reject(self, turn: int, call: ToolCall, call_key: str, rejection: Rejection) -> None:
        state = self.state
        if rejection.kind.malformed:
            state.count_malformed(rejection.kind.value)
        elif rejection.kind is Rejected.DUPLICATE_CALL:
            state.count("duplicate_calls")
        elif rejection.kind is Rejected.BUDGET:
            state.count("budget_breaches")
        self.session.record(
            "router.call_rejected",
            {
                "turn": turn,
                "call_id": short(call.id, 100),
                "name": short(call.name, 100),
                "kind": rejection.kind.value,
                "reason": rejection.reason,
                "args": self._shown_args(call),
            },
            tool=call.name if call.name in self.plan.tools else None,
            call_key=call_key,
        )

    def _pending_call(self, call: ToolCall, call_key: str, candidate: Candidate) -> PendingCall:
        pending = PendingCall(
            confirmation_id=uuid4().hex,
            call_id=call.id,
            call_key=call_key,
            tool=candidate.tool.id,
            args=candidate.args,
            args_digest=args_digest(candidate.args),
            fingerprint=candidate.fingerprint,
            contract_hash=self.identity.contract_hash,
        )
        self.session.record(
            "router.confirmation_requested",
            {
                "call_id": call.id,
                "confirmation_id": pending.confirmation_id,
                "args_digest": pending.args_digest,
                "args": self._shown_args(call, candidate.args),
            },
            tool=pending.tool,
            call_key=call_key,
        )
        return pending

    def _turn_stop(self) -> str | None:
        counts, limits = self.state.counts, self.kit.limits
        if counts["malformed_outputs"] > limits.max_malformed_outputs:
            return Stop.MALFORMED_OUTPUT.value
        if counts["duplicate_calls"] > limits.max_duplicate_calls:
            return Stop.DUPLICATE_CALL.value
        if counts["budget_breaches"] > limits.max_budget_breaches:
            return Stop.MAX_CALLS.value
        if self.session.seconds_left() <= 0:
            return Stop.DEADLINE.value
        return None

    # -- endings --------------------------------------------------------------

    def _stop(self, stopped_by: str) -> Finished:
        self.state.status = "abort"
        return self._finished(status_of(stopped_by), stopped_by, None)

    def _done(self, answer: closeout.Answer) -> Finished:
        self.state.status = "final"
        return self._finished(RunStatus.DONE, "", answer)

    def _finished(
        self, status: RunStatus, stopped_by: str, answer: closeout.Answer | None
    ) -> Finished:
        session = self.session
        session.freeze_time()
        outcome = closeout.outcome(session, status, stopped_by, answer, [])
        session.record("router.run_finished", {"status": status.value, "stopped_by": stopped_by})
        return Finished(outcome, closeout.stored(session, outcome))

    def _pause(self, pending: Sequence[PendingCall]) -> Paused:
        session = self.session
        self.state.status = "pending"
        session.freeze_time()
        listed = [p.public() for p in pending]
        outcome = closeout.outcome(
            session, RunStatus.PENDING, Stop.CONFIRMATION.value, None, listed
        )
        request = replace(self.plan.request, steps=())
        checkpoint = Checkpoint(
            request=DEFAULT_REDACTOR.redact(request.to_json()),
            transcript=transcript.dump(self.messages, self.kit.redactors),
            state=self.state.dump(),
            next_seq=session.engine_state.next_seq,
            pending=listed,
        )
        session.record("router.run_paused", {"confirmations": listed})
        return Paused(outcome, closeout.stored(session, outcome), checkpoint, tuple(pending))

    # -- helpers --------------------------------------------------------------

    def _open(self) -> RunSession:
        self._session = RunSession(
            self.kit, self.plan, self.identity, self.sink, self.state, self._next_seq
        )
        return self._session

    def _offer(self) -> assembly.Offer:
        """The tools offered this turn; the same `Offer` while the set is unchanged."""
        last = self._last_offer
        if last is not None and not self._gated:
            return last
        registered = self.session.registered
        offered = {
            tool_id: tool
            for tool_id, tool in self.plan.tools.items()
            if gate_problem(tool, self.state, registered) is None
        }
        if last is None or list(offered) != list(last.tools):
            last = self._last_offer = assembly.offer(offered)
        return last

    def _policy_call(self, candidate: Candidate) -> dict[str, Any]:
        return {
            "tool": candidate.tool.id,
            "args": candidate.args,
            "owner": self.plan.owner.name,
            "run_id": self.identity.run_id,
        }

    def _shadowed(
        self, candidate: Candidate, call_key: str, call_id: str | None
    ) -> Callable[[Verdict], None]:
        """Where a shadow guardrail's verdict on this call goes: an audit event, a
        metric, and a log line when the guardrail failed (it failed open)."""
        session = self.session

        def shadowed(verdict: Verdict) -> None:
            kind = "router.shadow_failed" if verdict.failed else "router.shadow_denied"
            session.record(
                kind,
                {
                    "guardrail": verdict.guardrail,
                    "reason": verdict.reason,
                    "call_id": call_id,
                    "fingerprint": candidate.fingerprint,
                },
                tool=candidate.tool.id,
                call_key=call_key,
            )
            record_shadow_verdict(verdict.guardrail, failed=verdict.failed)
            if verdict.failed:
                logger.warning(
                    "router run %s: shadow guardrail %r failed, call %s goes on (fail open "
                    "in shadow mode only): %s",
                    self.identity.run_id,
                    verdict.guardrail,
                    call_key,
                    verdict.reason,
                )

        return shadowed

    def _shown_args(self, call: ToolCall, parsed: Mapping[str, Any] | None = None) -> str:
        """The call's arguments as recorded: redacted and shortened. `parsed` is what
        `call.arguments` parsed to, when the proposal check parsed it already."""
        redactor = self.kit.redactors.get(call.name, DEFAULT_REDACTOR)
        if parsed is None:
            shown = transcript.redact_arguments(call.arguments, redactor)
        else:
            shown = transcript.redact_parsed(parsed, redactor)
        return short(shown, MAX_SHOWN_ARGS)


def _distinct_ids(calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """Tool results are matched by call id: make the ids of one turn distinct."""
    if len(calls) == 1:
        return tuple(calls)
    seen: set[str] = set()
    out: list[ToolCall] = []
    for index, call in enumerate(calls):
        call_id = call.id
        if call_id in seen:
            call_id = f"{call.id}~{index}"
            call = ToolCall(call_id, call.name, call.arguments)
        seen.add(call_id)
        out.append(call)
    return tuple(out)
