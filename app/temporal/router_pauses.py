"""A router run's workflow's pauses: the run waits there for its confirmations' decisions.

A stretch that pauses the run records the pause as a local run's (its
checkpoint, its confirmations); the workflow then waits, costing nothing,
until a decision's `RESUME` brings the decisions, and the next stretch settles
the waiting calls with them. `serve` learns where the run stands from the
`SETTLED` and `RESUME` updates' answers.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from app.temporal.confirmation_messages import Settlement
    from app.temporal.router_messages import PAUSED, RouterDecision


class RouterPauses:
    def __init__(self) -> None:
        self._pauses = 0
        self._paused = False
        # Each pause's decisions, in order (a RESUME may come before its pause was seen).
        self._decided: list[list[RouterDecision]] = []
        self._ended: str | None = None

    async def decisions(self) -> list[RouterDecision]:
        """Wait until the run's pause was decided."""
        self._pauses += 1
        if len(self._decided) < self._pauses:
            self._paused = True
            await workflow.wait_condition(lambda: len(self._decided) >= self._pauses)
        return self._decided[self._pauses - 1]

    def end(self, status: str) -> None:
        self._ended = status

    async def settled(self) -> Settlement:
        """The run's next pause, or its end."""
        await workflow.wait_condition(lambda: self._ended is not None or self._paused)
        return Settlement(self._ended or PAUSED)

    async def resume(self, decisions: list[RouterDecision]) -> Settlement:
        self._decided.append(decisions)
        self._paused = False
        return await self.settled()
