"""What one stretch of a router run shares: the plan, the state, the engine's run,
the clock and the decision record. A run has one stretch per process that drives it
(the first, then one per resume)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from app.contract.compiled import Tool
from app.engine.receipt import Receipt
from app.engine.run import RunIdentity, RunKind, RunState
from app.engine.watchdog import Deadlines, Watchdog
from app.router.outcome import Stop
from app.router.ports import DecisionSink, RouterKit
from app.router.request_checks import RunPlan
from app.router.state import RouterState


class RunSession:
    def __init__(
        self,
        kit: RouterKit,
        plan: RunPlan,
        identity: RunIdentity,
        sink: DecisionSink,
        state: RouterState,
        next_seq: int,
    ) -> None:
        self.kit = kit
        self.plan = plan
        self.identity = identity
        self.sink = sink
        # `session.record(kind, detail, *, tool=None, call_key=None)`: the sink's own
        # method (a few decisions a turn, without a forwarding frame).
        self.record = sink.record
        self.state = state
        # The engine's tools (its contract is fixed for its lifetime).
        self.registered: Mapping[str, Tool] = kit.engine.contract.tools
        # This stretch's receipts, in the caller's copy; the state keeps every redacted one.
        self.receipts: list[Receipt] = []
        # The redacted copy of each of `receipts` (same order), rendered once per receipt.
        self._stored: list[dict[str, Any]] = []
        # This stretch's model replies, redacted and capped (`recording`), in order.
        self.replies: list[dict[str, Any]] = []
        # How many of the engine run's dispatched receipts were already collected.
        self.dispatched_seen = 0
        loop = asyncio.get_running_loop()
        # The loop's clock: time.monotonic itself when that is what the loop reads
        # (asyncio's own loops), which spares a Python frame on every budget check.
        uses_monotonic = getattr(type(loop), "time", None) is asyncio.BaseEventLoop.time
        self._now: Callable[[], float] = time.monotonic if uses_monotonic else loop.time
        self._t0 = self._now()
        # One loop timer for the stretch (see `Deadlines`), not one per model call.
        self._deadlines = Deadlines(loop)
        remaining = plan.budgets.deadline_s - state.elapsed_s
        self.engine_state: RunState = kit.engine.open_run(
            identity, RunKind.ROUTER, deadline_s=max(remaining, 0.001), first_seq=next_seq
        )
        if state.tools:
            # A resumed run: the engine judges `requires` (of calls tools dispatch, and
            # again of the router's own) from what the run did before, as the router does.
            self.engine_state.requirements.seed(
                {tool: state.succeeded(tool) for tool in state.tools},
                {tool: state.calls_of(tool) for tool in state.tools},
            )

    def checked(self, tool: Tool, fingerprint: str) -> str | None:
        """`fingerprint`, to hand to `Engine.run_call` as checked, when the arguments
        were validated with the very tool the engine runs (its compiled input schema);
        None when the run's tool is not the engine's own (the engine checks again)."""
        return fingerprint if self.registered.get(tool.id) is tool else None

    def elapsed(self) -> float:
        return self.state.elapsed_s + (self._now() - self._t0)

    def seconds_left(self) -> float:
        # `deadline_s - elapsed()`, inline: checked several times a turn.
        return self.plan.budgets.deadline_s - (self.state.elapsed_s + (self._now() - self._t0))

    def deadline_watch(self) -> Watchdog:
        """`with session.deadline_watch():` cancels the current task when the run's
        time is up, and turns that into `WatchdogExpired`."""
        return self._deadlines.arm(self._t0 + (self.plan.budgets.deadline_s - self.state.elapsed_s))

    def freeze_time(self) -> None:
        """Fold the time spent so far into the state (before it is kept or reported)."""
        self.state.elapsed_s = self.elapsed()
        self._t0 = self._now()

    def budget_stop(self, *, router_turn: bool) -> str | None:
        """The budget a model call would breach, checked before it is spent."""
        budgets, state = self.plan.budgets, self.state
        if router_turn and state.turns >= budgets.max_turns:
            return Stop.MAX_TURNS.value
        if budgets.max_tokens is not None and state.tokens >= budgets.max_tokens:
            return Stop.MAX_TOKENS.value
        if budgets.max_cost_nanos is not None and (state.cost_nanos or 0) >= budgets.max_cost_nanos:
            return Stop.MAX_COST.value
        if self.seconds_left() <= 0:
            return Stop.DEADLINE.value
        return None

    def keep(
        self, receipt: Receipt, stored: dict[str, Any], observation: dict[str, Any] | None
    ) -> None:
        """Keep a settled receipt of this stretch, with `stored` = `receipt.to_stored()`
        (kept as given: pass a fresh one) and what the model saw of it, if anything."""
        self.state.add_receipt(stored, observation)
        self.receipts.append(receipt)
        self._stored.append(stored)

    def caller_copies(self) -> list[dict[str, Any]]:
        """This stretch's receipts in the caller's copy (`Receipt.to_response()`), in
        sequence order, derived from the redacted copies kept rather than rendered again."""
        kept = sorted(zip(self.receipts, self._stored, strict=True), key=lambda pair: pair[0].seq)
        return [caller_copy(receipt, stored) for receipt, stored in kept]

    def records(self) -> list[dict[str, Any]]:
        """Every receipt of the run (redacted), in sequence order."""
        return sorted(self.state.records, key=lambda record: int(record["seq"]))


# What `Receipt.to_stored()` adds to the fields of `Receipt.to_response()`.
_STORED_ONLY = ("run_id", "seq", "owner", "definition_hash")


def caller_copy(receipt: Receipt, stored: dict[str, Any]) -> dict[str, Any]:
    """`receipt.to_response()`, from `stored` (its `to_stored()`): the same keys in the
    same order, with the real output, error and control in place of the redacted ones."""
    view = stored.copy()
    for key in _STORED_ONLY:
        del view[key]
    view["output"] = receipt.output
    error = receipt.error
    view["error"] = None if error is None else error.to_dict()
    control = receipt.control
    view["control"] = None if control is None else dict(control)
    return view
