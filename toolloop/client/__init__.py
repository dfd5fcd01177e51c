"""ToolLoop's client for orchestrators: plans, router runs, reads and approvals over HTTP.

It imports nothing of the service. `Client` is for synchronous code, `AsyncClient` for
asyncio; both mint an Idempotency-Key per plan and reuse it on every retry, retry only
what is safe to repeat (`RetryPolicy`), raise `ProblemError` (with the problem body) for
what the service refused, and page through lists as iterators.
"""

from toolloop.client.aio import AsyncClient
from toolloop.client.errors import (
    ConnectionLost,
    FieldProblem,
    Problem,
    ProblemError,
    RetriesExhausted,
    ToolLoopError,
    UnansweredRequest,
    Unreachable,
)
from toolloop.client.models import (
    AuditEvent,
    CallError,
    Confirmation,
    LaneResult,
    PendingCall,
    PlanResult,
    Receipt,
    RouterRunResult,
    Run,
    RunAccepted,
    RunEvent,
    Usage,
)
from toolloop.client.retry import NO_RETRY, RetryPolicy
from toolloop.client.sync import Client

__all__ = [
    "NO_RETRY",
    "AsyncClient",
    "AuditEvent",
    "CallError",
    "Client",
    "Confirmation",
    "ConnectionLost",
    "FieldProblem",
    "LaneResult",
    "PendingCall",
    "PlanResult",
    "Problem",
    "ProblemError",
    "Receipt",
    "RetriesExhausted",
    "RetryPolicy",
    "RouterRunResult",
    "Run",
    "RunAccepted",
    "RunEvent",
    "ToolLoopError",
    "UnansweredRequest",
    "Unreachable",
    "Usage",
]
