"""Bounded retry: which failures are retried, and how long to wait in between.

Only exceptions and the tool's own timeouts are retried, never schema
failures, cancellations or a run deadline. A non_idempotent call that timed
out is not retried: it may have taken effect, so its outcome is unknown.
"""

from __future__ import annotations

import random

from app.contract.compiled import Effect, RetryPolicy
from app.engine.receipt import CallError, ErrorKind

# Beyond this the doubling no longer matters: backoff_max_s caps the delay anyway.
_MAX_DOUBLINGS = 62


def is_retryable(error: CallError, effect: Effect) -> bool:
    if error.kind is ErrorKind.EXCEPTION:
        return True
    return error.kind is ErrorKind.TIMEOUT and effect is not Effect.NON_IDEMPOTENT


def backoff_delay(policy: RetryPolicy, failures: int, rng: random.Random) -> float:
    """Full jitter: uniform over [0, min(backoff_max_s, backoff_s * 2**(failures - 1))]."""
    ceiling = min(
        policy.backoff_max_s,
        policy.backoff_s * float(2 ** min(failures - 1, _MAX_DOUBLINGS)),
    )
    return rng.uniform(0.0, ceiling) if ceiling > 0.0 else 0.0
