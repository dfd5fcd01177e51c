"""A router run's workflow's pauses: the run waits there until the store says it was decided.

A stretch that pauses the run records the pause as a local run's (its
checkpoint, its confirmations with the calls' kept arguments); the workflow
then waits, costing nothing, until the run is no longer `pending` in the
store (`Standing`): `running` once the last decision was committed, and the
next stretch settles the waiting calls with the decisions it reads there; any
other status is the end the run was closed with while it waited. A decision's
`RESUME` update is only a nudge to look now, so a duplicate or late one
changes nothing. `serve` learns where the run stands from the `SETTLED` and
`RESUME` updates' answers.
"""

from __future__ import annotations

from temporalio import workflow

from app.temporal.standing import Standing

with workflow.unsafe.imports_passed_through():
    from app.temporal.confirmation_messages import Settlement
    from app.temporal.router_messages import PAUSED


class RouterPauses:
    def __init__(self) -> None:
        self._standing = Standing()
        self._paused = False
        self._ended: str | None = None

    async def decided(self, run_id: str) -> str:
        """Wait until the paused run no longer waits: its status in the store (`running`,
        or the end it was closed with)."""
        self._paused = True
        status = await self._standing.decided(run_id)
        self._paused = False
        return status

    def end(self, status: str) -> None:
        self._ended = status

    async def settled(self) -> Settlement:
        """The run's next pause, or its end. A pause answers once every nudge is looked
        into: a decision already made is not answered as a pause."""
        await workflow.wait_condition(
            lambda: self._ended is not None or (self._paused and self._standing.answered)
        )
        return Settlement(self._ended or PAUSED)

    async def resume(self) -> Settlement:
        """A decision was made: look now, and answer at the next pause or the end."""
        self._standing.nudge()
        return await self.settled()
