"""How a paused run's workflow learns that its confirmations were decided: it asks the store.

The decision that leaves nothing pending moves the run from `pending` back to
`running` in the store, in the decision's own transaction; the `RESUME`
update `serve` sends after it is only a nudge to look now. The workflow also
looks on its own, at growing intervals, so a `serve` lost between its commit
and its nudge delays the run but does not strand it, and a run closed while it
waited (a changed contract, a cancel) ends its workflow without another write.
A nudge is idempotent: one that finds the run still `pending` changes nothing.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

RUN_STANDING = "toolloop.run_standing"
PENDING = "pending"
# The first look without a nudge, doubled each time up to the longest: a decision
# that lost its nudge is found within that long, and each waiting day adds about a
# thousand events (a timer, a workflow task and a marker per look) to the history.
FIRST_LOOK = timedelta(seconds=5)
LONGEST_LOOK = timedelta(minutes=10)
LOOK_TIMEOUT = timedelta(seconds=60)
LOOK_RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=200))


class Standing:
    def __init__(self) -> None:
        self._nudges = 0
        self._seen = 0
        # The nudges the last finished look started after (a look answers those).
        self._answered = 0
        # From the pause's start until a look found the run no longer pending.
        self._watching = False

    def watch(self) -> None:
        """The run is pausing: a nudge from now on is about this pause."""
        self._watching = True

    def nudge(self) -> None:
        self._nudges += 1

    async def decided(self, run_id: str) -> str:
        """Once the paused run no longer waits: its status in the store (`running`, or
        the end it was closed with)."""
        self._watching = True
        wait = FIRST_LOOK
        while True:
            try:
                await workflow.wait_condition(lambda: self._nudges > self._seen, timeout=wait)
            except TimeoutError:
                wait = min(wait * 2, LONGEST_LOOK)
            seen = self._seen = self._nudges
            status: str = await workflow.execute_local_activity(
                RUN_STANDING,
                run_id,
                result_type=str,
                start_to_close_timeout=LOOK_TIMEOUT,
                retry_policy=LOOK_RETRIES,
            )
            self._answered = seen
            if status != PENDING:
                self._watching = False
                return status

    @property
    def answered(self) -> bool:
        """Whether a look that started after the latest nudge answered it."""
        return self._answered >= self._nudges

    async def looked(self) -> None:
        """After a nudge: once a look that started after it answered (at once when no
        pause is watched)."""
        await workflow.wait_condition(lambda: self.answered or not self._watching)
