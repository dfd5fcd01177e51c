"""What both of the API side's executors (plans', router runs') share: a run's
workflow id, its cancel, and the answer while Temporal cannot be reached."""

from __future__ import annotations

import logging
from contextlib import suppress

from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from app.service.errors import EXECUTOR_UNAVAILABLE, ServiceUnavailable
from app.service.runs.tasks import CANCELLED

logger = logging.getLogger("toolloop.temporal")

# A run still going on in Temporal when this process stops answering for it.
RUNNING = "running"


class ExecutorUnavailable(ServiceUnavailable):
    """The cause (Temporal's words, its address) goes to the log only."""

    def __init__(self, cause: str) -> None:
        super().__init__(EXECUTOR_UNAVAILABLE, retry_after_s=5, log=cause)


def workflow_id(run_id: str) -> str:
    """A run's workflow id, plans' and router runs' alike (run ids are unique across
    kinds), so that a cancel needs only the run's id."""
    return f"toolloop-run-{run_id}"


async def cancel_workflow(client: Client, run_id: str) -> str | None:
    """Cancel the run's workflow and wait until it ended: `cancelled` once it did (or
    had ended already), None when Temporal could not be asked."""
    handle = client.get_workflow_handle(workflow_id(run_id))
    try:
        await handle.cancel()
    except RPCError as exc:
        logger.warning("run %s: the workflow could not be cancelled: %s", run_id, exc)
        return None
    with suppress(WorkflowFailureError, RPCError):
        await handle.result()
    return CANCELLED
