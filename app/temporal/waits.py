"""A plan's workflow's confirmations: its chains that wait at the gate, and its pauses.

A call stopped at the confirmation gate parks its chain, which gives its lane
to the next one. Once every chain finished or waits, the run pauses (recorded
by the `PAUSE_RUN` activity, as a local run's pause) until the store says its
calls were decided (`standing`); every waiting chain then runs its call again,
which meets its decision at the gate. A run closed while it waited ends its
workflow as it stands. A parked chain costs nothing: it waits in the
workflow's history. The wait for the decisions does not count against the
plan's deadline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow

from app.temporal.standing import Standing

with workflow.unsafe.imports_passed_through():
    from app.temporal.confirmation_messages import PausedCall, Settlement, WaitingSpec

PENDING = "pending"
RUNNING = "running"

Pause = Callable[[list[PausedCall]], Awaitable[None]]


class ClosedWhileWaiting(Exception):
    """The run was ended in the store while it waited for decisions (its contract
    changed, or it was cancelled): its workflow ends with it, writing nothing."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class Waits:
    def __init__(self) -> None:
        # Chains neither finished nor parked (None until the run starts).
        self._open: int | None = None
        self._parked: list[PausedCall] = []
        # The pause the run is in (its waiting calls), once it was recorded.
        self._paused: list[PausedCall] | None = None
        self._round = 0
        self._standing = Standing()
        self._ended: str | None = None
        self.waited_s = 0.0

    def begin(self, chains: int) -> None:
        self._open = chains

    def finished(self) -> None:
        """A chain ended (its calls ran, or it stopped)."""
        assert self._open is not None
        self._open -= 1

    def end(self, status: str) -> None:
        """The run ended: the updates waiting for it answer."""
        self._ended = status

    async def park(self, waiting: WaitingSpec, args: dict[str, Any]) -> None:
        """Wait until the run's waiting calls were decided."""
        assert self._open is not None
        self._parked.append(PausedCall(waiting, args))
        self._open -= 1
        parked_in = self._round
        await workflow.wait_condition(lambda: self._round > parked_in)

    async def pauses(self, run_id: str, pause: Pause) -> None:
        """Until every chain finished: each time the open chains all wait, record the
        pause, wait until the store says the run no longer waits, and let the waiting
        chains go on. Raises ClosedWhileWaiting."""
        while True:
            await workflow.wait_condition(lambda: self._open == 0)
            if not self._parked:
                return
            # A RESUME may arrive before the pause's activity reported back: it is a
            # nudge about this pause.
            self._standing.watch()
            await pause(self._parked)
            paused_at = workflow.now()
            self._paused = self._parked
            status = await self._standing.decided(run_id)
            self._paused = None
            if status != RUNNING:
                self._ended = status
                raise ClosedWhileWaiting(status)
            self.waited_s += (workflow.now() - paused_at).total_seconds()
            assert self._open is not None
            self._open += len(self._parked)
            self._parked = []
            self._round += 1

    async def settled(self) -> Settlement:
        """The run's next pause (its waiting calls), or its end."""
        await workflow.wait_condition(lambda: self._ended is not None or self._paused is not None)
        if self._ended is not None:
            return Settlement(self._ended)
        assert self._paused is not None
        return Settlement(PENDING, [call.waiting for call in self._paused])

    async def resume(self) -> Settlement:
        """A nudge: the run's decisions may be in the store; answer at the run's next
        pause or its end (or this pause, when the store says it still waits)."""
        self._standing.nudge()
        await self._standing.looked()
        return await self.settled()
