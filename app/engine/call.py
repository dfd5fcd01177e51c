"""One call while it runs: what to run, and what has happened to it so far.

Internal to the engine (tools see a call through `ExecutionContext`). Mutable
on purpose: one record per call, updated in place, read when it settles.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping
from datetime import datetime
from time import perf_counter
from typing import Any

from app.contract.compiled import Tool
from app.engine.receipt import CallError, Receipt
from app.engine.run import RunState

# Receipt ids: 128 random bits, from a generator seeded by the OS and reseeded in a
# forked child (so two workers never share a sequence). Not secrets, identifiers:
# os.urandom is a system call, four times the cost, once per call.
_ids = random.Random()
os.register_at_fork(after_in_child=_ids.seed)
_random_bits = _ids.getrandbits


class Call:
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

    def __init__(
        self,
        state: RunState,
        tool: Tool,
        args: Mapping[str, Any],
        seq: int,
        call_key: str,
        item_key: str | None,
        parent_receipt_id: str | None,
        started_at: datetime,
    ) -> None:
        self.state = state
        self.tool = tool
        self.args = args
        self.seq = seq
        self.call_key = call_key
        self.item_key = item_key
        self.parent_receipt_id = parent_receipt_id
        self.receipt_id = _random_bits(128).to_bytes(16).hex()
        self.started_at = started_at
        self.t0 = perf_counter()
        self.fingerprint = ""
        self.attempts = 0
        self.wait_ms = 0.0
        # The attempt whose callable is running right now (0: none); dispatches
        # are accepted only from it.
        self.running_attempt = 0
        # Cancelled (not just finished) while its callable was running.
        self.interrupted = False
        self.last_error: CallError | None = None
        self.dispatches = 0
        self.threaded: set[asyncio.Task[Receipt]] | None = None

    @property
    def idempotency_key(self) -> str:
        # Stable across attempts (and across a resume of the same run).
        return f"{self.state.identity.run_id}:{self.seq}"

    def begin_attempt(self) -> int:
        self.attempts += 1
        self.running_attempt = self.attempts
        return self.attempts

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
