"""How both API-side executors ask a run's workflow where the run stands (its
`SETTLED` and `RESUME` updates), as a cancellable wait."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import (
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError

from app.temporal.confirmation_messages import Settlement
from app.temporal.handles import ExecutorUnavailable


async def settlement(
    handle: WorkflowHandle[Any, Any], update: str, *args: Any
) -> Settlement | None:
    """The workflow's answer to `update`: the run's pause or its end; None when the
    workflow had ended already. A cancel of the waiting task stays a cancel (the
    supervisor's stop), whatever the client makes of it."""
    try:
        answer: Settlement = await handle.execute_update(
            update, args=list(args), result_type=Settlement
        )
    except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError() from exc
        raise ExecutorUnavailable(f"the run's workflow did not answer: {exc}") from exc
    except WorkflowUpdateFailedError as exc:
        raise ExecutorUnavailable(f"the run's workflow did not answer: {exc}") from exc
    except RPCError:  # the workflow ended already
        return None
    return answer
