"""One call while it runs: what to run, and what has happened to it so far.

Internal to the engine (tools see a call through `ExecutionContext`). Mutable
on purpose: one record per call, updated in place, read when it settles.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from time import perf_counter
from typing import Any

from app.contract.compiled import Tool
from app.engine.receipt import CallError, Receipt
from app.engine.run import RunState
from app.foundation.ids import new_receipt_id

_new_object = object.__new__


def new_call(
    state: RunState,
    tool: Tool,
    args: Mapping[str, Any],
    seq: int,
    call_key: str,
    item_key: str | None,
    parent_receipt_id: str | None,
    started_at: datetime,
) -> Call:
    """A call starting now. A function, not `Call.__init__`: CPython runs a Python
    function called from Python without the C-level detour a class call takes to
    `__init__`, and this runs once per call."""
    call: Call = _new_object(Call)
    call.state = state
    call.tool = tool
    call.args = args
    call.seq = seq
    call.call_key = call_key
    call.item_key = item_key
    call.parent_receipt_id = parent_receipt_id
    call.receipt_id = new_receipt_id()
    call.started_at = started_at
    call.t0 = perf_counter()
    call.attempts = 0
    call.wait_ms = 0.0
    call.running_attempt = 0
    call.interrupted = False
    call.last_error = None
    call.dispatches = 0
    call.threaded = None
    return call


class Call:
    """Made by `new_call`."""

    __slots__ = (
        "args",
        "attempts",
        "call_key",
        "dispatches",
        "fingerprint",
        "interrupted",
        "item_key",
        "last_error",
        "parent_receipt_id",
        "receipt_id",
        "running_attempt",
        "seq",
        "started_at",
        "state",
        "t0",
        "threaded",
        "tool",
        "wait_ms",
    )

    state: RunState
    tool: Tool
    args: Mapping[str, Any]
    seq: int
    call_key: str
    item_key: str | None
    parent_receipt_id: str | None
    receipt_id: str
    started_at: datetime
    t0: float  # perf_counter() at the start
    # Set by whoever makes the call, before it settles (nothing reads a default).
    fingerprint: str
    attempts: int
    wait_ms: float
    # The attempt whose callable is running right now (0: none); dispatches are
    # accepted only from it.
    running_attempt: int
    # Cancelled (not just finished) while its callable was running.
    interrupted: bool
    last_error: CallError | None
    dispatches: int
    threaded: set[asyncio.Task[Receipt]] | None

    @property
    def idempotency_key(self) -> str:
        # Stable across attempts (and across a resume of the same run).
        return f"{self.state.identity.run_id}:{self.seq}"

    def end_attempt(self) -> None:
        """No more dispatches from this attempt; cancel those a sync callable still waits on."""
        self.running_attempt = 0
        if self.threaded:
            for task in self.threaded:
                task.cancel()

    def track(self, task: asyncio.Task[Receipt]) -> None:
        if self.threaded is None:
            self.threaded = set()
        self.threaded.add(task)
        task.add_done_callback(self.threaded.discard)
